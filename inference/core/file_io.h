// Whole-file reads and atomic writes.
//
// Every file cubeforge writes (exports, checkpoints, settings, history) goes
// through write_file_atomically: the bytes go to a temporary file in the same
// directory, are flushed, and the file is renamed over the target. A failed or
// interrupted write leaves the previous file (or nothing) behind, never half.
#pragma once

#include <cstddef>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge {

Result<std::vector<std::byte>> read_file_bytes(const std::filesystem::path& path);
Result<std::string> read_file_text(const std::filesystem::path& path);

// `write` receives an output sink; returning an error aborts and removes the
// temporary file.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
Status write_file_atomically(const std::filesystem::path& path, const std::function<Status(const ByteSink&)>& write);
Status write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes);
Status write_file_atomically(const std::filesystem::path& path, std::string_view text);

}  // namespace cubeforge
