// The mesh checks shared by cleanup, measuring and export.
#include "inference/geometry/mesh.h"

#include <string>

namespace cubeforge {

Status check_mesh_indices(const Mesh& mesh, std::string_view what) {
  const std::string where = std::string(what) + ": ";
  if (mesh.positions.size() % 3 != 0) {
    return make_error(ErrorCode::kInvalidArgument, where + std::to_string(mesh.positions.size()) +
                                                       " position values, not a multiple of 3 (x, y, z)");
  }
  if (mesh.indices.size() % 3 != 0) {
    return make_error(ErrorCode::kInvalidArgument, where + std::to_string(mesh.indices.size()) +
                                                       " indices, not a multiple of 3 (one triple a face)");
  }
  for (uint32_t v : mesh.indices)
    if (size_t(v) >= mesh.vertex_count())
      return make_error(ErrorCode::kInvalidArgument, where + "index " + std::to_string(v) + " is out of range (" +
                                                         std::to_string(mesh.vertex_count()) + " vertices)");
  return ok_status();
}

}  // namespace cubeforge
