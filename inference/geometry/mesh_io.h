// Mesh files: export to GLB, OBJ, binary STL and binary PLY, and import of
// OBJ, glTF/GLB, STL and PLY into one triangle mesh.
//
// The writers are ours: each format needs only positions, normals and
// triangles, and writing them directly keeps the bytes under our control.
// Every write is atomic (a temporary file in the target's folder, then a
// rename; see write_file_atomically for the rules), so a failed export leaves
// the previous file or nothing. Import goes through Assimp, which joins all
// meshes of a file (with their node transforms applied) and triangulates
// polygons. A mesh is untrusted input: only the four formats are read (not
// everything Assimp knows), and Assimp may open no file but the mesh itself
// and, for OBJ and glTF, which may refer to others (material libraries,
// buffers), files inside the mesh's folder; every coordinate must be finite.
#pragma once

#include <filesystem>

#include "inference/core/file_io.h"
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
Status export_mesh(const Mesh& mesh, const std::filesystem::path& path, MeshFileFormat format,
                   const WriteOptions& options = {});

// Reads every triangle of a mesh file (.obj, .gltf, .glb, .stl or .ply) into
// one mesh. Normals are kept when every part of the file has them.
Result<Mesh> import_mesh(const std::filesystem::path& path);

}  // namespace cubeforge
