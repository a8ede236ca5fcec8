// Whole-file reads and atomic writes (temporary file + fsync + rename).
#include "inference/core/file_io.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <random>

namespace cubeforge {

namespace {

std::string errno_text(int err) { return std::strerror(err); }

}  // namespace

Result<std::vector<std::byte>> read_file_bytes(const std::filesystem::path& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int err = errno;
    return make_error(err == ENOENT ? ErrorCode::kNotFound : ErrorCode::kIo,
                      "cannot open '" + path.string() + "': " + errno_text(err));
  }
  std::vector<std::byte> bytes;
  std::byte buffer[1 << 16];
  for (;;) {
    ssize_t n = ::read(fd, buffer, sizeof buffer);
    if (n < 0) {
      if (errno == EINTR) continue;
      int err = errno;
      ::close(fd);
      return make_error(ErrorCode::kIo, "cannot read '" + path.string() + "': " + errno_text(err));
    }
    if (n == 0) break;
    bytes.insert(bytes.end(), buffer, buffer + n);
  }
  ::close(fd);
  return bytes;
}

Result<std::string> read_file_text(const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(auto bytes, read_file_bytes(path));
  return std::string(reinterpret_cast<const char*>(bytes.data()), bytes.size());
}

Status write_file_atomically(const std::filesystem::path& path,
                             const std::function<Status(const ByteSink&)>& write) {
  std::filesystem::path target = path;
  std::filesystem::path directory = target.parent_path();
  if (directory.empty()) directory = ".";
  std::error_code ec;
  if (!std::filesystem::is_directory(directory, ec)) {
    return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "': directory '" + directory.string() +
                                          "' does not exist; create it or choose another path");
  }
  std::random_device entropy;
  std::string temp_name = "." + target.filename().string() + ".tmp" + std::to_string(entropy());
  std::filesystem::path temp = directory / temp_name;
  int fd = ::open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0) {
    int err = errno;
    return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "': " + errno_text(err) +
                                          "; check that the folder is writable and the disk is not full");
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
      ssize_t n = ::write(fd, p, left);
      if (n < 0) {
        if (errno == EINTR) continue;
        return make_error(ErrorCode::kIo, "cannot write '" + path.string() + "': " + errno_text(errno));
      }
      p += n;
      left -= size_t(n);
    }
    return ok_status();
  };
  Status written = write(sink);
  if (!written.ok()) return fail(written.take_error());
  if (::fsync(fd) != 0) return fail(make_error(ErrorCode::kIo, "cannot flush '" + path.string() + "': " + errno_text(errno)));
  if (::close(fd) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return make_error(ErrorCode::kIo, "cannot close '" + path.string() + "': " + errno_text(err));
  }
  if (::rename(temp.c_str(), target.c_str()) != 0) {
    int err = errno;
    ::unlink(temp.c_str());
    return make_error(ErrorCode::kIo, "cannot replace '" + path.string() + "': " + errno_text(err));
  }
  return ok_status();
}

Status write_file_atomically(const std::filesystem::path& path, std::span<const std::byte> bytes) {
  return write_file_atomically(path, [&](const ByteSink& sink) { return sink(bytes); });
}

Status write_file_atomically(const std::filesystem::path& path, std::string_view text) {
  return write_file_atomically(
      path, std::span<const std::byte>(reinterpret_cast<const std::byte*>(text.data()), text.size()));
}

}  // namespace cubeforge
