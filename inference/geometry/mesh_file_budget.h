// What a mesh file will cost to import, counted from what it says before
// Assimp reads it, and held to the input budgets (inference/core/input_budgets.h).
//
// Assimp allocates what a file claims and recurses through what it nests: a
// sparse 2 GiB STL whose header counts 43 million triangles, a GLB placing one
// mesh a hundred thousand times, a glTF buffer of gigabytes of which a few
// bytes are used, a node hierarchy 50000 levels deep. Each format's claims are
// read here first, cheaply and without recursion: the file's bytes and the
// buffers it names; a binary STL's triangle count; a PLY's element counts
// against the bytes that could hold them; an OBJ's vertices, triangles after
// triangulation and polygon corners, counted in one pass over its lines; a
// glTF's JSON read by a streaming parser into the scene's numbers (nodes and
// their hierarchy, the parts and triangles placed after instancing, and every
// accessor against its buffer view and buffer). glTF 1.0 is refused by name.
// import_mesh checks the scene Assimp built once more before post-processing
// multiplies it (mesh_io.cpp).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>

#include "inference/core/result.h"

namespace cubeforge {

// A scene hierarchy deeper than this is refused: importers walk it by
// recursion. Not a budget (raising it could crash), and far beyond real files.
inline constexpr int kMaxMeshNodeDepth = 256;

// The refusal of a hierarchy deeper than kMaxMeshNodeDepth; `subject` names the file.
Error node_hierarchy_too_deep(const std::string& subject);

// What a file says it holds, as far as a format tells before importing.
struct MeshFileClaims {
  uint64_t file_bytes = 0;    // the file and the buffer files it names
  uint64_t vertices = 0;      // after instancing
  uint64_t faces = 0;         // triangles after triangulation and instancing
  uint64_t instances = 0;     // placed mesh parts
  uint64_t nodes = 0;
  uint64_t largest_polygon = 0;  // corners
};

// Counts `path`'s claims (the extension, lowercase with its dot, names the
// format) and checks them against the budgets: ok, or an error naming the
// file, what it claims and the budget to raise. Errors for files that are
// not what they claim to be are kCorruptFile.
Status check_mesh_file_budgets(const std::filesystem::path& path, const std::string& extension,
                               MeshFileClaims* claims = nullptr);

}  // namespace cubeforge
