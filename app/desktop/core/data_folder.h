// Where the app keeps its settings, window layout, log and history, and what
// it reads about its own process (resident memory).
#pragma once

#include <filesystem>
#include <string>

namespace cubeforge::app {

// `override_folder` when given (the --data-dir flag), else $CUBEFORGE_DATA_DIR,
// else $XDG_DATA_HOME/cubeforge, else ~/.local/share/cubeforge.
std::filesystem::path resolve_data_folder(const std::string& override_folder = {});

// Current resident set size of this process in MiB (/proc/self/status VmRSS); 0 if unknown.
double resident_memory_mib();

}  // namespace cubeforge::app
