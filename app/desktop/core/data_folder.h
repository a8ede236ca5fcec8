// Where the app keeps its settings, window layout, log and history, and what
// it reads about its own process (resident memory).
#pragma once

#include <filesystem>

#include "inference/core/result.h"
#include <string>

namespace cubeforge::app {

// `override_folder` when given (the --data-dir flag), else $CUBEFORGE_DATA_DIR,
// else $XDG_DATA_HOME/cubeforge, else ~/.local/share/cubeforge.
std::filesystem::path resolve_data_folder(const std::string& override_folder = {});

// Current resident set size of this process in MiB (/proc/self/status VmRSS); 0 if unknown.
double resident_memory_mib();

// A file the app keeps in its data folder (the log, the window layout) may be
// opened only when it is a regular file or missing: a FIFO there would block
// the app at start, and a directory or a loop of links would fail without a
// word. The error names the file and what is there instead.
Status check_data_file(const std::filesystem::path& path);

}  // namespace cubeforge::app
