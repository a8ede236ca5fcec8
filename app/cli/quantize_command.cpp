// `cubeforge-cli quantize`: a model folder whose decode matrices are stored
// as bf16, Q8 or Q4 (inference/model/weight_formats.h), so that a large
// checkpoint is read at its quantised size every time it loads. The other
// files of the folder are copied alongside (copies, not links: a change to
// the new folder must never reach the model it came from); the written GPT
// is then loaded back and checked like any model file.
//
// Only what is inside the model folder is copied. A symbolic link is followed
// when it leads to a file or folder inside it; one that leads out of it (to a
// key, a home folder, another model) is refused by name before anything is
// written, as are loops, FIFOs and devices. Every copy is written by the rules
// of file_io.h (never over an input, never through a planted link), and
// Ctrl+C, SIGTERM or SIGHUP stop the run between files and within each write.
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <set>

#include "app/cli/commands.h"
#include "app/cli/engine_options.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "inference/core/untrusted_text.h"
#include "inference/model/gpt.h"

namespace cubeforge::cli {

namespace {

struct QuantizeOptions {
  std::string model_dir, out_dir;
  EngineFlags engine;
  bool force = false;
  bool json = false;
};

std::string quoted(const std::filesystem::path& path) { return quoted_untrusted(path.string()); }

// The canonical form of `path`, or why it has none (a loop, a missing part).
Result<std::filesystem::path> resolved_path(const std::filesystem::path& path) {
  char* resolved = ::realpath(path.c_str(), nullptr);
  if (!resolved) {
    const int err = errno;
    return make_error(ErrorCode::kIo, "cannot follow " + quoted(path) + ": " + std::strerror(err) +
                                          (err == ELOOP ? " (a loop of symbolic links)" : ""));
  }
  std::filesystem::path result(resolved);
  std::free(resolved);
  return result;
}

bool inside(const std::filesystem::path& path, const std::filesystem::path& folder) {
  const std::string p = path.string(), f = folder.string();
  return p.size() > f.size() && p.compare(0, f.size(), f) == 0 && (f.back() == '/' || p[f.size()] == '/');
}

// A file to copy: where it is read and where it goes, relative to --out.
struct CopyPlan {
  std::vector<std::pair<std::filesystem::path, std::filesystem::path>> files;
  std::vector<std::filesystem::path> folders;  // to create, relative to --out, parents first
};

// Adds everything in `folder` (whose path relative to the model folder is
// `relative`) to `plan`, following links only to what lies inside `root`.
Status plan_copies(const std::filesystem::path& root, const std::filesystem::path& folder,
                   const std::filesystem::path& relative, std::set<std::pair<dev_t, ino_t>>& folders_seen,
                   CopyPlan& plan) {
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return make_error(ErrorCode::kIo, "cannot list " + quoted(folder) + ": " + std::strerror(errno));
  std::vector<std::string> names;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (name != "." && name != "..") names.push_back(name);
  }
  ::closedir(dir);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    const std::filesystem::path path = folder / name;
    const std::filesystem::path to = relative / name;
    if (to == "shape_gpt.safetensors") continue;  // written quantised
    struct stat link {};
    if (::lstat(path.c_str(), &link) != 0)
      return make_error(ErrorCode::kIo, "cannot examine " + quoted(path) + ": " + std::strerror(errno));
    std::filesystem::path source = path;
    if (S_ISLNK(link.st_mode)) {
      auto target = resolved_path(path);
      if (!target.ok()) return target.error();
      if (*target != root && !inside(*target, root))
        return make_error(ErrorCode::kInvalidArgument,
                          quoted(path) + " is a symbolic link to " + quoted(*target) + ", outside the model folder " +
                              quoted(root) + "; links out of the folder are not followed, so nothing outside it is "
                              "copied. Put a copy of the file in the folder instead of the link, or remove the link");
      source = *target;
    }
    struct stat st {};
    if (::stat(source.c_str(), &st) != 0)
      return make_error(ErrorCode::kIo, "cannot examine " + quoted(path) + ": " + std::strerror(errno));
    if (S_ISDIR(st.st_mode)) {
      if (!folders_seen.insert({st.st_dev, st.st_ino}).second)
        return make_error(ErrorCode::kInvalidArgument, quoted(path) + " leads back to a folder already copied (a loop "
                                                       "of symbolic links); remove the link");
      plan.folders.push_back(to);
      CUBEFORGE_TRY(plan_copies(root, source, to, folders_seen, plan));
    } else if (S_ISREG(st.st_mode)) {
      plan.files.push_back({source, to});
    } else {
      return make_error(ErrorCode::kInvalidArgument,
                        quoted(path) + " is " + describe_file_type(source) + ", not a file or folder a model holds; "
                        "remove it from the model folder");
    }
  }
  return ok_status();
}

// Copies `from` to `to` by the rules of file_io.h (the read marks it an input of this run).
Status copy_file_checked(const std::filesystem::path& from, const std::filesystem::path& to,
                         const WriteOptions& options) {
  uint64_t size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(from, &size));
  const Status written = write_file_atomically(
      to,
      [&](const ByteSink& sink) -> Status {
        std::vector<std::byte> buffer(size_t(1) << 20);
        for (;;) {
          const ssize_t n = ::read(fd, buffer.data(), buffer.size());
          if (n < 0 && errno == EINTR) continue;
          if (n < 0) return make_error(ErrorCode::kIo, "cannot read " + quoted(from) + ": " + std::strerror(errno));
          if (n == 0) return ok_status();
          CUBEFORGE_TRY(sink(std::span<const std::byte>(buffer.data(), size_t(n))));
        }
      },
      options);
  ::close(fd);
  return written;
}

Status make_folder(const std::filesystem::path& folder) {
  if (::mkdir(folder.c_str(), 0755) == 0 || errno == EEXIST) {
    CUBEFORGE_TRY(require_directory(folder, "the output folder"));
    return ok_status();
  }
  return make_error(ErrorCode::kIo, "cannot create " + quoted(folder) + ": " + std::strerror(errno));
}

uint64_t file_bytes(const std::filesystem::path& path) {
  struct stat st {};
  return ::stat(path.c_str(), &st) == 0 ? uint64_t(st.st_size) : 0;
}

Status run(const QuantizeOptions& o, nlohmann::json* report) {
  const std::filesystem::path in = o.model_dir, out = o.out_dir;
  CUBEFORGE_TRY(require_directory(in, "the model folder"));
  CUBEFORGE_ASSIGN_OR_RETURN(const std::filesystem::path root, resolved_path(in));
  CUBEFORGE_ASSIGN_OR_RETURN(const FileKind out_kind, file_kind(out));
  if (out_kind != FileKind::kMissing) {
    CUBEFORGE_TRY(require_directory(out, "--out"));
    CUBEFORGE_ASSIGN_OR_RETURN(const std::filesystem::path out_root, resolved_path(out));
    if (out_root == root || inside(out_root, root) || inside(root, out_root))
      return make_error(ErrorCode::kInvalidArgument, "--out " + quoted(out) + " is " +
                                                         (out_root == root ? "the model folder itself"
                                                          : inside(out_root, root) ? "inside the model folder"
                                                                                   : "a folder around the model folder") +
                                                         "; give a new folder beside it");
    CUBEFORGE_ASSIGN_OR_RETURN(const FileKind held, file_kind(out / "shape_gpt.safetensors"));
    if (held != FileKind::kMissing && !o.force)
      return make_error(ErrorCode::kInvalidArgument, quoted(out) + " already holds a model; pass --force to replace "
                                                     "it, or choose another folder");
  }
  CUBEFORGE_ASSIGN_OR_RETURN(WeightOptions weights, weight_options(o.engine.weights, o.engine.q4_group));
  if (weights.format == WeightFormat::kStored)
    return make_error(ErrorCode::kInvalidArgument, "--weights stored would write the model as it is; choose bf16, q8 or q4");
  // Everything to copy is known, and every link checked, before anything is written.
  CopyPlan plan;
  std::set<std::pair<dev_t, ino_t>> folders_seen;
  if (struct stat st {}; ::stat(root.c_str(), &st) == 0) folders_seen.insert({st.st_dev, st.st_ino});
  CUBEFORGE_TRY(plan_copies(root, in, {}, folders_seen, plan));
  const auto gpt_path = in / "shape_gpt.safetensors";
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile source, SafetensorsFile::open(gpt_path));
  GptConfig config;
  CUBEFORGE_ASSIGN_OR_RETURN(const FileKind yaml_kind, file_kind(in / "config.yaml"));
  if (yaml_kind != FileKind::kMissing) {
    CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig yaml, parse_model_config_yaml(in / "config.yaml"));
    config = yaml.gpt;
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(config, infer_gpt_config(source));
  }
  CUBEFORGE_TRY(check_gpt_config(config, source, "the model configuration"));
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile converted,
                             convert_matrices(source, DualStreamGpt::decode_matrix_names(config), weights));
  if (interrupted().load()) return make_error(ErrorCode::kCancelled, "nothing was written");
  WriteOptions write = output_write_options(o.force);
  write.cancel = &interrupted();
  const auto out_gpt = out / "shape_gpt.safetensors";
  const std::map<std::string, std::string> metadata = {{"cubeforge.weights", o.engine.weights},
                                                       {"cubeforge.q4_group", std::to_string(weights.q4_group)}};
  auto write_folder = [&]() -> Status {
    CUBEFORGE_TRY(make_folder(out));
    CUBEFORGE_TRY(write_safetensors(out_gpt, tensors_with_conversions(source, converted), metadata, write));
    for (const auto& folder : plan.folders) CUBEFORGE_TRY(make_folder(out / folder));
    for (const auto& [from, to] : plan.files) {
      pause_if_testing("copy");
      CUBEFORGE_TRY(copy_file_checked(from, out / to, write));
    }
    return ok_status();
  };
  if (Status written = write_folder(); !written.ok()) {
    Error error = written.take_error();
    // A folder this run created is removed whole; in one that was there, each file is either replaced or not.
    if (out_kind == FileKind::kMissing) {
      std::error_code ec;
      std::filesystem::remove_all(out, ec);
      error.message += "; the unfinished folder " + quoted(out) + " was removed";
    } else {
      error.message += "; the files of " + quoted(out) + " are each either replaced whole or as they were";
    }
    return error;
  }
  // Read back like any model file: the tensor set, every quantised form, finite scales.
  CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt written, DualStreamGpt::load(out_gpt, &config));
  CUBEFORGE_ASSIGN_OR_RETURN(DualStreamGpt original, DualStreamGpt::from_file(std::move(source), config));
  size_t matrices = 0;
  for (const TensorEntry& e : converted.entries()) matrices += e.name.ends_with(".weight");
  *report = {{"model", escape_untrusted(in.string())},
             {"out", escape_untrusted(out.string())},
             {"weights", o.engine.weights},
             {"matrices_converted", matrices},
             {"files_copied", plan.files.size()},
             {"gpt_file_bytes", file_bytes(gpt_path)},
             {"quantized_gpt_file_bytes", file_bytes(out_gpt)},
             {"decode_weight_bytes", original.decode_weight_bytes()},
             {"quantized_decode_weight_bytes", written.decode_weight_bytes()}};
  if (weights.format == WeightFormat::kQ4) (*report)["q4_group"] = weights.q4_group;
  return ok_status();
}

}  // namespace

Action add_quantize_command(CLI::App& app) {
  auto o = std::make_shared<QuantizeOptions>();
  CLI::App* cmd = app.add_subcommand("quantize", "Write a model folder whose decode matrices are bf16, Q8 or Q4");
  cmd->add_option("--model", o->model_dir, "Model folder to read")->required();
  cmd->add_option("--out,-o", o->out_dir, "Model folder to write (the other files are copied)")->required();
  cmd->add_option("--weights", o->engine.weights, "bf16, q8 or q4")->check(CLI::IsMember({"bf16", "q8", "q4"}))->required();
  cmd->add_option("--q4-group", o->engine.q4_group, "Weights per Q4 scale and offset: 32 or 64")
      ->check(CLI::IsMember({32, 64}));
  cmd->add_flag("--force", o->force, "Replace the model in --out if there is one");
  cmd->add_flag("--json", o->json, "Print one JSON object");
  return [cmd, o]() -> int {
    if (!cmd->parsed()) return -1;
    install_interrupt_handler();
    nlohmann::json report;
    const Status status = run(*o, &report);
    if (!status.ok()) {
      if (status.error().code == ErrorCode::kCancelled) {
        std::fprintf(stderr, "quantize: cancelled (%s); %s\n", cancelling_signal_name(),
                     escape_untrusted(status.error().message).c_str());
        return cancelled_exit_code();
      }
      print_error("quantize", status.error());
      return 1;
    }
    if (o->json) {
      std::cout << json_line(report) << std::endl;
    } else {
      std::printf("wrote %s: %zu matrices as %s; GPT file %.1f MB -> %.1f MB, decode reads %.1f MB -> %.1f MB\n",
                  readable_untrusted(o->out_dir).c_str(), report["matrices_converted"].get<size_t>(), o->engine.weights.c_str(),
                  report["gpt_file_bytes"].get<double>() / 1e6, report["quantized_gpt_file_bytes"].get<double>() / 1e6,
                  report["decode_weight_bytes"].get<double>() / 1e6,
                  report["quantized_decode_weight_bytes"].get<double>() / 1e6);
    }
    return 0;
  };
}

}  // namespace cubeforge::cli
