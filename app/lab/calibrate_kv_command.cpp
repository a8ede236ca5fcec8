// `cubeforge-lab calibrate-kv`: the low-rank key and value bases that
// `--kv-rank` reads, from the SVD of the keys and values the model caches
// while generating calibration captions (inference/model/kv_calibration.h).
// Each caption is generated greedily with guidance and the exact cache; the
// whole sequence is then run once more as one prefill, whose cache (both
// guidance rows, every layer) joins the calibration. The bases are written
// beside the model as kv_bases.safetensors unless --out says otherwise.
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <iostream>

#include "app/lab/commands.h"
#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/cli/prompt_list.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/backend/generate.h"
#include "inference/model/kv_calibration.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

struct CalibrateOptions {
  std::string model_dir, out;
  bool model_given = false;
  bool force = false;
  std::vector<std::string> prompts;
  std::string prompts_file;
  int rank = 0;  // 0: the model's width
  float guidance = 3.0f;
  int threads = 0;
  bool json = false;
};

// Generates `prompt` and adds the cache of the whole sequence.
Status calibrate_on(const CubeModel& model, const std::string& prompt, float guidance, KvCalibration& calibration) {
  const DualStreamGpt& gpt = model.gpt();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> cond, encode_prompt(model, prompt, std::nullopt));
  std::vector<float> uncond;
  if (guidance > 0.f) {
    CUBEFORGE_ASSIGN_OR_RETURN(uncond, encode_prompt(model, "", std::nullopt));
  }
  TokenGenerationOptions options;
  options.guidance_scale = guidance;
  const int count = model.shape_tokens();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<int> tokens, generate_tokens(gpt, cond, uncond, count, options));
  // BOS and every token but the last: the positions a generation caches.
  const int batch = guidance > 0.f ? 2 : 1;
  const size_t d = size_t(gpt.config().width);
  std::vector<float> rows = cond;
  rows.insert(rows.end(), uncond.begin(), uncond.end());
  std::vector<float> shape(size_t(batch) * size_t(count) * d);
  for (int b = 0; b < batch; ++b)
    for (int p = 0; p < count; ++p) {
      auto e = gpt.token_embedding(p == 0 ? gpt.config().bos_id() : tokens[size_t(p - 1)]);
      std::copy(e.begin(), e.end(), shape.begin() + ptrdiff_t((size_t(b) * size_t(count) + size_t(p)) * d));
    }
  const int cond_length = int(cond.size() / d);
  GptSession session(gpt, batch, cond_length, count, AttentionMode::kCausal);
  std::vector<float> logits(size_t(batch) * size_t(gpt.config().vocab_size()));
  CUBEFORGE_TRY(session.prefill(rows, shape, count, logits));
  return calibration.add(session);
}

int run_calibrate(const CalibrateOptions& o) {
  cpu::set_thread_count(o.threads);
  auto prompts = prompt_list(o.prompts, o.prompts_file);
  if (!prompts.ok()) {
    print_error("calibrate-kv", prompts.error());
    return 2;
  }
  const auto folder = model_folder_or_report(o.model_dir, o.model_given, "calibrate-kv");
  if (!folder) return 2;
  const std::filesystem::path out = o.out.empty() ? *folder / kKvBasesFile : std::filesystem::path(o.out);
  if (!output_writable(out.string(), o.force, "calibrate-kv")) return 1;
  install_interrupt_handler();
  auto model = load_model_or_report(*folder, "calibrate-kv");
  if (!model) return 1;
  // Checked again now that the model's files are known inputs.
  if (!output_writable(out.string(), o.force, "calibrate-kv")) return 1;
  const std::string out_shown = readable_untrusted(out.string());
  auto report_cancel = [&] {
    auto kind = file_kind(out);
    std::fprintf(stderr, "calibrate-kv: cancelled (%s); '%s' %s\n", cancelling_signal_name(), out_shown.c_str(),
                 kind.ok() && *kind == FileKind::kRegular ? "was left as it was" : "was not written");
    return cancelled_exit_code();
  };
  const GptConfig& config = model->config().gpt;
  const int rank = o.rank > 0 ? o.rank : config.width;
  if (rank > config.width) {
    std::fprintf(stderr, "calibrate-kv: --rank %d is more than the model's width %d\n", rank, config.width);
    return 2;
  }

  KvCalibration calibration(config);
  for (const std::string& prompt : *prompts) {
    pause_if_testing("calibration");
    if (interrupted().load()) return report_cancel();
    const Status status = calibrate_on(*model, prompt, o.guidance, calibration);
    if (!status.ok()) {
      std::fprintf(stderr, "calibrate-kv: '%s': %s\n", readable_untrusted(prompt).c_str(),
                   status.error().to_string().c_str());
      return 1;
    }
  }
  auto bases = calibration.bases(rank);
  if (!bases.ok()) {
    print_error("calibrate-kv", bases.error());
    return 1;
  }
  if (interrupted().load()) return report_cancel();
  WriteOptions write = output_write_options(o.force);
  write.cancel = &interrupted();
  write.before_rename = [] { pause_if_testing("rename"); };
  const Status written = write_kv_bases(out, *bases, config.width, write);
  if (!written.ok()) {
    if (written.error().code == ErrorCode::kCancelled) return report_cancel();
    print_error("calibrate-kv", written.error());
    return 1;
  }
  // What a smaller rank keeps: per rank, the mean over layers of the
  // fraction of the rows' squared norm (keys and values).
  nlohmann::json kept = nlohmann::json::array();
  for (int r = 1;; r = std::min(2 * r, rank)) {
    double keys = 0, values = 0;
    for (const KvLayerBasis& layer : *bases) {
      keys += energy_kept(layer.key_spectrum, r);
      values += energy_kept(layer.value_spectrum, r);
    }
    kept.push_back({{"rank", r}, {"keys", keys / double(bases->size())}, {"values", values / double(bases->size())}});
    if (r == rank) break;
  }
  nlohmann::json report = {{"model", escape_untrusted(model->folder().string())}, {"out", escape_untrusted(out.string())},
                           {"captions", prompts->size()},       {"rows_per_layer", calibration.rows()},
                           {"rank", rank},                      {"energy_kept", kept}};
  if (o.json) {
    std::cout << json_line(report) << std::endl;
    return 0;
  }
  std::printf("wrote %s: %d-vector key and value bases for %zu layers from %zu captions (%lld cached rows per layer)\n",
              out_shown.c_str(), rank, bases->size(), prompts->size(), static_cast<long long>(calibration.rows()));
  for (const auto& k : kept)
    std::printf("  rank %4d keeps %.4f of the keys' and %.4f of the values' squared norm\n", k["rank"].get<int>(),
                k["keys"].get<double>(), k["values"].get<double>());
  return 0;
}

}  // namespace

Action add_calibrate_kv_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand("calibrate-kv", "Write low-rank key and value bases (for --kv-rank) from calibration captions");
  CLI::Option* model = cmd->add_option("--model", o->model_dir, "Model folder (default: the built-in model)");
  cmd->add_option("--prompt,-p", o->prompts, "A calibration caption (repeatable)");
  cmd->add_option("--prompts", o->prompts_file, "A file of calibration captions, one per line");
  cmd->add_option("--rank", o->rank, "Vectors per layer to write (0: the model's width, so any --kv-rank can use it)")
      ->check(whole_number_in(0, 1 << 20, "0 writes as many as the model's width"));
  cmd->add_option("--out,-o", o->out, "Where to write the bases (default: MODEL/kv_bases.safetensors)");
  cmd->add_flag("--force", o->force, "Replace the output file even if it is read-only");
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale of the calibration generations")
      ->check(number_in(0.0, 100.0, false, "0 turns guidance off"));
  cmd->add_option("--threads", o->threads, "CPU threads (0: all cores)")
      ->check(whole_number_in(0, 1024, "0 uses every core"));
  cmd->add_flag("--json", o->json, "Print one JSON object");
  return [cmd, o, model]() -> int {
    if (!cmd->parsed()) return -1;
    o->model_given = model->count() > 0;
    return run_calibrate(*o);
  };
}

}  // namespace cubeforge::cli
