// Every exported file is read back by Assimp, a reader that shares no code
// with our writers: counts and bounds must survive. Failed writes must name
// the path and leave nothing behind; broken inputs must say what is wrong.
#include <gtest/gtest.h>

#include <assimp/Importer.hpp>
#include <assimp/postprocess.h>
#include <assimp/scene.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>
#include <random>
#include <set>
#include <tuple>

#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/mesh_io.h"
#include "test_meshes.h"

namespace cubeforge {
namespace {

namespace fs = std::filesystem;

class MeshFiles : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("cubeforge_mesh_io_" + std::to_string(std::random_device{}()));
    fs::create_directories(directory_);
    mesh_ = testing::mesh_of_field(torus_field(0.6f, 0.25f, {0.1f, -0.05f, 0.2f}), 4);
    compute_vertex_normals(mesh_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  std::vector<std::string> files() const {
    std::vector<std::string> names;
    for (const auto& entry : fs::directory_iterator(directory_)) names.push_back(entry.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }

  fs::path directory_;
  Mesh mesh_;
};

struct ReadBack {
  size_t vertices = 0;
  size_t unique_positions = 0;
  size_t triangles = 0;
  Bounds3 bounds;
};

ReadBack read_with_assimp(const fs::path& path, unsigned flags) {
  Assimp::Importer importer;
  const aiScene* scene = importer.ReadFile(path.string(), flags);
  EXPECT_NE(scene, nullptr) << importer.GetErrorString();
  ReadBack result;
  if (!scene) return result;
  std::set<std::tuple<float, float, float>> positions;
  for (unsigned m = 0; m < scene->mNumMeshes; ++m) {
    const aiMesh* mesh = scene->mMeshes[m];
    result.vertices += mesh->mNumVertices;
    for (unsigned f = 0; f < mesh->mNumFaces; ++f) result.triangles += mesh->mFaces[f].mNumIndices == 3;
    for (unsigned v = 0; v < mesh->mNumVertices; ++v) {
      const aiVector3D& p = mesh->mVertices[v];
      positions.insert({p.x, p.y, p.z});
      const float xyz[3] = {p.x, p.y, p.z};
      for (int a = 0; a < 3; ++a) {
        if (result.bounds.empty || xyz[a] < result.bounds.min[a]) result.bounds.min[a] = xyz[a];
        if (result.bounds.empty || xyz[a] > result.bounds.max[a]) result.bounds.max[a] = xyz[a];
      }
      result.bounds.empty = false;
    }
  }
  result.unique_positions = positions.size();
  return result;
}

TEST_F(MeshFiles, EveryFormatReadsBackWithAssimp) {
  const Bounds3 bounds = mesh_.bounds();
  for (const char* name : {"torus.glb", "torus.obj", "torus.stl", "torus.ply", "TORUS.GLB"}) {
    SCOPED_TRACE(name);
    const fs::path path = directory_ / name;
    Status written = export_mesh(mesh_, path);
    ASSERT_TRUE(written.ok()) << written.error().to_string();
    // OBJ lists positions and normals apart; joining identical vertices
    // brings its corners back to one per vertex.
    const bool is_obj = fs::path(name).extension() == ".obj";
    const ReadBack back = read_with_assimp(path, is_obj ? unsigned(aiProcess_JoinIdenticalVertices) : 0u);
    EXPECT_EQ(back.triangles, mesh_.face_count());
    EXPECT_EQ(back.unique_positions, mesh_.vertex_count());
    if (fs::path(name).extension() != ".stl") {  // STL has no shared vertices
      EXPECT_EQ(back.vertices, mesh_.vertex_count());
    }
    for (int a = 0; a < 3; ++a) {
      EXPECT_NEAR(back.bounds.min[a], bounds.min[a], 1e-6);
      EXPECT_NEAR(back.bounds.max[a], bounds.max[a], 1e-6);
    }
  }
  EXPECT_EQ(files(), (std::vector<std::string>{"TORUS.GLB", "torus.glb", "torus.obj", "torus.ply", "torus.stl"}))
      << "no temporary files remain";
}

TEST_F(MeshFiles, ImportJoinsAndTriangulates) {
  for (const char* name : {"a.glb", "a.obj", "a.stl", "a.ply"}) {
    SCOPED_TRACE(name);
    const fs::path path = directory_ / name;
    ASSERT_TRUE(export_mesh(mesh_, path).ok());
    auto imported = import_mesh(path);
    ASSERT_TRUE(imported.ok()) << imported.error().to_string();
    EXPECT_EQ(imported->face_count(), mesh_.face_count());
    const Bounds3 a = imported->bounds(), b = mesh_.bounds();
    for (int axis = 0; axis < 3; ++axis) {
      EXPECT_NEAR(a.min[axis], b.min[axis], 1e-6);
      EXPECT_NEAR(a.max[axis], b.max[axis], 1e-6);
    }
  }
  // Quads and two objects: one mesh of triangles.
  const fs::path quads = directory_ / "quads.obj";
  std::ofstream(quads) << "o first\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2 3 4\n"
                          "o second\nv 0 0 1\nv 1 0 1\nv 1 1 1\nf 5 6 7\n";
  auto joined = import_mesh(quads);
  ASSERT_TRUE(joined.ok()) << joined.error().to_string();
  EXPECT_EQ(joined->face_count(), 3u);
  EXPECT_EQ(joined->bounds().max[2], 1.f);
}

TEST_F(MeshFiles, ReplacesAnExistingFile) {
  const fs::path path = directory_ / "mesh.stl";
  std::ofstream(path) << "old contents";
  ASSERT_TRUE(export_mesh(mesh_, path).ok());
  EXPECT_EQ(fs::file_size(path), 84 + 50 * mesh_.face_count());
  EXPECT_EQ(files(), std::vector<std::string>{"mesh.stl"});
}

TEST_F(MeshFiles, UnwritablePathIsAClearError) {
  const fs::path blocker = directory_ / "not_a_folder";
  std::ofstream(blocker) << "a file where a folder should be";
  for (const fs::path& path : {blocker / "mesh.glb", directory_ / "missing" / "mesh.obj"}) {
    Status written = export_mesh(mesh_, path);
    ASSERT_FALSE(written.ok());
    EXPECT_EQ(written.error().code, ErrorCode::kIo);
    EXPECT_NE(written.error().message.find(path.string()), std::string::npos) << written.error().message;
  }
  EXPECT_EQ(files(), std::vector<std::string>{"not_a_folder"}) << "nothing is left behind";

  Status unknown = export_mesh(mesh_, directory_ / "mesh.fbx");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("mesh.fbx"), std::string::npos);
  Status empty = export_mesh(Mesh{}, directory_ / "empty.glb");
  ASSERT_FALSE(empty.ok());
  EXPECT_NE(empty.error().message.find("no faces"), std::string::npos);
  EXPECT_EQ(files(), std::vector<std::string>{"not_a_folder"});
}

TEST_F(MeshFiles, MissingAndCorruptInputsAreClearErrors) {
  auto missing = import_mesh(directory_ / "nowhere.glb");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_NE(missing.error().message.find("nowhere.glb"), std::string::npos);

  const fs::path garbage = directory_ / "garbage.glb";
  std::ofstream(garbage, std::ios::binary) << std::string("glTF\x02\0\0\0\xff\xff\xff\x7f garbage", 20);
  auto corrupt = import_mesh(garbage);
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(corrupt.error().message.find("garbage.glb"), std::string::npos);

  const fs::path truncated = directory_ / "truncated.ply";
  ASSERT_TRUE(export_mesh(mesh_, truncated).ok());
  fs::resize_file(truncated, fs::file_size(truncated) / 2);
  auto cut = import_mesh(truncated);
  ASSERT_FALSE(cut.ok());
  EXPECT_EQ(cut.error().code, ErrorCode::kCorruptFile);

  const fs::path points = directory_ / "points.obj";
  std::ofstream(points) << "v 0 0 0\nv 1 0 0\nv 0 1 0\n";
  auto no_faces = import_mesh(points);
  ASSERT_FALSE(no_faces.ok());
  EXPECT_EQ(no_faces.error().code, ErrorCode::kCorruptFile);
}

// A cube with its faces, for hand-written files.
const char* const kCubeObj =
    "v -1 -1 -1\nv -1 -1 1\nv -1 1 -1\nv -1 1 1\nv 1 -1 -1\nv 1 -1 1\nv 1 1 -1\nv 1 1 1\n"
    "f 1 2 4\nf 1 4 3\nf 5 7 8\nf 5 8 6\nf 1 5 6\nf 1 6 2\nf 3 4 8\nf 3 8 7\nf 1 3 7\nf 1 7 5\nf 2 6 8\nf 2 8 4\n";

// Whether anything opens `fifo` for reading while `body` runs: a reader
// would block in open() until a writer comes, so a writer that keeps trying
// without blocking sees it (and releases it with an empty file).
template <class Body>
bool opened_for_reading(const fs::path& fifo, Body&& body) {
  std::atomic<bool> done{false}, seen{false};
  std::thread watcher([&] {
    while (!done.load()) {
      const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
      if (fd >= 0) {
        seen.store(true);
        ::close(fd);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
  });
  body();
  done.store(true);
  watcher.join();
  return seen.load();
}

// `tokenize --mesh` once opened whatever an OBJ's mtllib named (../../etc/passwd
// was read and a line of it printed) and a glTF's ../ buffers.
TEST_F(MeshFiles, ReferencesLeavingTheMeshFolderAreNeverOpened) {
  const fs::path inner = directory_ / "a" / "b";
  fs::create_directories(inner);
  const fs::path outside = directory_ / "outside.mtl";
  ASSERT_EQ(::mkfifo(outside.c_str(), 0644), 0);
  std::ofstream(inner / "escape.obj") << "mtllib ../../outside.mtl\nusemtl m\n" << kCubeObj;
  std::ofstream(inner / "absolute.obj") << "mtllib " << outside.string() << "\nusemtl m\n" << kCubeObj;
  for (const char* name : {"escape.obj", "absolute.obj"}) {
    Result<Mesh> imported = make_error(ErrorCode::kInternal, "not run");
    EXPECT_FALSE(opened_for_reading(outside, [&] { imported = import_mesh(inner / name); })) << name;
    ASSERT_TRUE(imported.ok()) << imported.error().to_string();  // the geometry needs no material
    EXPECT_EQ(imported->face_count(), 12u);
  }
  // A material library beside the mesh is still read.
  const fs::path beside = inner / "beside.mtl";
  ASSERT_EQ(::mkfifo(beside.c_str(), 0644), 0);
  std::ofstream(inner / "beside.obj") << "mtllib beside.mtl\nusemtl m\n" << kCubeObj;
  EXPECT_TRUE(opened_for_reading(beside, [&] { (void)import_mesh(inner / "beside.obj"); }));

  // glTF buffers: inside the folder they load; outside (../, absolute) they are refused by name.
  const std::string cube_bin = std::string(reinterpret_cast<const char*>(mesh_.positions.data()), 9 * 4);
  std::ofstream(directory_ / "secret.bin", std::ios::binary) << cube_bin;
  std::ofstream(inner / "inside.bin", std::ios::binary) << cube_bin;
  auto gltf = [&](const std::string& uri) {
    return "{\"asset\":{\"version\":\"2.0\"},\"scene\":0,\"scenes\":[{\"nodes\":[0]}],\"nodes\":[{\"mesh\":0}],"
           "\"meshes\":[{\"primitives\":[{\"attributes\":{\"POSITION\":0}}]}],"
           "\"buffers\":[{\"uri\":\"" + uri + "\",\"byteLength\":36}],"
           "\"bufferViews\":[{\"buffer\":0,\"byteLength\":36}],"
           "\"accessors\":[{\"bufferView\":0,\"componentType\":5126,\"count\":3,\"type\":\"VEC3\","
           "\"min\":[-9,-9,-9],\"max\":[9,9,9]}]}";
  };
  std::ofstream(inner / "inside.gltf") << gltf("inside.bin");
  std::ofstream(inner / "up.gltf") << gltf("../../secret.bin");
  std::ofstream(inner / "absolute.gltf") << gltf((directory_ / "secret.bin").string());
  auto inside = import_mesh(inner / "inside.gltf");
  EXPECT_TRUE(inside.ok()) << inside.error().to_string();
  for (const char* name : {"up.gltf", "absolute.gltf"}) {
    auto refused = import_mesh(inner / name);
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_NE(refused.error().message.find("secret.bin"), std::string::npos) << refused.error().message;
  }
  auto up = import_mesh(inner / "up.gltf");
  EXPECT_NE(up.error().message.find("outside the mesh's folder"), std::string::npos) << up.error().message;
}

TEST_F(MeshFiles, OnlyTheFormatsNamedAreRead) {
  // Found by fuzzing: a .gltf holding a PLY with a broken header reached
  // Assimp's PLY reader (which never returns on it) by content detection.
  std::ofstream(directory_ / "ply_inside.gltf") << "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n"
                                                   "property float y\nproperty float z\nelement face 1\n"
                                                   "property l1 1\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  auto disguised = import_mesh(directory_ / "ply_inside.gltf");
  EXPECT_FALSE(disguised.ok());
  // An OBJ named .stl is read as an STL (and fails), not as the OBJ it holds.
  std::ofstream(directory_ / "obj_inside.stl") << "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n";
  EXPECT_FALSE(import_mesh(directory_ / "obj_inside.stl").ok());
  // OFF is a format Assimp knows and tokenize does not name.
  std::ofstream(directory_ / "cube.off") << "OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  auto off = import_mesh(directory_ / "cube.off");
  ASSERT_FALSE(off.ok());
  EXPECT_EQ(off.error().code, ErrorCode::kUnsupported);
  EXPECT_NE(off.error().message.find("OBJ, glTF (.gltf, .glb), STL and PLY"), std::string::npos);
}

TEST_F(MeshFiles, NonFiniteCoordinatesAndNonFilesAreNamed) {
  for (const char* value : {"nan", "inf", "-inf"}) {
    std::string obj = kCubeObj;
    obj.replace(obj.find("-1 -1 -1"), 2, value);
    std::ofstream(directory_ / "bad.obj") << obj;
    auto bad = import_mesh(directory_ / "bad.obj");
    ASSERT_FALSE(bad.ok()) << value;
    EXPECT_NE(bad.error().message.find("not a finite number"), std::string::npos) << bad.error().message;
  }
  fs::create_directory(directory_ / "folder.obj");
  auto folder = import_mesh(directory_ / "folder.obj");
  ASSERT_FALSE(folder.ok());
  EXPECT_NE(folder.error().message.find("is a directory"), std::string::npos) << folder.error().message;
  const fs::path device = directory_ / "zero.stl";
  fs::create_symlink("/dev/zero", device);
  auto zero = import_mesh(device);
  ASSERT_FALSE(zero.ok());
  EXPECT_NE(zero.error().message.find("character device"), std::string::npos) << zero.error().message;
}

// Found by fuzzing: Assimp's PLY reader never returns on some broken headers.
TEST_F(MeshFiles, AMalformedPlyHeaderIsAnErrorNotAHang) {
  std::ofstream(directory_ / "broken.ply") << "ply\nformat ascii 1.0\nelement vertex 3\nproperty float x\n"
                                              "property float y\nproperty float z\nelement face 1\nproperty l1 1\n"
                                              "0 0 0\n1 0 0\n0 1 0\n3 0 1 2\n";
  auto broken = import_mesh(directory_ / "broken.ply");
  ASSERT_FALSE(broken.ok());
  EXPECT_NE(broken.error().message.find("PLY header line 8"), std::string::npos) << broken.error().message;
  // Found by fuzzing too: a face of no vertices made Assimp's triangulation
  // abort the program (ai_assert) instead of failing.
  std::ofstream(directory_ / "empty_face.ply")
      << "ply\nformat ascii 1.0\nelement vertex 4\nproperty float x\nproperty float y\nproperty float z\n"
         "element face 2\nproperty list uchar int vertex_indices\nend_header\n0 0 0\n1 0 0\n0 1 0\n1 1 0\n"
         "3 0 1 2\n0\n";
  auto empty_face = import_mesh(directory_ / "empty_face.ply");
  ASSERT_FALSE(empty_face.ok());
  EXPECT_EQ(empty_face.error().code, ErrorCode::kCorruptFile);
  // And an 80-byte GLB whose chunk header claims 1.9 GB made Assimp allocate it.
  std::string glb("glTF\x02\x00\x00\x00\x50\x00\x00\x00\x08stpJSON{\"asset\":{\"version\":\"2.0\"}}", 44);
  glb.resize(80, ' ');
  std::ofstream(directory_ / "claims.glb", std::ios::binary) << glb;
  auto claims = import_mesh(directory_ / "claims.glb");
  ASSERT_FALSE(claims.ok());
  EXPECT_NE(claims.error().message.find("runs past its end"), std::string::npos) << claims.error().message;
  // Our own PLY files (ASCII headers of the standard form) still read.
  ASSERT_TRUE(export_mesh(mesh_, directory_ / "ours.ply").ok());
  EXPECT_TRUE(import_mesh(directory_ / "ours.ply").ok());
}

}  // namespace
}  // namespace cubeforge
