// Every exported file is read back by Assimp, a reader that shares no code
// with our writers: counts and bounds must survive. Failed writes must name
// the path and leave nothing behind; broken inputs must say what is wrong.
#include <gtest/gtest.h>

#include <assimp/Importer.hpp>
#include <assimp/postprocess.h>
#include <assimp/scene.h>

#include <filesystem>
#include <fstream>
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
  std::ofstream(garbage, std::ios::binary) << std::string("glTF\x02\0\0\0\xff\xff\xff\x7f garbage", 24);
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

}  // namespace
}  // namespace cubeforge
