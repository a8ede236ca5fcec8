// Mesh files: export to GLB, OBJ, binary STL and binary PLY, and import of
// those (and whatever else Assimp reads) into one triangle mesh.
//
// The writers are ours: each format needs only positions, normals and
// triangles, and writing them directly keeps the bytes under our control.
// Every write is atomic (a temporary file in the target's folder, then a
// rename), so a failed export leaves the previous file or nothing. Import goes
// through Assimp, which joins all meshes of a file (with their node
// transforms applied) and triangulates polygons.
#pragma once

#include <filesystem>

#include "inference/core/result.h"
#include "inference/geometry/mesh.h"

namespace cubeforge {

enum class MeshFileFormat { kGlb, kObj, kStl, kPly };

const char* mesh_file_format_name(MeshFileFormat format);
// From the extension (.glb .obj .stl .ply, any case).
Result<MeshFileFormat> mesh_file_format_from_path(const std::filesystem::path& path);

// Writes `mesh` in the format its extension names, or in `format`. Vertex
// normals are written where the format has them; a mesh without normals gets
// area-weighted ones.
Status export_mesh(const Mesh& mesh, const std::filesystem::path& path);
Status export_mesh(const Mesh& mesh, const std::filesystem::path& path, MeshFileFormat format);

// Reads every triangle of a mesh file into one mesh. Normals are kept when
// every part of the file has them.
Result<Mesh> import_mesh(const std::filesystem::path& path);

}  // namespace cubeforge
