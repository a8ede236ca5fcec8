// Building the hostile situations tests need: copies of the built-in model
// with a tensor added, renamed or poisoned; a private temporary folder; a
// process started with a pipe on its output that a test can watch and signal;
// and whether the test can run a command as a user without this one's
// permissions.
#pragma once

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/tensor/safetensors.h"

extern char** environ;

namespace cubeforge::testing {

// The model shipped in assets/model: small, always in the source tree.
inline std::filesystem::path builtin_model_dir() {
  return std::filesystem::path(CUBEFORGE_SOURCE_DIR) / "assets" / "model";
}

// A fresh folder under the system's temporary folder, removed with the object.
class ScratchFolder {
 public:
  explicit ScratchFolder(const std::string& name) {
    std::string pattern = (std::filesystem::temp_directory_path() / ("cubeforge-" + name + "-XXXXXX")).string();
    if (::mkdtemp(pattern.data())) path_ = pattern;
    ::chmod(path_.c_str(), 0755);
  }
  ~ScratchFolder() {
    std::error_code ec;
    // Permissions a test took away are given back so everything can go. A
    // link is skipped: chmod follows it, and it may lead into a fixture.
    for (auto it = std::filesystem::recursive_directory_iterator(
             path_, std::filesystem::directory_options::skip_permission_denied, ec);
         !ec && it != std::filesystem::recursive_directory_iterator(); it.increment(ec))
      if (std::error_code link_ec; !it->is_symlink(link_ec)) ::chmod(it->path().c_str(), 0755);
    ::chmod(path_.c_str(), 0755);
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& name) const { return path_ / name; }

 private:
  std::filesystem::path path_;
};

// Copies the built-in model (without its training records) to `to`.
inline void copy_builtin_model(const std::filesystem::path& to) {
  const auto from = builtin_model_dir();
  std::filesystem::create_directories(to / "clip");
  for (const char* name : {"shape_gpt.safetensors", "shape_tokenizer.safetensors", "config.yaml"})
    std::filesystem::copy_file(from / name, to / name, std::filesystem::copy_options::overwrite_existing);
  for (const auto& entry : std::filesystem::directory_iterator(from / "clip"))
    std::filesystem::copy_file(entry.path(), to / "clip" / entry.path().filename(),
                               std::filesystem::copy_options::overwrite_existing);
}

// Rewrites a safetensors file after `edit` changed its list of tensors. The
// tensors' bytes are copies the edit may change (`bytes[name]`).
struct EditableTensors {
  std::vector<TensorToWrite> tensors;
  std::map<std::string, std::vector<std::byte>> bytes;
};
inline bool rewrite_safetensors(const std::filesystem::path& path, const std::function<void(EditableTensors&)>& edit) {
  auto file = SafetensorsFile::open(path);
  if (!file.ok()) return false;
  EditableTensors editable;
  for (const auto& entry : file->entries()) {
    auto view = file->get(entry.name);
    auto& copy = editable.bytes[entry.name];
    copy.assign(view->data, view->data + view->byte_size());
    editable.tensors.push_back({entry.name, entry.dtype, entry.shape, {}});
  }
  edit(editable);
  for (auto& t : editable.tensors) t.data = editable.bytes[t.name];
  return write_safetensors(path, editable.tensors, file->metadata()).ok();
}

// Sets element 0 of a float32 tensor.
inline void poison_first_element(EditableTensors& tensors, const std::string& name, float value) {
  std::memcpy(tensors.bytes[name].data(), &value, sizeof value);
}

// A process whose stdout and stderr come through one pipe.
class SpawnedProcess {
 public:
  SpawnedProcess(const std::vector<std::string>& argv, const std::vector<std::string>& extra_environment = {}) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return;
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
    std::vector<char*> args;
    for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    std::vector<std::string> environment(extra_environment);
    for (char** e = environ; *e; ++e) environment.emplace_back(*e);
    std::vector<char*> envp;
    for (auto& e : environment) envp.push_back(e.data());
    envp.push_back(nullptr);
    if (posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data()) != 0) pid_ = -1;
    posix_spawn_file_actions_destroy(&actions);
    ::close(fds[1]);
    out_fd_ = fds[0];
  }
  ~SpawnedProcess() {
    if (pid_ > 0 && !exited_) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (out_fd_ >= 0) ::close(out_fd_);
  }
  bool started() const { return pid_ > 0; }
  pid_t pid() const { return pid_; }
  const std::string& output() const { return output_; }

  // Reads output until it holds `text` (true) or `seconds` pass or the pipe closes.
  bool wait_for_output(const std::string& text, double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (output_.find(text) == std::string::npos) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
      if (left.count() <= 0 || !read_some(int(left.count()))) return output_.find(text) != std::string::npos;
    }
    return true;
  }
  void signal(int number) { ::kill(pid_, number); }
  // The exit code, 128 + signal when killed, or -1 after `seconds` without exiting.
  int wait(double seconds) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      read_some(10);
      int status = 0;
      const pid_t done = ::waitpid(pid_, &status, WNOHANG);
      if (done == pid_) {
        exited_ = true;
        while (read_some(10)) {
        }
        return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      }
    }
    return -1;
  }

 private:
  bool read_some(int timeout_ms) {
    pollfd p{out_fd_, POLLIN, 0};
    if (::poll(&p, 1, timeout_ms) <= 0) return false;
    char buffer[4096];
    const ssize_t n = ::read(out_fd_, buffer, sizeof buffer);
    if (n <= 0) return false;
    output_.append(buffer, size_t(n));
    return true;
  }

  pid_t pid_ = -1;
  int out_fd_ = -1;
  bool exited_ = false;
  std::string output_;
};

// A command prefix that runs a program as a user without this process's
// permissions ("nobody"), or empty when the test cannot arrange one: as a
// non-root user the test's own user already lacks permission on what it
// chmods away, so no prefix is needed and `*needed` is false.
inline std::vector<std::string> as_unprivileged_user(bool* possible) {
  *possible = true;
  if (::geteuid() != 0) return {};
  for (const char* setpriv : {"/usr/bin/setpriv", "/bin/setpriv"})
    if (::access(setpriv, X_OK) == 0)
      return {setpriv, "--reuid=65534", "--regid=65534", "--clear-groups"};
  *possible = false;
  return {};
}

}  // namespace cubeforge::testing
