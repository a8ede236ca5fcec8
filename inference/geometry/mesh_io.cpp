// Mesh file writers (GLB, OBJ, binary STL, binary PLY) and the Assimp importer.
#include "inference/geometry/mesh_io.h"

#include <assimp/BaseImporter.h>
#include <assimp/DefaultIOSystem.h>
#include <assimp/Importer.hpp>
#include <assimp/postprocess.h>
#include <assimp/scene.h>

#include <meshoptimizer.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <charconv>
#include <cmath>
#include <cstring>
#include <iterator>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/input_budgets.h"
#include "inference/core/untrusted_text.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/mesh_file_budget.h"

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

// Assimp's PLY reader loops forever on some malformed headers, so a PLY
// header is checked here first, strictly: "ply", a format line, then only
// comments, elements with a count, properties of a known type (scalar or
// list) after an element, and "end_header" within the first 64 KiB.
Status check_ply_header(const std::filesystem::path& path) {
  const std::string where = "cannot import '" + path.string() + "': ";
  uint64_t size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &size));
  std::string head(size_t(std::min<uint64_t>(size, 64 << 10)), '\0');
  const ssize_t got = ::read(fd, head.data(), head.size());
  ::close(fd);
  head.resize(size_t(std::max<ssize_t>(got, 0)));
  static const std::set<std::string> types = {"char",  "uchar", "short",  "ushort",  "int",     "uint",   "float",
                                              "double", "int8", "uint8",  "int16",   "uint16",  "int32",  "uint32",
                                              "float32", "float64"};
  auto bad = [&](size_t line, const std::string& why) {
    return make_error(ErrorCode::kCorruptFile,
                      where + "PLY header line " + std::to_string(line) + ": " + why + "; is it a complete PLY file?");
  };
  std::istringstream in(head);
  std::string line;
  size_t number = 0;
  bool in_element = false;
  while (std::getline(in, line)) {
    ++number;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (number == 1) {
      if (line != "ply") return bad(number, "the file does not start with \"ply\"");
      continue;
    }
    if (number == 2) {
      if (w.size() != 3 || w[0] != "format" ||
          (w[1] != "ascii" && w[1] != "binary_little_endian" && w[1] != "binary_big_endian"))
        return bad(number, "expected a format line");
      continue;
    }
    if (w.empty() || w[0] == "comment" || w[0] == "obj_info") continue;
    if (w[0] == "end_header") return ok_status();
    if (w[0] == "element") {
      if (w.size() != 3 || w[2].find_first_not_of("0123456789") != std::string::npos || w[2].size() > 10)
        return bad(number, "expected \"element NAME COUNT\"");
      in_element = true;
      continue;
    }
    if (w[0] == "property" && in_element) {
      if (w.size() == 3 && types.count(w[1])) continue;
      if (w.size() == 5 && w[1] == "list" && types.count(w[2]) && types.count(w[3])) continue;
      return bad(number, "a property of an unknown type");
    }
    return bad(number, "an unknown header line");
  }
  return make_error(ErrorCode::kCorruptFile, where + "the PLY header has no end_header in its first 64 KiB");
}

// Assimp's GLB reader allocates whatever chunk length a header claims (an
// 80-byte file can ask for gigabytes), so the binary container is checked
// against the file first: magic, version, total length and chunk lengths.
Status check_glb_container(const std::filesystem::path& path) {
  const std::string where = "cannot import '" + path.string() + "': ";
  uint64_t size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &size));
  uint32_t header[5] = {};
  const ssize_t got = ::pread(fd, header, sizeof header, 0);
  auto chunk_at = [&](uint64_t offset, uint32_t* length) {
    return ::pread(fd, length, sizeof *length, off_t(offset)) == ssize_t(sizeof *length);
  };
  Status status = ok_status();
  auto bad = [&](const std::string& why) {
    return make_error(ErrorCode::kCorruptFile, where + "the GLB " + why + "; is it a complete GLB file?");
  };
  if (got < 12 || header[0] != 0x46546C67u) {
    status = bad("does not start with the glTF magic");
  } else if (header[1] != 1 && header[1] != 2) {
    status = bad("has version " + std::to_string(header[1]) + "; 1 and 2 are read");
  } else if (header[2] > size) {
    status = bad("says it is " + std::to_string(header[2]) + " bytes long but the file has " + std::to_string(size));
  } else if (header[1] == 2) {
    // Chunks: length, type, data (padded to 4 bytes), each inside the stated length.
    uint64_t offset = 12;
    while (status.ok() && offset < header[2]) {
      uint32_t length = 0;
      if (offset + 8 > header[2] || !chunk_at(offset, &length) || offset + 8 + uint64_t(length) > header[2])
        status = bad("has a chunk at byte " + std::to_string(offset) + " that runs past its end");
      offset += 8 + uint64_t(length);
    }
  } else if (got < 20 || uint64_t(header[3]) + 20 > header[2]) {
    status = bad("has a scene of " + std::to_string(header[3]) + " bytes that runs past its end");
  }
  ::close(fd);
  return status;
}

// When the reader for a file's extension fails, Assimp tries every reader it
// has by content: a ".gltf" holding a PLY went to the PLY reader, bypassing
// the check of its header. Only the readers of the file's own extension stay.
void keep_only_readers_of(Assimp::Importer& importer, const std::string& extension) {
  std::vector<Assimp::BaseImporter*> others;
  for (size_t i = 0; i < importer.GetImporterCount(); ++i) {
    Assimp::BaseImporter* reader = importer.GetImporter(i);
    std::set<std::string> extensions;
    reader->GetExtensionList(extensions);
    if (!extensions.count(extension)) others.push_back(reader);
  }
  for (Assimp::BaseImporter* reader : others) importer.UnregisterLoader(reader);
}

// The file system as Assimp sees it while importing one mesh: the mesh
// itself and, when the format may refer to other files, files inside the
// mesh's folder. Assimp joins a glTF's buffer names to the folder of the path
// it was given (an absolute one here) and passes an OBJ's material library
// name as written, so a relative name is taken relative to the mesh's folder.
// Anything else (../, absolute paths elsewhere, links that lead out) is not
// opened, and is remembered for the error message.
class ConfinedIOSystem : public Assimp::DefaultIOSystem {
 public:
  ConfinedIOSystem(std::filesystem::path mesh, bool allow_folder)
      : mesh_(std::move(mesh)), folder_(mesh_.parent_path()), allow_folder_(allow_folder) {}

  bool Exists(const char* file) const override {
    const auto path = permitted(file);
    if (!path) refused_.emplace_back(file ? file : "");
    return path && DefaultIOSystem::Exists(path->c_str());
  }
  Assimp::IOStream* Open(const char* file, const char* mode) override {
    const std::string_view m = mode ? mode : "rb";
    const auto path = permitted(file);
    if (!path || m.find_first_of("wa+") != std::string_view::npos) {
      refused_.emplace_back(file ? file : "");
      return nullptr;
    }
    if (!require_regular_file(*path, "").ok()) return nullptr;  // a FIFO would block the reader
    remember_input_file(*path);  // so that no output of this run replaces it
    return DefaultIOSystem::Open(path->c_str(), mode);
  }
  const std::vector<std::string>& refused() const { return refused_; }

 private:
  std::optional<std::filesystem::path> permitted(const char* file) const {
    if (!file) return std::nullopt;
    std::filesystem::path path(file);
    if (path.is_relative()) path = folder_ / path;
    std::error_code ec;
    const std::filesystem::path resolved = std::filesystem::weakly_canonical(path, ec);
    if (ec) return std::nullopt;
    if (resolved == mesh_) return resolved;
    if (!allow_folder_) return std::nullopt;
    const std::filesystem::path inside = resolved.lexically_relative(folder_);
    if (inside.empty() || *inside.begin() == "..") return std::nullopt;
    return resolved;
  }

  std::filesystem::path mesh_, folder_;
  bool allow_folder_;
  mutable std::vector<std::string> refused_;
};

// One vertex for each distinct position (and normal, where the mesh has
// them), bit for bit, as formats that repeat a vertex per face (STL) need;
// vertices no triangle uses go. Linear in the vertices (meshoptimizer's
// hashing remap).
void join_identical_vertices(Mesh& mesh) {
  const size_t count = mesh.vertex_count();
  const bool with_normals = mesh.has_normals();
  std::vector<meshopt_Stream> streams = {{mesh.positions.data(), sizeof(float) * 3, sizeof(float) * 3}};
  if (with_normals) streams.push_back({mesh.normals.data(), sizeof(float) * 3, sizeof(float) * 3});
  std::vector<unsigned int> remap(count);
  const size_t unique = meshopt_generateVertexRemapMulti(remap.data(), mesh.indices.data(), mesh.indices.size(), count,
                                                         streams.data(), streams.size());
  meshopt_remapIndexBuffer(mesh.indices.data(), mesh.indices.data(), mesh.indices.size(), remap.data());
  std::vector<float> joined(unique * 3);
  meshopt_remapVertexBuffer(joined.data(), mesh.positions.data(), count, sizeof(float) * 3, remap.data());
  mesh.positions = std::move(joined);
  if (with_normals) {
    std::vector<float> normals(unique * 3);
    meshopt_remapVertexBuffer(normals.data(), mesh.normals.data(), count, sizeof(float) * 3, remap.data());
    mesh.normals = std::move(normals);
  }
}

// The scene as Assimp read it, held to the budgets once more before
// post-processing multiplies it: PreTransformVertices copies each mesh once
// per node that places it, and triangulation is quadratic in a polygon's
// corners. The counts before import (mesh_file_budget.h) bound what reading
// cost; these cover what only the reader knows (an ASCII STL's or a PLY's
// polygons, an OBJ's continued lines). The walk is iterative.
Status check_imported_scene(const aiScene& scene, const std::filesystem::path& path) {
  const std::string subject = single_quoted(escape_untrusted(path.string()));
  auto triangles = [](const aiMesh& mesh) {
    uint64_t count = 0;
    for (unsigned f = 0; f < mesh.mNumFaces; ++f)
      if (mesh.mFaces[f].mNumIndices >= 3) count += mesh.mFaces[f].mNumIndices - 2;
    return count;
  };
  std::vector<uint64_t> mesh_triangles(scene.mNumMeshes);
  uint64_t largest_polygon = 0, all_vertices = 0, all_faces = 0;
  for (unsigned m = 0; m < scene.mNumMeshes; ++m) {
    const aiMesh& mesh = *scene.mMeshes[m];
    mesh_triangles[m] = triangles(mesh);
    all_vertices += mesh.mNumVertices;
    all_faces += mesh_triangles[m];
    for (unsigned f = 0; f < mesh.mNumFaces; ++f)
      largest_polygon = std::max<uint64_t>(largest_polygon, mesh.mFaces[f].mNumIndices);
  }
  uint64_t nodes = 0, instances = 0, vertices = 0, faces = 0;
  std::vector<std::pair<const aiNode*, int>> pending;
  if (scene.mRootNode) pending.push_back({scene.mRootNode, 1});
  while (!pending.empty()) {
    const auto [node, depth] = pending.back();
    pending.pop_back();
    if (depth > kMaxMeshNodeDepth)
      return node_hierarchy_too_deep(subject);
    ++nodes;
    for (unsigned i = 0; i < node->mNumMeshes; ++i) {
      if (node->mMeshes[i] >= scene.mNumMeshes) continue;  // the validation step names it
      ++instances;
      vertices = saturating_add(vertices, scene.mMeshes[node->mMeshes[i]]->mNumVertices);
      faces = saturating_add(faces, mesh_triangles[node->mMeshes[i]]);
    }
    for (unsigned c = 0; c < node->mNumChildren; ++c) pending.push_back({node->mChildren[c], depth + 1});
  }
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshNodes, nodes, subject + ": its scene"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshInstances, std::max<uint64_t>(instances, scene.mNumMeshes),
                                   subject + ": its scene after instancing"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshVertices, std::max(vertices, all_vertices),
                                   subject + ": its scene after instancing"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshFaces, std::max(faces, all_faces),
                                   subject + ": its scene after triangulation and instancing"));
  return check_input_budget(InputBudget::kMeshPolygonCorners, largest_polygon, subject + ": its largest polygon");
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

Status export_mesh(const Mesh& mesh, const std::filesystem::path& path, MeshFileFormat format,
                   const WriteOptions& options) {
  CUBEFORGE_TRY(check_exportable(mesh, path));
  const Mesh* source = &mesh;
  Mesh with_normals;
  if (!mesh.has_normals() && format != MeshFileFormat::kStl) {
    with_normals = mesh;
    compute_vertex_normals(with_normals);
    source = &with_normals;
  }
  switch (format) {
    case MeshFileFormat::kGlb: return write_file_atomically(path, std::span<const std::byte>(encode_glb(*source)), options);
    case MeshFileFormat::kObj: return write_file_atomically(path, std::string_view(encode_obj(*source)), options);
    case MeshFileFormat::kStl: return write_file_atomically(path, std::span<const std::byte>(encode_stl(*source)), options);
    case MeshFileFormat::kPly: return write_file_atomically(path, std::span<const std::byte>(encode_ply(*source)), options);
  }
  return make_error(ErrorCode::kInvalidArgument, "unknown mesh format");
}

Result<Mesh> import_mesh(const std::filesystem::path& path) {
  const std::string where = "cannot import '" + path.string() + "': ";
  std::string extension = path.extension().string();
  std::transform(extension.begin(), extension.end(), extension.begin(), [](unsigned char c) { return char(std::tolower(c)); });
  const bool refers_to_files = extension == ".obj" || extension == ".gltf";
  CUBEFORGE_TRY(require_regular_file(path, "the mesh"));
  if (!refers_to_files && extension != ".glb" && extension != ".stl" && extension != ".ply")
    return make_error(ErrorCode::kUnsupported, where + "cubeforge reads OBJ, glTF (.gltf, .glb), STL and PLY meshes; "
                                                       "convert it to one of those");
  // The file's size first: the checks below walk what it holds.
  std::error_code size_error;
  const uint64_t file_bytes = std::filesystem::file_size(path, size_error);
  if (!size_error)
    CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshFileBytes, file_bytes, single_quoted(escape_untrusted(path.string()))));
  if (extension == ".ply") CUBEFORGE_TRY(check_ply_header(path));
  if (extension == ".glb") CUBEFORGE_TRY(check_glb_container(path));
  CUBEFORGE_TRY(check_mesh_file_budgets(path, extension));
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::weakly_canonical(std::filesystem::absolute(path, ec), ec);
  if (ec) return make_error(ErrorCode::kIo, where + ec.message());

  Assimp::Importer importer;
  keep_only_readers_of(importer, extension.substr(1));
  auto* io = new ConfinedIOSystem(absolute, refers_to_files);  // the importer owns and deletes it
  importer.SetIOHandler(io);
  // Read and validate first, then post-process: some readers (PLY) leave a
  // mesh's primitive types disagreeing with its faces, and Assimp's
  // triangulation aborts the program on that (ai_assert) instead of failing.
  const aiScene* scene = importer.ReadFile(absolute.string(), aiProcess_ValidateDataStructure);
  if (scene != nullptr && !(scene->mFlags & AI_SCENE_FLAGS_INCOMPLETE)) {
    CUBEFORGE_TRY(check_imported_scene(*scene, path));
    for (unsigned m = 0; m < scene->mNumMeshes; ++m) {
      aiMesh* part = scene->mMeshes[m];
      unsigned types = 0;
      for (unsigned f = 0; f < part->mNumFaces; ++f) {
        const unsigned n = part->mFaces[f].mNumIndices;
        types |= n == 1 ? aiPrimitiveType_POINT : n == 2 ? aiPrimitiveType_LINE : n == 3 ? aiPrimitiveType_TRIANGLE
                                                                                          : aiPrimitiveType_POLYGON;
      }
      part->mPrimitiveTypes = types;
    }
    // Identical vertices are joined afterwards (join_identical_vertices):
    // Assimp's step took 18 s and 700 MB for an STL of 400k triangles.
    scene = importer.ApplyPostProcessing(aiProcess_Triangulate | aiProcess_PreTransformVertices |
                                         aiProcess_SortByPType | aiProcess_ValidateDataStructure);
  }
  if (scene == nullptr || (scene->mFlags & AI_SCENE_FLAGS_INCOMPLETE)) {
    if (!io->refused().empty())
      return make_error(ErrorCode::kCorruptFile,
                        where + "it refers to '" + io->refused().front() + "', " +
                            (refers_to_files ? "outside the mesh's folder; only files in that folder are read"
                                             : "but a " + extension.substr(1) + " file must hold all its data"));
    return make_error(ErrorCode::kCorruptFile, where + importer.GetErrorString() +
                                                   "; is it a complete GLB, glTF, OBJ, STL or PLY file?");
  }
  Mesh mesh;
  bool all_have_normals = true;
  size_t vertices = 0, faces = 0;
  for (unsigned m = 0; m < scene->mNumMeshes; ++m) {
    const aiMesh* part = scene->mMeshes[m];
    if (!(part->mPrimitiveTypes & aiPrimitiveType_TRIANGLE)) continue;  // points and lines
    all_have_normals = all_have_normals && part->HasNormals();
    vertices += part->mNumVertices;
    faces += part->mNumFaces;
  }
  mesh.positions.reserve(vertices * 3);
  if (all_have_normals) mesh.normals.reserve(vertices * 3);
  mesh.indices.reserve(faces * 3);
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
  if (mesh.empty()) return make_error(ErrorCode::kCorruptFile, where + "the file has no triangles");
  join_identical_vertices(mesh);
  for (size_t i = 0; i < mesh.positions.size(); ++i)
    if (!std::isfinite(mesh.positions[i]))
      return make_error(ErrorCode::kCorruptFile, where + "vertex " + std::to_string(i / 3) + " has a coordinate that "
                                                         "is not a finite number (" + std::to_string(mesh.positions[i]) +
                                                         "); fix or remove that vertex");
  for (float& n : mesh.normals)
    if (!std::isfinite(n)) n = 0.f;  // normals are only a hint: a broken one is dropped, not fatal
  return mesh;
}

}  // namespace cubeforge
