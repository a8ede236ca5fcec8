// Mesh files held to the input budgets before import: counts are exact (a
// budget one below what a file needs refuses it, one at it reads it), each
// refusal names its budget's variable, and the structures importers choke on
// (deep or shared hierarchies, accessors past their data, glTF 1.0) are
// refused by name. Also the measuring grid's budget.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "inference/geometry/mesh_file_budget.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"

namespace cubeforge {
namespace {

namespace fs = std::filesystem;

// Sets a budget's variable for the scope.
class Budget {
 public:
  Budget(const char* variable, uint64_t value) : variable_(variable) {
    ::setenv(variable, std::to_string(value).c_str(), 1);
  }
  ~Budget() { ::unsetenv(variable_); }

 private:
  const char* variable_;
};

// A unit cube: 8 positions (float32) and 36 indices (uint32), one buffer.
std::string cube_buffer() {
  const float positions[] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1};
  const uint32_t indices[] = {0, 2, 1, 1, 2, 3, 4, 5, 6, 5, 7, 6, 0, 1, 4, 1, 5, 4,
                              2, 6, 3, 3, 6, 7, 0, 4, 2, 2, 4, 6, 1, 3, 5, 3, 7, 5};
  std::string bytes(reinterpret_cast<const char*>(positions), sizeof positions);
  bytes.append(reinterpret_cast<const char*>(indices), sizeof indices);
  return bytes;
}

nlohmann::json cube_gltf() {
  return {
      {"asset", {{"version", "2.0"}}},
      {"scene", 0},
      {"buffers", {{{"byteLength", 96 + 144}}}},
      {"bufferViews", {{{"buffer", 0}, {"byteOffset", 0}, {"byteLength", 96}},
                       {{"buffer", 0}, {"byteOffset", 96}, {"byteLength", 144}}}},
      {"accessors", {{{"bufferView", 0}, {"componentType", 5126}, {"count", 8}, {"type", "VEC3"},
                      {"min", {0, 0, 0}}, {"max", {1, 1, 1}}},
                     {{"bufferView", 1}, {"componentType", 5125}, {"count", 36}, {"type", "SCALAR"}}}},
      {"meshes", {{{"primitives", {{{"attributes", {{"POSITION", 0}}}, {"indices", 1}}}}}}},
      {"nodes", {{{"mesh", 0}}}},
      {"scenes", {{{"nodes", {0}}}}},
  };
}

std::string glb(const nlohmann::json& gltf, const std::string& binary) {
  std::string json = gltf.dump();
  while (json.size() % 4) json.push_back(' ');
  std::string out;
  auto put = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put(0x46546C67u);
  put(2);
  put(uint32_t(12 + 8 + json.size() + 8 + binary.size()));
  put(uint32_t(json.size()));
  put(0x4E4F534Au);
  out += json;
  put(uint32_t(binary.size()));
  put(0x004E4942u);
  out += binary;
  return out;
}

class MeshBudgets : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = fs::temp_directory_path() / ("cubeforge_mesh_budget_" + std::to_string(std::random_device{}()));
    fs::create_directories(directory_);
  }
  void TearDown() override { fs::remove_all(directory_); }

  fs::path write(const std::string& name, const std::string& bytes) {
    std::ofstream(directory_ / name, std::ios::binary) << bytes;
    return directory_ / name;
  }
  fs::path write_glb(const nlohmann::json& gltf) { return write("scene.glb", glb(gltf, cube_buffer())); }

  // The import's error message, or "" when it succeeds.
  static std::string refusal(const fs::path& path) {
    auto mesh = import_mesh(path);
    return mesh.ok() ? "" : mesh.error().message;
  }

  fs::path directory_;
};

// One cube placed by 5 nodes: 60 triangles and 40 vertices after instancing.
TEST_F(MeshBudgets, InstancingIsCountedExactlyBeforeImport) {
  nlohmann::json gltf = cube_gltf();
  gltf["nodes"] = nlohmann::json::array();
  for (int i = 0; i < 5; ++i) gltf["nodes"].push_back({{"mesh", 0}, {"translation", {2 * i, 0, 0}}});
  gltf["scenes"] = {{{"nodes", {0, 1, 2, 3, 4}}}};
  const fs::path path = write_glb(gltf);
  MeshFileClaims claims;
  ASSERT_TRUE(check_mesh_file_budgets(path, ".glb", &claims).ok());
  EXPECT_EQ(claims.faces, 60u);
  EXPECT_EQ(claims.vertices, 40u);
  EXPECT_EQ(claims.instances, 5u);
  EXPECT_EQ(claims.nodes, 5u);
  {
    Budget faces("CUBEFORGE_MAX_MESH_FACES", 59);
    EXPECT_NE(refusal(path).find("its scene after triangulation and instancing needs 60 triangles, over the budget of "
                                 "59 (CUBEFORGE_MAX_MESH_FACES)"),
              std::string::npos)
        << refusal(path);
  }
  {
    Budget faces("CUBEFORGE_MAX_MESH_FACES", 60);
    auto mesh = import_mesh(path);
    ASSERT_TRUE(mesh.ok()) << mesh.error().message;
    EXPECT_EQ(mesh->face_count(), 60u);
  }
  {
    Budget instances("CUBEFORGE_MAX_MESH_INSTANCES", 4);
    EXPECT_NE(refusal(path).find("CUBEFORGE_MAX_MESH_INSTANCES"), std::string::npos) << refusal(path);
  }
  {
    Budget nodes("CUBEFORGE_MAX_MESH_NODES", 4);
    EXPECT_NE(refusal(path).find("CUBEFORGE_MAX_MESH_NODES"), std::string::npos) << refusal(path);
  }
  {
    Budget vertices("CUBEFORGE_MAX_MESH_VERTICES", 39);
    EXPECT_NE(refusal(path).find("CUBEFORGE_MAX_MESH_VERTICES"), std::string::npos) << refusal(path);
  }
}

// Assimp walks hierarchies by recursion (a chain 50000 deep ended in
// SIGSEGV) and expands shared nodes once per path.
TEST_F(MeshBudgets, HierarchiesMustBeShallowTreesFromTheScene) {
  nlohmann::json chain = cube_gltf();
  chain["nodes"] = nlohmann::json::array();
  for (int i = 0; i < 300; ++i)
    chain["nodes"].push_back(i + 1 < 300 ? nlohmann::json{{"children", {i + 1}}} : nlohmann::json{{"mesh", 0}});
  EXPECT_NE(refusal(write_glb(chain)).find("its node hierarchy is more than 256 nodes deep"), std::string::npos);

  nlohmann::json shared = cube_gltf();
  shared["nodes"] = {{{"children", {2}}}, {{"children", {2}}}, {{"mesh", 0}}};
  shared["scenes"] = {{{"nodes", {0, 1}}}};
  EXPECT_NE(refusal(write_glb(shared)).find("nodes[2] has two parents"), std::string::npos);

  nlohmann::json cycle = cube_gltf();
  cycle["nodes"] = {{{"children", {1}}}, {{"children", {0}}, {"mesh", 0}}};
  EXPECT_NE(refusal(write_glb(cycle)).find("names nodes[0] as a root, but it has a parent"), std::string::npos);

  nlohmann::json stray = cube_gltf();
  stray["nodes"] = {{{"children", {7}}}};
  EXPECT_NE(refusal(write_glb(stray)).find("nodes[0] has child 7 of 1 nodes"), std::string::npos);
}

TEST_F(MeshBudgets, AccessorsMustLieInsideTheirViewsAndBuffers) {
  nlohmann::json past = cube_gltf();
  past["accessors"][0]["count"] = 9;
  EXPECT_NE(refusal(write_glb(past)).find("accessors[0] (9 elements) runs past its buffer view of 96 bytes"),
            std::string::npos)
      << refusal(write_glb(past));
  nlohmann::json view = cube_gltf();
  view["bufferViews"][1]["byteLength"] = 1000;
  EXPECT_NE(refusal(write_glb(view)).find("bufferViews[1] lies outside its buffer"), std::string::npos);
  nlohmann::json chunk = cube_gltf();
  chunk["buffers"][0]["byteLength"] = 1 << 30;
  EXPECT_NE(refusal(write_glb(chunk)).find("buffers[0] claims 1073741824 bytes but the binary chunk has 240"),
            std::string::npos);
  nlohmann::json mode = cube_gltf();
  mode["meshes"][0]["primitives"][0]["mode"] = 2147483648u;  // found by fuzzing: Assimp made triangles of it
  EXPECT_NE(refusal(write_glb(mode)).find("a primitive of mode 2147483648; glTF modes are 0 to 6"), std::string::npos);
  // Found by fuzzing: Assimp read past a buffer for a sparse accessor without a count.
  nlohmann::json sparse = cube_gltf();
  sparse["accessors"][0]["sparse"] = {{"indices", {{"bufferView", 1}, {"componentType", 5125}}},
                                      {"values", {{"bufferView", 0}}}};
  EXPECT_NE(refusal(write_glb(sparse)).find("accessors[0].sparse needs a count from 1 to the accessor's 8"),
            std::string::npos)
      << refusal(write_glb(sparse));
  sparse["accessors"][0]["sparse"]["count"] = 8;
  sparse["accessors"][0]["sparse"]["values"]["byteOffset"] = 4;
  EXPECT_NE(refusal(write_glb(sparse)).find("accessors[0].sparse runs past its buffer views"), std::string::npos);
  sparse["accessors"][0]["sparse"]["values"]["byteOffset"] = 0;
  EXPECT_EQ(refusal(write_glb(sparse)), "");
  // Found by fuzzing: Assimp asked for 64 GiB for a strip without positions
  // (its corners minus two, unsigned).
  nlohmann::json unplaced = cube_gltf();
  unplaced["meshes"][0]["primitives"][0]["attributes"] = {{"NORMAL", 0}};
  unplaced["meshes"][0]["primitives"][0]["mode"] = 5;
  EXPECT_NE(refusal(write_glb(unplaced)).find("meshes[0] has a primitive without a POSITION attribute"),
            std::string::npos)
      << refusal(write_glb(unplaced));
  nlohmann::json short_strip = cube_gltf();
  short_strip["meshes"][0]["primitives"][0]["mode"] = 5;
  short_strip["accessors"][1]["count"] = 2;
  EXPECT_NE(refusal(write_glb(short_strip)).find("a primitive of mode 5 with 2 corners; that mode needs at least 3"),
            std::string::npos)
      << refusal(write_glb(short_strip));
  short_strip["accessors"][1]["count"] = 3;
  EXPECT_EQ(refusal(write_glb(short_strip)), "");
  nlohmann::json index = cube_gltf();
  index["nodes"][0]["mesh"] = -1;
  EXPECT_NE(refusal(write_glb(index)).find("nodes[0].mesh is not a whole number from 0"), std::string::npos);
}

// Assimp's glTF 1.0 reader aborted (SIGABRT) on an accessor past its view.
TEST_F(MeshBudgets, GltfOneIsRefusedByName) {
  nlohmann::json old = cube_gltf();
  old["asset"]["version"] = "1.0";
  EXPECT_NE(refusal(write_glb(old)).find("it is glTF 1.0; cubeforge reads glTF 2.0 only"), std::string::npos);
  std::string binary_v1 = glb(cube_gltf(), cube_buffer());
  const uint32_t one = 1;
  std::memcpy(binary_v1.data() + 4, &one, 4);
  EXPECT_NE(refusal(write("old.glb", binary_v1)).find("glTF 1.0"), std::string::npos);
}

TEST_F(MeshBudgets, ObjPolygonsAndTrianglesAreCountedInOnePass) {
  // A quad and a hexagon: 2 + 4 triangles, the largest polygon 6 corners.
  const fs::path path = write("shape.obj",
                              "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nv 0 0 1\nv 1 0 1\n"
                              "f 1 2 3 4\n# f 1 2 3 4 5 6 7 8\nf 1 2 3 4 5 6\n");
  MeshFileClaims claims;
  ASSERT_TRUE(check_mesh_file_budgets(path, ".obj", &claims).ok());
  EXPECT_EQ(claims.vertices, 6u);
  EXPECT_EQ(claims.faces, 6u);
  EXPECT_EQ(claims.largest_polygon, 6u);
  Budget corners("CUBEFORGE_MAX_POLYGON_CORNERS", 5);
  EXPECT_NE(refusal(path).find("its largest polygon needs 6 corners, over the budget of 5"), std::string::npos)
      << refusal(path);
}

TEST_F(MeshBudgets, BinaryCountsAreCheckedAgainstTheBytesThatHoldThem) {
  // A binary STL of 3 triangles: 84 + 150 bytes.
  std::string stl(84 + 150, '\0');
  const uint32_t three = 3;
  std::memcpy(stl.data() + 80, &three, 4);
  MeshFileClaims claims;
  ASSERT_TRUE(check_mesh_file_budgets(write("three.stl", stl), ".stl", &claims).ok());
  EXPECT_EQ(claims.faces, 3u);
  EXPECT_EQ(claims.vertices, 9u);
  // A PLY claiming a million vertices in a few bytes.
  const fs::path ply = write("short.ply",
                             "ply\nformat binary_little_endian 1.0\nelement vertex 1000000\nproperty float x\n"
                             "property float y\nproperty float z\nend_header\n0123456789");
  EXPECT_NE(refusal(ply).find("its PLY header claims elements that need at least 12000000 bytes, but 10 follow"),
            std::string::npos)
      << refusal(ply);
  Budget bytes("CUBEFORGE_MAX_MESH_BYTES", 100);
  EXPECT_NE(refusal(write("three.stl", stl)).find("needs 234 bytes, over the budget of 100 (CUBEFORGE_MAX_MESH_BYTES)"),
            std::string::npos);
}

// Each face visits the columns its extent spans: thousands of faces across
// the box cost gigabytes when a mesh's inside is measured.
TEST_F(MeshBudgets, MeasuringTheInsideIsHeldToItsGridBudget) {
  Mesh across;
  across.positions = {-1, -1, -1, 1, -1, 1, 1, 1, 1};
  for (int f = 0; f < 10; ++f) across.indices.insert(across.indices.end(), {0, 1, 2});
  GridSpec grid;
  grid.resolution = 3;  // 9 x 9 columns
  const uint64_t coverage = inside_grid_coverage(across, grid);
  // Columns are nudged off the grid lines by a fraction of a cell, toward -y
  // and -z: each face spans 8 of the 9 along each axis.
  EXPECT_EQ(coverage, 10u * 8 * 8);
  {
    Budget budget("CUBEFORGE_MAX_MESH_GRID_COVERAGE", coverage - 1);
    auto inside = mesh_inside_grid(across, grid);
    ASSERT_FALSE(inside.ok());
    EXPECT_NE(inside.error().message.find("CUBEFORGE_MAX_MESH_GRID_COVERAGE"), std::string::npos);
  }
  Budget budget("CUBEFORGE_MAX_MESH_GRID_COVERAGE", coverage);
  EXPECT_TRUE(mesh_inside_grid(across, grid).ok());
}

}  // namespace
}  // namespace cubeforge
