// Export targets: see export_target.h.
#include "app/desktop/core/export_target.h"

#include <cstdlib>

#include "app/desktop/core/documents_folder.h"

namespace cubeforge::app {

std::filesystem::path expand_home(const std::string& path) {
  if (path.empty() || path[0] != '~' || (path.size() > 1 && path[1] != '/')) return path;
  const char* home = std::getenv("HOME");
  if (!home || !*home) return path;
  return std::filesystem::path(home) / (path.size() > 2 ? path.substr(2) : std::string());
}

Result<ExportTarget> plan_export(const std::string& folder, const std::string& file_name,
                                 const std::string& extension) {
  if (file_name.empty()) return make_error(ErrorCode::kInvalidArgument, "the file name is empty");
  std::filesystem::path name = file_name;
  if (name.has_parent_path())
    return make_error(ErrorCode::kInvalidArgument, "the file name '" + file_name +
                                                       "' names a folder; put folders in the Folder field");
  if (!extension.empty()) name.replace_extension(extension);
  auto format = mesh_file_format_from_path(name);
  if (!format.ok())
    return make_error(ErrorCode::kInvalidArgument,
                      "'" + name.string() + "' has no mesh format: end the name in .glb, .obj, .stl or .ply");
  std::error_code ec;
  std::filesystem::path base = export_folder_or_documents(folder);
  std::filesystem::path absolute = std::filesystem::absolute(base, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot resolve the folder '" + folder + "': " + ec.message());
  ExportTarget target;
  target.path = (absolute / name).lexically_normal();
  target.format = *format;
  const std::filesystem::path parent = target.path.parent_path();
  target.folder_missing = !std::filesystem::is_directory(parent, ec);
  target.exists = !target.folder_missing && std::filesystem::exists(target.path, ec);
  if (!target.folder_missing && std::filesystem::exists(parent / name, ec) &&
      std::filesystem::is_directory(parent / name, ec))
    return make_error(ErrorCode::kInvalidArgument, "'" + target.path.string() + "' is a folder");
  return target;
}

}  // namespace cubeforge::app
