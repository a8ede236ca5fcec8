// Where exports go unless the person chose a folder: the desktop's documents
// folder, as the XDG user directories name it (what file managers and Save
// dialogs show as "Documents"), so that a creator finds the file without
// knowing where the app was started from.
#pragma once

#include <filesystem>
#include <string>

namespace cubeforge::app {

// XDG_DOCUMENTS_DIR from user-dirs.dirs in $XDG_CONFIG_HOME (else
// ~/.config), with $HOME expanded; else ~/Documents; else the home folder
// (when something other than a folder is at ~/Documents), else the working
// directory when there is no $HOME. Only read: nothing is created here (an
// export creates the folder when it writes there).
std::filesystem::path documents_folder();

// The folder an export goes to: `folder` as typed ("~" is the home folder,
// export_target.h), or the documents folder when it is empty.
std::filesystem::path export_folder_or_documents(const std::string& folder);

}  // namespace cubeforge::app
