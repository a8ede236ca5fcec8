// libFuzzer target: mesh import. The first byte picks the format (OBJ, glTF,
// GLB, STL, PLY), the rest is the file, written to a private folder and read
// with import_mesh as `tokenize --mesh` does. It must give a mesh or an error;
// an accepted mesh has triangles indexing its vertices and finite
// coordinates. The folder also holds a file the mesh may name ("beside.bin");
// nothing outside it is ever opened (that is checked by the unit tests).
#include <unistd.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_io.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::filesystem::path folder = [] {
    auto path = std::filesystem::temp_directory_path() / ("cubeforge-mesh-fuzz-" + std::to_string(::getpid()));
    std::filesystem::create_directories(path);
    (void)cubeforge::write_file_atomically(path / "beside.bin", std::string_view(std::string(256, '\0')));
    return path;
  }();
  if (size == 0) return 0;
  static const char* const extensions[] = {".obj", ".gltf", ".glb", ".stl", ".ply"};
  const std::filesystem::path path = folder / (std::string("mesh") + extensions[data[0] % 5]);
  {
    FILE* file = std::fopen(path.c_str(), "wb");
    if (!file) std::abort();
    std::fwrite(data + 1, 1, size - 1, file);
    std::fclose(file);
  }
  auto mesh = cubeforge::import_mesh(path);
  if (!mesh.ok()) {
    (void)mesh.error().to_string();
    return 0;
  }
  if (mesh->empty() || mesh->positions.size() % 3 != 0 || mesh->indices.size() % 3 != 0) std::abort();
  for (uint32_t v : mesh->indices)
    if (size_t(v) >= mesh->vertex_count()) std::abort();
  for (float x : mesh->positions)
    if (!std::isfinite(x)) std::abort();
  return 0;
}
