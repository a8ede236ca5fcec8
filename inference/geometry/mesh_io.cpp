// Mesh file writers (GLB, OBJ, binary STL, binary PLY) and the Assimp importer.
#include "inference/geometry/mesh_io.h"

#include <assimp/Importer.hpp>
#include <assimp/postprocess.h>
#include <assimp/scene.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_cleanup.h"

namespace cubeforge {

static_assert(std::endian::native == std::endian::little, "the binary writers assume a little-endian host");

namespace {

class ByteWriter {
 public:
  template <class T>
  void put(T value) {
    const size_t at = bytes_.size();
    bytes_.resize(at + sizeof(T));
    std::memcpy(bytes_.data() + at, &value, sizeof(T));
  }
  void put_bytes(const void* data, size_t size) {
    const auto* p = static_cast<const std::byte*>(data);
    bytes_.insert(bytes_.end(), p, p + size);
  }
  void put_text(std::string_view text) { put_bytes(text.data(), text.size()); }
  void pad_to_4(std::byte fill) {
    while (bytes_.size() % 4) bytes_.push_back(fill);
  }
  std::vector<std::byte>& bytes() { return bytes_; }

 private:
  std::vector<std::byte> bytes_;
};

Status check_exportable(const Mesh& mesh, const std::filesystem::path& path) {
  const std::string what = "cannot export '" + path.string() + "'";
  const std::string where = what + ": ";
  if (mesh.empty()) return make_error(ErrorCode::kInvalidArgument, where + "the mesh has no faces");
  CUBEFORGE_TRY(check_mesh_indices(mesh, what));
  for (float x : mesh.positions)
    if (!std::isfinite(x)) return make_error(ErrorCode::kInvalidArgument, where + "a vertex position is not finite");
  return ok_status();
}

std::array<float, 3> face_normal(const Mesh& mesh, size_t f) {
  const float* p0 = &mesh.positions[size_t(mesh.indices[f * 3]) * 3];
  const float* p1 = &mesh.positions[size_t(mesh.indices[f * 3 + 1]) * 3];
  const float* p2 = &mesh.positions[size_t(mesh.indices[f * 3 + 2]) * 3];
  const double u[3] = {double(p1[0]) - p0[0], double(p1[1]) - p0[1], double(p1[2]) - p0[2]};
  const double w[3] = {double(p2[0]) - p0[0], double(p2[1]) - p0[1], double(p2[2]) - p0[2]};
  const double n[3] = {u[1] * w[2] - u[2] * w[1], u[2] * w[0] - u[0] * w[2], u[0] * w[1] - u[1] * w[0]};
  const double length = std::sqrt(n[0] * n[0] + n[1] * n[1] + n[2] * n[2]);
  if (!(length > 0)) return {0.f, 0.f, 0.f};
  return {float(n[0] / length), float(n[1] / length), float(n[2] / length)};
}

void append_float(std::string& out, float value) {
  char buffer[32];
  auto [end, error] = std::to_chars(buffer, buffer + sizeof buffer, value);  // shortest exact form
  out.append(buffer, end);
}

std::vector<std::byte> encode_glb(const Mesh& mesh) {
  const size_t vertex_bytes = mesh.positions.size() * sizeof(float);
  const size_t index_bytes = mesh.indices.size() * sizeof(uint32_t);
  const Bounds3 bounds = mesh.bounds();
  nlohmann::json gltf = {
      {"asset", {{"version", "2.0"}, {"generator", "cubeforge"}}},
      {"scene", 0},
      {"scenes", {{{"nodes", {0}}}}},
      {"nodes", {{{"mesh", 0}}}},
      {"meshes", {{{"primitives", {{{"attributes", {{"POSITION", 0}, {"NORMAL", 1}}}, {"indices", 2}, {"mode", 4}}}}}}},
      {"buffers", {{{"byteLength", 2 * vertex_bytes + index_bytes}}}},
      {"bufferViews",
       {{{"buffer", 0}, {"byteOffset", 0}, {"byteLength", vertex_bytes}, {"target", 34962}},
        {{"buffer", 0}, {"byteOffset", vertex_bytes}, {"byteLength", vertex_bytes}, {"target", 34962}},
        {{"buffer", 0}, {"byteOffset", 2 * vertex_bytes}, {"byteLength", index_bytes}, {"target", 34963}}}},
      {"accessors",
       {{{"bufferView", 0},
         {"componentType", 5126},
         {"count", mesh.vertex_count()},
         {"type", "VEC3"},
         {"min", {bounds.min[0], bounds.min[1], bounds.min[2]}},
         {"max", {bounds.max[0], bounds.max[1], bounds.max[2]}}},
        {{"bufferView", 1}, {"componentType", 5126}, {"count", mesh.vertex_count()}, {"type", "VEC3"}},
        {{"bufferView", 2}, {"componentType", 5125}, {"count", mesh.indices.size()}, {"type", "SCALAR"}}}},
  };
  std::string json = gltf.dump();
  while (json.size() % 4) json.push_back(' ');  // the JSON chunk is padded with spaces
  const size_t binary_bytes = (2 * vertex_bytes + index_bytes + 3) / 4 * 4;

  ByteWriter out;
  out.put<uint32_t>(0x46546C67u);  // "glTF"
  out.put<uint32_t>(2);
  out.put<uint32_t>(uint32_t(12 + 8 + json.size() + 8 + binary_bytes));
  out.put<uint32_t>(uint32_t(json.size()));
  out.put<uint32_t>(0x4E4F534Au);  // "JSON"
  out.put_text(json);
  out.put<uint32_t>(uint32_t(binary_bytes));
  out.put<uint32_t>(0x004E4942u);  // "BIN\0"
  out.put_bytes(mesh.positions.data(), vertex_bytes);
  out.put_bytes(mesh.normals.data(), vertex_bytes);
  out.put_bytes(mesh.indices.data(), index_bytes);
  out.pad_to_4(std::byte{0});
  return std::move(out.bytes());
}

std::string encode_obj(const Mesh& mesh) {
  std::string text = "# cubeforge mesh: " + std::to_string(mesh.vertex_count()) + " vertices, " +
                     std::to_string(mesh.face_count()) + " triangles\n";
  text.reserve(mesh.vertex_count() * 80 + mesh.face_count() * 40);
  for (const auto* array : {&mesh.positions, &mesh.normals}) {
    const char* tag = array == &mesh.positions ? "v" : "vn";
    for (size_t v = 0; v < mesh.vertex_count(); ++v) {
      text += tag;
      for (int a = 0; a < 3; ++a) {
        text += ' ';
        append_float(text, (*array)[v * 3 + size_t(a)]);
      }
      text += '\n';
    }
  }
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    text += 'f';
    for (int c = 0; c < 3; ++c) {
      const std::string index = std::to_string(mesh.indices[f * 3 + size_t(c)] + 1);  // OBJ counts from 1
      text += ' ';
      text += index;
      text += "//";
      text += index;
    }
    text += '\n';
  }
  return text;
}

std::vector<std::byte> encode_stl(const Mesh& mesh) {
  ByteWriter out;
  char header[80] = {};
  // A binary STL header must not start with "solid", or readers take it for text.
  std::snprintf(header, sizeof header, "cubeforge binary STL, %zu triangles", mesh.face_count());
  out.put_bytes(header, sizeof header);
  out.put<uint32_t>(uint32_t(mesh.face_count()));
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    const auto normal = face_normal(mesh, f);
    out.put_bytes(normal.data(), 12);
    for (int c = 0; c < 3; ++c) out.put_bytes(&mesh.positions[size_t(mesh.indices[f * 3 + size_t(c)]) * 3], 12);
    out.put<uint16_t>(0);
  }
  return std::move(out.bytes());
}

std::vector<std::byte> encode_ply(const Mesh& mesh) {
  ByteWriter out;
  out.put_text("ply\nformat binary_little_endian 1.0\ncomment cubeforge mesh\nelement vertex " +
               std::to_string(mesh.vertex_count()) +
               "\nproperty float x\nproperty float y\nproperty float z\n"
               "property float nx\nproperty float ny\nproperty float nz\n"
               "element face " +
               std::to_string(mesh.face_count()) + "\nproperty list uchar uint vertex_indices\nend_header\n");
  for (size_t v = 0; v < mesh.vertex_count(); ++v) {
    out.put_bytes(&mesh.positions[v * 3], 12);
    out.put_bytes(&mesh.normals[v * 3], 12);
  }
  for (size_t f = 0; f < mesh.face_count(); ++f) {
    out.put<uint8_t>(3);
    out.put_bytes(&mesh.indices[f * 3], 12);
  }
  return std::move(out.bytes());
}

}  // namespace

const char* mesh_file_format_name(MeshFileFormat format) {
  switch (format) {
    case MeshFileFormat::kGlb: return "GLB";
    case MeshFileFormat::kObj: return "OBJ";
    case MeshFileFormat::kStl: return "STL";
    case MeshFileFormat::kPly: return "PLY";
  }
  return "?";
}

Result<MeshFileFormat> mesh_file_format_from_path(const std::filesystem::path& path) {
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  if (extension == ".glb") return MeshFileFormat::kGlb;
  if (extension == ".obj") return MeshFileFormat::kObj;
  if (extension == ".stl") return MeshFileFormat::kStl;
  if (extension == ".ply") return MeshFileFormat::kPly;
  return make_error(ErrorCode::kInvalidArgument, "cannot tell the mesh format of '" + path.string() +
                                                     "'; use a .glb, .obj, .stl or .ply file name");
}

Status export_mesh(const Mesh& mesh, const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(MeshFileFormat format, mesh_file_format_from_path(path));
  return export_mesh(mesh, path, format);
}

Status export_mesh(const Mesh& mesh, const std::filesystem::path& path, MeshFileFormat format) {
  CUBEFORGE_TRY(check_exportable(mesh, path));
  const Mesh* source = &mesh;
  Mesh with_normals;
  if (!mesh.has_normals() && format != MeshFileFormat::kStl) {
    with_normals = mesh;
    compute_vertex_normals(with_normals);
    source = &with_normals;
  }
  switch (format) {
    case MeshFileFormat::kGlb: return write_file_atomically(path, std::span<const std::byte>(encode_glb(*source)));
    case MeshFileFormat::kObj: return write_file_atomically(path, std::string_view(encode_obj(*source)));
    case MeshFileFormat::kStl: return write_file_atomically(path, std::span<const std::byte>(encode_stl(*source)));
    case MeshFileFormat::kPly: return write_file_atomically(path, std::span<const std::byte>(encode_ply(*source)));
  }
  return make_error(ErrorCode::kInvalidArgument, "unknown mesh format");
}

Result<Mesh> import_mesh(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) {
    return make_error(ErrorCode::kNotFound, "cannot import '" + path.string() + "': no such file");
  }
  Assimp::Importer importer;
  const aiScene* scene = importer.ReadFile(
      path.string(), aiProcess_Triangulate | aiProcess_JoinIdenticalVertices | aiProcess_PreTransformVertices |
                         aiProcess_SortByPType | aiProcess_ValidateDataStructure);
  if (scene == nullptr || (scene->mFlags & AI_SCENE_FLAGS_INCOMPLETE)) {
    return make_error(ErrorCode::kCorruptFile, "cannot import '" + path.string() + "': " +
                                                   importer.GetErrorString() +
                                                   "; is it a complete GLB, glTF, OBJ, STL or PLY file?");
  }
  Mesh mesh;
  bool all_have_normals = true;
  for (unsigned m = 0; m < scene->mNumMeshes; ++m) {
    const aiMesh* part = scene->mMeshes[m];
    if (!(part->mPrimitiveTypes & aiPrimitiveType_TRIANGLE)) continue;  // points and lines
    all_have_normals = all_have_normals && part->HasNormals();
  }
  for (unsigned m = 0; m < scene->mNumMeshes; ++m) {
    const aiMesh* part = scene->mMeshes[m];
    if (!(part->mPrimitiveTypes & aiPrimitiveType_TRIANGLE)) continue;
    const uint64_t base = mesh.vertex_count();
    if (base + part->mNumVertices > uint64_t(UINT32_MAX)) {
      return make_error(ErrorCode::kUnsupported, "cannot import '" + path.string() + "': more than 2^32 vertices");
    }
    for (unsigned v = 0; v < part->mNumVertices; ++v) {
      const aiVector3D& p = part->mVertices[v];
      mesh.positions.insert(mesh.positions.end(), {p.x, p.y, p.z});
      if (all_have_normals) {
        const aiVector3D& n = part->mNormals[v];
        mesh.normals.insert(mesh.normals.end(), {n.x, n.y, n.z});
      }
    }
    for (unsigned f = 0; f < part->mNumFaces; ++f) {
      const aiFace& face = part->mFaces[f];
      if (face.mNumIndices != 3) continue;
      for (int c = 0; c < 3; ++c) mesh.indices.push_back(uint32_t(base + face.mIndices[c]));
    }
  }
  if (mesh.empty()) {
    return make_error(ErrorCode::kCorruptFile, "cannot import '" + path.string() + "': the file has no triangles");
  }
  return mesh;
}

}  // namespace cubeforge
