// libFuzzer target: glTF 2.0 and GLB import, structure-aware. The input is a
// byte that picks the container (even: a .gltf whose buffers may name
// "beside.bin" in its folder; odd: a .glb whose binary chunk holds a cube)
// and the glTF JSON, which json_structure_mutator.h nests, repeats, pushes to
// the edges of its numbers and gives keys twice; tests/fuzz/gltf_import.dict
// holds the format's names. Any input must give a mesh or an error, never a
// crash, a hang or gigabytes: the budgets are set small here, so that claims
// past them are refused cheaply. An accepted mesh indexes its vertices, has
// finite coordinates, and has no more triangles than the count before import
// said it would.
#include <stdlib.h>
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_file_budget.h"
#include "inference/geometry/mesh_io.h"
#include "tests/fuzz/json_structure_mutator.h"

namespace {

// A unit cube: 8 float32 positions, then 36 uint32 indices (240 bytes).
std::string cube_buffer() {
  const float positions[] = {0, 0, 0, 1, 0, 0, 0, 1, 0, 1, 1, 0, 0, 0, 1, 1, 0, 1, 0, 1, 1, 1, 1, 1};
  const uint32_t indices[] = {0, 2, 1, 1, 2, 3, 4, 5, 6, 5, 7, 6, 0, 1, 4, 1, 5, 4,
                              2, 6, 3, 3, 6, 7, 0, 4, 2, 2, 4, 6, 1, 3, 5, 3, 7, 5};
  std::string bytes(reinterpret_cast<const char*>(positions), sizeof positions);
  bytes.append(reinterpret_cast<const char*>(indices), sizeof indices);
  return bytes;
}

std::string glb(std::string json, const std::string& binary) {
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

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  // Budgets small enough that the largest claim within them imports in milliseconds.
  ::setenv("CUBEFORGE_MAX_MESH_BYTES", "1048576", 1);
  ::setenv("CUBEFORGE_MAX_MESH_VERTICES", "100000", 1);
  ::setenv("CUBEFORGE_MAX_MESH_FACES", "100000", 1);
  ::setenv("CUBEFORGE_MAX_MESH_INSTANCES", "200", 1);
  ::setenv("CUBEFORGE_MAX_MESH_NODES", "500", 1);
  // The dictionary beside this file, unless the command line names one.
  static std::vector<char*> arguments(*argv, *argv + *argc);
  static std::string dictionary = "-dict=" + (std::filesystem::path(__FILE__).parent_path() / "gltf_import.dict").string();
  bool named = false;
  for (char* argument : arguments) named = named || std::strncmp(argument, "-dict=", 6) == 0;
  if (!named && std::filesystem::exists(dictionary.substr(6))) {
    arguments.push_back(dictionary.data());
    *argc = int(arguments.size());
    arguments.push_back(nullptr);
    *argv = arguments.data();
  }
  return 0;
}

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return cubeforge::fuzz::mutate_json(data, size, max_size, seed, 1);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path folder = [] {
    auto path = std::filesystem::temp_directory_path() / ("cubeforge-gltf-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    (void)cubeforge::write_file_atomically(path / "beside.bin", std::string_view(cube_buffer()));
    return path;
  }();
  if (size == 0) return 0;
  const bool binary = data[0] % 2;
  const std::string json(reinterpret_cast<const char*>(data + 1), size - 1);
  const std::filesystem::path path = folder / (binary ? "mesh.glb" : "mesh.gltf");
  {
    const std::string bytes = binary ? glb(json, cube_buffer()) : json;
    FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) std::abort();
    std::fwrite(bytes.data(), 1, bytes.size(), file);
    std::fclose(file);
  }
  cubeforge::MeshFileClaims claims;
  const bool counted = cubeforge::check_mesh_file_budgets(path, binary ? ".glb" : ".gltf", &claims).ok();
  auto mesh = cubeforge::import_mesh(path);
  if (!mesh.ok()) {
    (void)mesh.error().to_string();
    return 0;
  }
  if (!counted) std::abort();  // the import runs the same checks first
  if (mesh->empty() || mesh->positions.size() % 3 != 0 || mesh->indices.size() % 3 != 0) std::abort();
  if (mesh->face_count() > claims.faces) std::abort();
  for (uint32_t v : mesh->indices)
    if (size_t(v) >= mesh->vertex_count()) std::abort();
  for (float x : mesh->positions)
    if (!std::isfinite(x)) std::abort();
  return 0;
}
