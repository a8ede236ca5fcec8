// Files named by users: checked reads, and atomic writes with a serious
// tool's rules.
//
// Reads. Only regular files are read: a FIFO, a device or a directory given
// as a weight file, mesh or configuration is refused by name instead of
// blocking forever or reading without end. Nothing here throws; the
// std::filesystem overloads that throw (and abort the program on a loop of
// symbolic links or a folder without permission) are not used: every failure
// is an Error naming the path and the reason.
//
// Writes. Every file cubeforge writes (exports, checkpoints, settings,
// history) goes through write_file_atomically: the bytes go to a temporary
// file in the target's folder, are flushed, and the file is renamed over the
// target, then the folder is flushed. A failed, cancelled or killed write
// leaves the previous file (or nothing) behind, never half of one. The rules:
//   - the temporary is named ".<name>.<8 hex>.tmp", shortened so that it always
//     fits the file system's 255-byte limit, and is locked while written;
//     stale temporaries of that pattern for the same name (left by a killed
//     run: their lock is free) are removed before the next write;
//   - a read-only file is not replaced unless the caller forces it; a replaced
//     file keeps its permission bits (and, when run as root, its owner);
//   - a symbolic link is written through: the file it points to is replaced
//     and the link stays; a dangling link or a loop is refused;
//   - a symbolic link on the way that lies in a world-writable sticky folder
//     (as /tmp is) is followed only when it belongs to this user or to the
//     folder's owner: the kernel's protected_symlinks rule, kept whatever the
//     system's setting, so a link another user planted there cannot send the
//     output over a file of this user's;
//   - a file this run reads is never replaced, once the program has asked for
//     that (protect_inputs_from_writes): an output named like an input, or a
//     link or hard link to one, is refused before anything is written;
//   - a directory, FIFO or device at the target is refused;
//   - a cancel flag is honoured up to the rename; a write past the file size
//     limit (ulimit -f; the program ignores SIGXFSZ) or a full disk is an
//     error that says so, and the temporary is removed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge {

// --- examining paths ---------------------------------------------------------

enum class FileKind { kMissing, kRegular, kDirectory, kOther };

// What is at `path`, following symbolic links. kMissing when nothing is there
// (or a dangling link); an error when the path cannot be examined (a loop of
// symbolic links, a folder on the way without permission), naming both.
Result<FileKind> file_kind(const std::filesystem::path& path);

// "a directory", "a FIFO (named pipe)", "a character device", ... for the
// file at `path` (following links); "missing" when there is none.
std::string describe_file_type(const std::filesystem::path& path);

// An error unless `path` is a regular file / a folder. `what` names the role
// in the message ("the GPT weights", "the mesh").
Status require_regular_file(const std::filesystem::path& path, const std::string& what);
Status require_directory(const std::filesystem::path& path, const std::string& what);

// --- reading -------------------------------------------------------------------

// Opens a regular file for reading without blocking on a FIFO. Returns the
// descriptor (the caller closes it) and fills `size`; any other kind of file is
// refused with an error that says what it is.
Result<int> open_regular_file(const std::filesystem::path& path, uint64_t* size);

// Whole-file reads of regular files, refusing files larger than `max_bytes`.
Result<std::vector<std::byte>> read_file_bytes(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX);
Result<std::string> read_file_text(const std::filesystem::path& path, uint64_t max_bytes = UINT64_MAX);

// --- inputs of this run ---------------------------------------------------------

// From this call on, every file opened through open_regular_file (and so every
// read above, every safetensors file) is remembered as an input of this run,
// and resolve_write_target / write_file_atomically refuse to replace one. For
// programs that read their inputs and write outputs once (the command-line
// tool); the desktop app rewrites its own settings and history and does not call it.
// `false` ends the protection and forgets the inputs (for tests).
void protect_inputs_from_writes(bool protect = true);

// Marks `path` an input of this run, as open_regular_file does, for files
// another library opens itself (Assimp, for a mesh and the files it names).
void remember_input_file(const std::filesystem::path& path);

// --- writing -------------------------------------------------------------------

struct WriteOptions {
  bool replace_read_only = false;              // replace a file without write permission
  std::string read_only_hint = "make it writable or choose another name";  // what the error suggests
  const std::atomic<bool>* cancel = nullptr;   // checked while writing and just before the rename
  // Called once the bytes are flushed, just before the rename: the last
  // moment a cancel is honoured (tests stop there).
  std::function<void()> before_rename;
};

// Where a write to `path` will land (the file a symbolic link points to, or
// `path` itself), or the reason it cannot: a missing folder, a directory or
// FIFO at the path, a dangling link or loop, a link another user planted in a
// shared folder, a read-only file without `replace_read_only`, an input of
// this run. Checked again by the write; tools call it before long work so a
// bad path costs nothing.
Result<std::filesystem::path> resolve_write_target(const std::filesystem::path& path,
                                                   const WriteOptions& options = {});

// The name of the temporary for `target_name` with the given suffix (8 hex
// digits): ".<name>.<suffix>.tmp", the name cut at a UTF-8 boundary so the
// whole fits in 255 bytes.
std::string temporary_file_name(const std::string& target_name, const std::string& suffix);

// `write` receives an output sink; returning an error aborts and removes the
// temporary file. A cancel ends with ErrorCode::kCancelled.
using ByteSink = std::function<Status(std::span<const std::byte>)>;
Status write_file_atomically(const std::filesystem::path& path, const std::function<Status(const ByteSink&)>& write,
                             const WriteOptions& options = {});
Status write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                             const WriteOptions& options = {});
Status write_file_atomically(const std::filesystem::path& path, std::string_view text,
                             const WriteOptions& options = {});

}  // namespace cubeforge
