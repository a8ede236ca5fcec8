// Checked reads of regular files and atomic writes (see file_io.h for the rules).
#include "inference/core/file_io.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <mutex>
#include <optional>
#include <random>
#include <vector>

#include "inference/core/untrusted_text.h"

namespace cubeforge {

namespace {

constexpr size_t kMaxFileNameBytes = 255;          // NAME_MAX on every file system we write to
constexpr const char* kTemporarySuffix = ".tmp";
constexpr int kTemporaryHexDigits = 8;
constexpr time_t kFreshTemporarySeconds = 60;      // an empty temporary this young may be a writer's, not yet locked

// The reason an operation on a path failed, with what to do where that is clear.
std::string reason(int err) {
  std::string text = std::strerror(err);
  if (err == ELOOP) text += " (a loop of symbolic links)";
  else if (err == EACCES || err == EPERM) text += "; check the permissions of the file and the folders on its way";
  else if (err == ENAMETOOLONG) text += "; choose a shorter name";
  else if (err == EFBIG) text += " (the limit on file size, ulimit -f, or the file system's largest file was reached)";
  else if (err == ENOSPC || err == EDQUOT) text += "; free some space or choose another disk";
  return text;
}

std::string quoted(const std::filesystem::path& path) { return single_quoted(path.string()); }

const char* type_of_mode(mode_t mode) {
  if (S_ISREG(mode)) return "a regular file";
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO (named pipe)";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISLNK(mode)) return "a symbolic link";
  return "not a regular file";
}

std::filesystem::path folder_of(const std::filesystem::path& path) {
  std::filesystem::path parent = path.parent_path();
  return parent.empty() ? std::filesystem::path(".") : parent;
}

bool is_hex(std::string_view text) {
  for (char c : text)
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  return !text.empty();
}

bool is_digits(std::string_view text) {
  for (char c : text)
    if (c < '0' || c > '9') return false;
  return !text.empty();
}

// Temporaries a killed write left for `name` in `folder`: ours by pattern
// (".<name>.<8 hex>.tmp", or ".<name>.tmp<digits>" from earlier versions), and
// stale because no writer holds their lock. A temporary that is empty and
// fresh may belong to a writer between creating and locking it: left alone.
void remove_stale_temporaries(const std::filesystem::path& folder, const std::string& name) {
  const std::string shortened = temporary_file_name(name, std::string(kTemporaryHexDigits, '0'));
  const std::string prefix = shortened.substr(0, shortened.size() - kTemporaryHexDigits - std::strlen(kTemporarySuffix));
  const std::string old_prefix = "." + name + ".tmp";
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return;
  const int dir_fd = ::dirfd(dir);
  while (const dirent* entry = ::readdir(dir)) {
    const std::string_view entry_name = entry->d_name;
    bool ours = false, from_earlier_version = false;
    if (entry_name.size() == prefix.size() + kTemporaryHexDigits + 4 && entry_name.starts_with(prefix) &&
        entry_name.ends_with(kTemporarySuffix))
      ours = is_hex(entry_name.substr(prefix.size(), kTemporaryHexDigits));
    else if (entry_name.starts_with(old_prefix))
      ours = from_earlier_version = is_digits(entry_name.substr(old_prefix.size()));
    if (!ours) continue;
    const int fd = ::openat(dir_fd, entry->d_name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) continue;
    struct stat st {};
    const bool regular = ::fstat(fd, &st) == 0 && S_ISREG(st.st_mode);
    const bool fresh = std::time(nullptr) - st.st_mtime < kFreshTemporarySeconds;
    const bool may_be_in_use = fresh && (st.st_size == 0 || from_earlier_version);
    if (regular && !may_be_in_use && ::flock(fd, LOCK_EX | LOCK_NB) == 0) ::unlinkat(dir_fd, entry->d_name, 0);
    ::close(fd);
  }
  ::closedir(dir);
}

void flush_folder(const std::filesystem::path& folder) {
  const int fd = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  ::fsync(fd);  // some file systems refuse to flush a folder; the rename itself is done either way
  ::close(fd);
}

bool cancelled(const WriteOptions& options) {
  return options.cancel && options.cancel->load(std::memory_order_relaxed);
}

// The files this run has read, once protect_inputs_from_writes() was called.
struct InputFile {
  dev_t device;
  ino_t inode;
  std::filesystem::path path;
};
struct InputFiles {
  std::mutex mutex;
  bool protecting = false;
  std::vector<InputFile> files;
};
InputFiles& input_files() {
  static InputFiles inputs;
  return inputs;
}

void remember_input(const std::filesystem::path& path, const struct stat& st) {
  InputFiles& inputs = input_files();
  std::lock_guard lock(inputs.mutex);
  if (!inputs.protecting) return;
  for (const InputFile& file : inputs.files)
    if (file.device == st.st_dev && file.inode == st.st_ino) return;
  inputs.files.push_back({st.st_dev, st.st_ino, path});
}

// The input of this run that `st` is, if it is one.
std::optional<std::filesystem::path> input_named_by(const struct stat& st) {
  InputFiles& inputs = input_files();
  std::lock_guard lock(inputs.mutex);
  for (const InputFile& file : inputs.files)
    if (file.device == st.st_dev && file.inode == st.st_ino) return file.path;
  return std::nullopt;
}

constexpr int kMaxSymbolicLinks = 40;  // the kernel's limit (MAXSYMLINKS)

// The kernel's protected_symlinks rule, whatever the system's setting: a
// symbolic link in a world-writable folder with the sticky bit (/tmp) is
// followed only when it belongs to this user or to the folder's owner. Anyone
// may plant a link there; only its owner and the folder's may make it theirs.
// Every link on the way to `path` is checked, as the kernel would follow them;
// a path that cannot be followed to its end is left to the other checks.
Status check_planted_links(const std::filesystem::path& path, const std::string& where) {
  std::vector<std::string> pending;  // components still to follow, the next one last
  auto push = [&](const std::filesystem::path& p) {
    std::vector<std::string> parts;
    for (const auto& part : p.relative_path()) parts.push_back(part.string());
    pending.insert(pending.end(), parts.rbegin(), parts.rend());
  };
  std::filesystem::path resolved;
  if (path.is_absolute()) {
    resolved = "/";
  } else {
    std::error_code ec;
    resolved = std::filesystem::current_path(ec);
    if (ec) return ok_status();
  }
  push(path);
  int links = 0;
  while (!pending.empty()) {
    const std::string part = std::move(pending.back());
    pending.pop_back();
    if (part.empty() || part == ".") continue;
    if (part == "..") {
      resolved = resolved.parent_path();
      continue;
    }
    const std::filesystem::path next = resolved / part;
    struct stat link {};
    if (::lstat(next.c_str(), &link) != 0) return ok_status();
    if (!S_ISLNK(link.st_mode)) {
      resolved = next;
      continue;
    }
    struct stat folder {};
    if (::stat(resolved.c_str(), &folder) == 0 && (folder.st_mode & S_ISVTX) && (folder.st_mode & S_IWOTH) &&
        link.st_uid != ::geteuid() && link.st_uid != folder.st_uid)
      return make_error(ErrorCode::kIo,
                        where + quoted(next) + " is a symbolic link that another user (uid " +
                            std::to_string(link.st_uid) + ") put in " + quoted(resolved) +
                            ", a folder everyone may write to; it is not followed, so that it cannot send this "
                            "output over a file of yours. Remove the link or choose another name");
    if (++links > kMaxSymbolicLinks) return ok_status();
    char target[PATH_MAX];
    const ssize_t n = ::readlink(next.c_str(), target, sizeof target);
    if (n <= 0 || size_t(n) >= sizeof target) return ok_status();
    const std::filesystem::path target_path(std::string(target, size_t(n)));
    if (target_path.is_absolute()) resolved = "/";
    push(target_path);
  }
  return ok_status();
}

}  // namespace

void remember_input_file(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) == 0) remember_input(path, st);
}

void protect_inputs_from_writes(bool protect) {
  InputFiles& inputs = input_files();
  std::lock_guard lock(inputs.mutex);
  inputs.protecting = protect;
  if (!protect) inputs.files.clear();
}

// --- examining paths ---------------------------------------------------------

Result<FileKind> file_kind(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT || err == ENOTDIR) return FileKind::kMissing;
    return make_error(ErrorCode::kIo, "cannot examine " + quoted(path) + ": " + reason(err));
  }
  if (S_ISREG(st.st_mode)) return FileKind::kRegular;
  if (S_ISDIR(st.st_mode)) return FileKind::kDirectory;
  return FileKind::kOther;
}

std::string describe_file_type(const std::filesystem::path& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return "missing";
  return type_of_mode(st.st_mode);
}

Status require_regular_file(const std::filesystem::path& path, const std::string& what) {
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == FileKind::kRegular) return ok_status();
  if (kind == FileKind::kMissing) return make_error(ErrorCode::kNotFound, what + " " + quoted(path) + " does not exist");
  return make_error(ErrorCode::kInvalidArgument,
                    what + " " + quoted(path) + " is " + describe_file_type(path) + ", not a regular file");
}

Status require_directory(const std::filesystem::path& path, const std::string& what) {
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == FileKind::kDirectory) return ok_status();
  if (kind == FileKind::kMissing) return make_error(ErrorCode::kNotFound, what + " " + quoted(path) + " does not exist");
  return make_error(ErrorCode::kInvalidArgument,
                    what + " " + quoted(path) + " is " + describe_file_type(path) + ", not a folder");
}

// --- reading -------------------------------------------------------------------

Result<int> open_regular_file(const std::filesystem::path& path, uint64_t* size) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  if (fd < 0) {
    const int err = errno;
    return make_error(err == ENOENT || err == ENOTDIR ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open " + quoted(path) + ": " + reason(err));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return make_error(ErrorCode::kIo, "cannot examine " + quoted(path) + ": " + reason(err));
  }
  if (!S_ISREG(st.st_mode)) {
    ::close(fd);
    return make_error(ErrorCode::kInvalidArgument, quoted(path) + " is " + type_of_mode(st.st_mode) +
                                                       ", not a regular file; give the path of a file");
  }
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) ::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  if (size) *size = uint64_t(st.st_size);
  remember_input(path, st);
  return fd;
}

Result<std::vector<std::byte>> read_file_bytes(const std::filesystem::path& path, uint64_t max_bytes) {
  uint64_t size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &size));
  auto too_large = [&](uint64_t bytes) {
    return make_error(ErrorCode::kInvalidArgument, quoted(path) + " is " + std::to_string(bytes) +
                                                       " bytes, more than the " + std::to_string(max_bytes) +
                                                       " such a file can be; is it the right file?");
  };
  if (size > max_bytes) {
    ::close(fd);
    return too_large(size);
  }
  std::vector<std::byte> bytes;
  bytes.reserve(size_t(size));
  std::byte buffer[1 << 16];
  for (;;) {
    const ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      const int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIo, "cannot read " + quoted(path) + ": " + reason(err));
    }
    if (n == 0) break;
    if (bytes.size() + size_t(n) > max_bytes) {  // the file grew while being read
      ::close(fd);
      return too_large(bytes.size() + size_t(n));
    }
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  ::close(fd);
  return bytes;
}

Result<std::string> read_file_text(const std::filesystem::path& path, uint64_t max_bytes) {
  CUBEFORGE_ASSIGN_OR_RETURN(auto bytes, read_file_bytes(path, max_bytes));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

// --- writing -------------------------------------------------------------------

std::string temporary_file_name(const std::string& target_name, const std::string& suffix) {
  const size_t fixed = 1 + 1 + suffix.size() + std::strlen(kTemporarySuffix);  // ".", ".", suffix, ".tmp"
  size_t keep = target_name.size();
  if (keep + fixed > kMaxFileNameBytes) {
    keep = kMaxFileNameBytes - fixed;
    while (keep > 0 && (uint8_t(target_name[keep]) & 0xC0) == 0x80) --keep;  // not inside a UTF-8 sequence
  }
  // Appended: GCC 12 misreads `literal + string` here as overlapping copies.
  std::string name = ".";
  name.append(target_name, 0, keep).append(".").append(suffix).append(kTemporarySuffix);
  return name;
}

Result<std::filesystem::path> resolve_write_target(const std::filesystem::path& path, const WriteOptions& options) {
  const std::string where = "cannot write " + quoted(path) + ": ";
  if (path.empty() || !path.has_filename())
    return make_error(ErrorCode::kInvalidArgument, where + "the path names no file");
  CUBEFORGE_TRY(check_planted_links(path, where));
  struct stat link {};
  if (::lstat(path.c_str(), &link) != 0) {
    const int err = errno;
    if (err != ENOENT) {
      if (err == ENOTDIR) return make_error(ErrorCode::kIo, where + quoted(folder_of(path)) + " is not a folder");
      return make_error(ErrorCode::kIo, where + reason(err));
    }
    // A new file: its folder must exist and take new files.
    const std::filesystem::path folder = folder_of(path);
    auto kind = file_kind(folder);
    if (!kind.ok()) return make_error(ErrorCode::kIo, where + kind.error().message);
    if (*kind == FileKind::kMissing)
      return make_error(ErrorCode::kIo, where + "the folder " + quoted(folder) +
                                            " does not exist; create it or choose another path");
    if (*kind != FileKind::kDirectory)
      return make_error(ErrorCode::kIo, where + quoted(folder) + " is " + describe_file_type(folder) + ", not a folder");
    if (::access(folder.c_str(), W_OK | X_OK) != 0)
      return make_error(ErrorCode::kIo, where + "the folder " + quoted(folder) + " is not writable (" +
                                            reason(errno) + ")");
    return path;
  }
  if (S_ISLNK(link.st_mode)) {
    // Written through: the file the link points to is replaced, the link stays.
    struct stat st {};
    if (::stat(path.c_str(), &st) != 0) {
      const int err = errno;
      if (err == ENOENT) {
        char target[PATH_MAX] = {};
        const ssize_t n = ::readlink(path.c_str(), target, sizeof target - 1);
        return make_error(ErrorCode::kIo,
                          where + "it is a symbolic link to '" + std::string(target, size_t(std::max<ssize_t>(n, 0))) +
                              "', which does not exist; remove the link or choose another name");
      }
      return make_error(ErrorCode::kIo, where + reason(err));
    }
    char* resolved = ::realpath(path.c_str(), nullptr);
    if (!resolved) return make_error(ErrorCode::kIo, where + reason(errno));
    std::filesystem::path target(resolved);
    std::free(resolved);
    return resolve_write_target(target, options);
  }
  if (S_ISDIR(link.st_mode))
    return make_error(ErrorCode::kIo, where + "it is a directory; give a file name");
  if (!S_ISREG(link.st_mode))
    return make_error(ErrorCode::kIo, where + "it is " + type_of_mode(link.st_mode) + "; only regular files are written");
  if (const auto input = input_named_by(link))
    return make_error(ErrorCode::kInvalidArgument,
                      where + (*input == path ? std::string("it is") : "it is the same file as " + quoted(*input) + ",") +
                          " an input of this run; writing it would destroy what is being read. Choose another path");
  const bool read_only = ::access(path.c_str(), W_OK) != 0 || (link.st_mode & 0222) == 0;
  if (read_only && !options.replace_read_only)
    return make_error(ErrorCode::kIo,
                      where + ((link.st_mode & 0222) == 0 ? "the file is read-only; "
                                                          : "the file is write-protected for this user; ") +
                          options.read_only_hint);
  const std::filesystem::path folder = folder_of(path);
  if (::access(folder.c_str(), W_OK | X_OK) != 0)
    return make_error(ErrorCode::kIo, where + "the folder " + quoted(folder) + " is not writable (" + reason(errno) +
                                          "), so the file cannot be replaced");
  return path;
}

Status write_file_atomically(const std::filesystem::path& path, const std::function<Status(const ByteSink&)>& write,
                             const WriteOptions& options) {
  CUBEFORGE_ASSIGN_OR_RETURN(const std::filesystem::path target, resolve_write_target(path, options));
  const std::filesystem::path folder = folder_of(target);
  const std::string name = target.filename().string();
  remove_stale_temporaries(folder, name);

  struct stat existing {};
  const bool replacing = ::stat(target.c_str(), &existing) == 0 && S_ISREG(existing.st_mode);
  auto cancelled_error = [&] {
    return make_error(ErrorCode::kCancelled, "writing " + quoted(path) + " was cancelled; " +
                                                 (replacing ? "the file was left as it was" : "nothing was written"));
  };
  if (cancelled(options)) return cancelled_error();

  std::random_device entropy;
  std::filesystem::path temp;
  int fd = -1;
  for (int attempt = 0; attempt < 16 && fd < 0; ++attempt) {
    char suffix[kTemporaryHexDigits + 1];
    std::snprintf(suffix, sizeof suffix, "%08x", unsigned(entropy()));
    temp = folder / temporary_file_name(name, suffix);
    fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0644);
    if (fd < 0 && errno != EEXIST) break;
  }
  if (fd < 0) {
    const int err = errno;
    return make_error(ErrorCode::kIo, "cannot write " + quoted(path) + ": " + reason(err) +
                                          "; check that the folder is writable and the disk is not full");
  }
  ::flock(fd, LOCK_EX | LOCK_NB);  // marks the temporary as in use for other runs' clean-up
  if (replacing) {
    ::fchmod(fd, existing.st_mode & 07777);
    if (::geteuid() == 0) (void)!::fchown(fd, existing.st_uid, existing.st_gid);
  }
  auto fail = [&](Error error) -> Status {
    ::close(fd);
    ::unlink(temp.c_str());
    return error;
  };
  ByteSink sink = [&](std::span<const std::byte> bytes) -> Status {
    const std::byte* p = bytes.data();
    size_t left = bytes.size();
    while (left > 0) {
      if (cancelled(options)) return cancelled_error();
      const ssize_t n = ::write(fd, p, std::min<size_t>(left, size_t(1) << 24));
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(ErrorCode::kIo, "cannot write " + quoted(path) + ": " + reason(errno));
      }
      p += n;
      left -= size_t(n);
    }
    return ok_status();
  };
  Status written = write(sink);
  if (!written.ok()) return fail(written.take_error());
  if (::fsync(fd) != 0) return fail(make_error(ErrorCode::kIo, "cannot flush " + quoted(path) + ": " + reason(errno)));
  if (cancelled(options)) return fail(cancelled_error());
  if (options.before_rename) options.before_rename();
  if (cancelled(options)) return fail(cancelled_error());
  if (::rename(temp.c_str(), target.c_str()) != 0)
    return fail(make_error(ErrorCode::kIo, "cannot replace " + quoted(path) + ": " + reason(errno)));
  flush_folder(folder);
  ::close(fd);  // after the rename: the lock keeps other runs' clean-up away until the name is gone
  return ok_status();
}

Status write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes,
                             const WriteOptions& options) {
  return write_file_atomically(path, [&](const ByteSink& sink) { return sink(bytes); }, options);
}

Status write_file_atomically(const std::filesystem::path& path, std::string_view text, const WriteOptions& options) {
  return write_file_atomically(
      path, std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()), options);
}

}  // namespace cubeforge
