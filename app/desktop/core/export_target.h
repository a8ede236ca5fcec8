// Where an export goes, decided before anything is written: the folder as
// typed ("~" is the home folder, a relative folder is taken from the current
// one; none typed: the documents folder, documents_folder.h) joined with the
// file name, the format from the name's extension or the button pressed (the
// file's extension and its format always agree: a button replaces the name's
// extension), and what the Export panel must ask first: whether to create a
// missing folder, whether to replace an existing file.
#pragma once

#include <filesystem>
#include <string>

#include "inference/core/result.h"
#include "inference/geometry/mesh_io.h"

namespace cubeforge::app {

struct ExportTarget {
  std::filesystem::path path;  // absolute, with the format's extension
  MeshFileFormat format = MeshFileFormat::kGlb;
  bool folder_missing = false;  // the folder does not exist yet
  bool exists = false;          // a file of that name is already there
};

// "~" or "~/..." to the home folder ($HOME); anything else unchanged.
std::filesystem::path expand_home(const std::string& path);

// file_name: the expanded name template; extension: ".glb", ".obj", ".stl",
// ".ply" from a format button, or empty to take the format from the name.
Result<ExportTarget> plan_export(const std::string& folder, const std::string& file_name,
                                 const std::string& extension = {});

}  // namespace cubeforge::app
