// `cubeforge-cli quantize`: a model folder whose decode matrices are stored
// as bf16, Q8 or Q4 (inference/model/weight_formats.h), so that a large
// checkpoint is read at its quantised size every time it loads. The other
// files of the folder are copied alongside (copies, not links: a change to
// the new folder must never reach the model it came from); the written GPT
// is then loaded back and checked like any model file.
#include <nlohmann/json.hpp>

#include <cstdio>
#include <iostream>

#include "app/cli/commands.h"
#include "app/cli/engine_options.h"
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

// A file, or a folder with everything in it.
Status copy_into(const std::filesystem::path& from, const std::filesystem::path& to) {
  std::error_code ec;
  if (std::filesystem::is_directory(from)) {
    std::filesystem::create_directories(to, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot create '" + to.string() + "': " + ec.message());
    for (const auto& entry : std::filesystem::directory_iterator(from))
      CUBEFORGE_TRY(copy_into(entry.path(), to / entry.path().filename()));
    return ok_status();
  }
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot copy '" + from.string() + "' to '" + to.string() + "': " + ec.message());
  return ok_status();
}

Status run(const QuantizeOptions& o, nlohmann::json* report) {
  const std::filesystem::path in = o.model_dir, out = o.out_dir;
  std::error_code ec;
  if (std::filesystem::exists(out) && std::filesystem::equivalent(in, out, ec))
    return make_error(ErrorCode::kInvalidArgument, "--out must be a new folder, not the model's own");
  if (std::filesystem::exists(out / "shape_gpt.safetensors") && !o.force)
    return make_error(ErrorCode::kInvalidArgument, "'" + out.string() +
                                                       "' already holds a model; pass --force to replace it, or "
                                                       "choose another folder");
  CUBEFORGE_ASSIGN_OR_RETURN(WeightOptions weights, weight_options(o.engine.weights, o.engine.q4_group));
  if (weights.format == WeightFormat::kStored)
    return make_error(ErrorCode::kInvalidArgument, "--weights stored would write the model as it is; choose bf16, q8 or q4");
  const auto gpt_path = in / "shape_gpt.safetensors";
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile source, SafetensorsFile::open(gpt_path));
  GptConfig config;
  if (std::filesystem::exists(in / "config.yaml")) {
    CUBEFORGE_ASSIGN_OR_RETURN(ModelConfig yaml, parse_model_config_yaml(in / "config.yaml"));
    config = yaml.gpt;
  } else {
    CUBEFORGE_ASSIGN_OR_RETURN(config, infer_gpt_config(source));
  }
  CUBEFORGE_TRY(check_gpt_config(config, source, "the model configuration"));
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile converted,
                             convert_matrices(source, DualStreamGpt::decode_matrix_names(config), weights));
  std::filesystem::create_directories(out, ec);
  if (ec) return make_error(ErrorCode::kIo, "cannot create '" + out.string() + "': " + ec.message());
  const auto out_gpt = out / "shape_gpt.safetensors";
  const std::map<std::string, std::string> metadata = {{"cubeforge.weights", o.engine.weights},
                                                       {"cubeforge.q4_group", std::to_string(weights.q4_group)}};
  CUBEFORGE_TRY(write_safetensors(out_gpt, tensors_with_conversions(source, converted), metadata));
  for (const auto& entry : std::filesystem::directory_iterator(in)) {
    if (entry.path().filename() == "shape_gpt.safetensors") continue;
    CUBEFORGE_TRY(copy_into(entry.path(), out / entry.path().filename()));
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
             {"gpt_file_bytes", std::filesystem::file_size(gpt_path)},
             {"quantized_gpt_file_bytes", std::filesystem::file_size(out_gpt)},
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
    nlohmann::json report;
    const Status status = run(*o, &report);
    if (!status.ok()) {
      print_error("quantize", status.error());
      return 1;
    }
    if (o->json) {
      std::cout << json_line(report) << std::endl;
    } else {
      std::printf("wrote %s: %zu matrices as %s; GPT file %.1f MB -> %.1f MB, decode reads %.1f MB -> %.1f MB\n",
                  escape_untrusted(o->out_dir).c_str(), report["matrices_converted"].get<size_t>(), o->engine.weights.c_str(),
                  report["gpt_file_bytes"].get<double>() / 1e6, report["quantized_gpt_file_bytes"].get<double>() / 1e6,
                  report["decode_weight_bytes"].get<double>() / 1e6,
                  report["quantized_decode_weight_bytes"].get<double>() / 1e6);
    }
    return 0;
  };
}

}  // namespace cubeforge::cli
