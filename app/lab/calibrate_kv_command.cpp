// `cubeforge-lab calibrate-kv`: the low-rank key and value bases that
// `--kv-rank` reads, from the SVD of the keys and values the model caches
// while generating calibration captions (inference/cpu_backend/kv_calibration.h).
// Each caption is generated greedily with guidance and the exact cache; the
// whole sequence is then run once more as one prefill, whose cache (both
// guidance rows, every layer) joins the calibration. The bases are written
// beside the model as kv_bases.safetensors unless --out says otherwise.
#include <algorithm>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/cli/interrupt.h"
#include "app/cli/model_option.h"
#include "app/cli/option_checks.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/backend/generate.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/cpu_backend/gpt_session.h"
#include "inference/cpu_backend/kv_calibration.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kCalibrateCommand = "calibrate-kv";

struct CalibrateOptions {
  LabOptions lab;
  std::string out;
  bool force = false;
  int rank = 0;  // 0: the model's width
  float guidance = 3.0f;
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

// What a smaller rank keeps: per rank (1, 2, 4, … and `rank`), the mean over
// layers of the fraction of the rows' squared norm (keys and values).
nlohmann::json energy_kept_by_rank(const std::vector<KvLayerBasis>& bases, int rank) {
  nlohmann::json kept = nlohmann::json::array();
  for (int r = 1;; r = std::min(2 * r, rank)) {
    double keys = 0, values = 0;
    for (const KvLayerBasis& layer : bases) {
      keys += energy_kept(layer.key_spectrum, r);
      values += energy_kept(layer.value_spectrum, r);
    }
    kept.push_back({{"rank", r}, {"keys", keys / double(bases.size())}, {"values", values / double(bases.size())}});
    if (r == rank) break;
  }
  return kept;
}

void report_calibration(const CalibrateOptions& o, const CubeModel& model, const std::filesystem::path& out,
                        size_t captions, const KvCalibration& calibration, const std::vector<KvLayerBasis>& bases,
                        int rank) {
  const nlohmann::json kept = energy_kept_by_rank(bases, rank);
  if (o.lab.json) {
    print_lab_report(kCalibrateCommand, {{"model", escape_untrusted(model.folder().string())},
                                         {"out", escape_untrusted(out.string())},
                                         {"captions", captions},
                                         {"rows_per_layer", calibration.rows()},
                                         {"rank", rank},
                                         {"energy_kept", kept}});
    return;
  }
  std::printf("wrote %s: %d-vector key and value bases for %zu layers from %zu captions (%lld cached rows per layer)\n",
              readable_untrusted(out.string()).c_str(), rank, bases.size(), captions,
              static_cast<long long>(calibration.rows()));
  for (const auto& k : kept)
    std::printf("  rank %4d keeps %.4f of the keys' and %.4f of the values' squared norm\n", k["rank"].get<int>(),
                k["keys"].get<double>(), k["values"].get<double>());
}

int run_calibrate(const CalibrateOptions& o) {
  apply_lab_threads(o.lab);
  auto prompts = lab_prompts(o.lab);
  if (!prompts.ok()) {
    print_error(kCalibrateCommand, prompts.error());
    return 2;
  }
  const auto folder = lab_model_folder(o.lab, kCalibrateCommand);
  if (!folder) return 2;
  const std::filesystem::path out = o.out.empty() ? *folder / kKvBasesFile : std::filesystem::path(o.out);
  if (!output_writable(out.string(), o.force, kCalibrateCommand)) return 1;
  install_interrupt_handler();
  auto model = load_model_or_report(*folder, kCalibrateCommand);
  if (!model) return 1;
  // Checked again now that the model's files are known inputs.
  if (!output_writable(out.string(), o.force, kCalibrateCommand)) return 1;
  auto report_cancel = [&] {
    auto kind = file_kind(out);
    std::fprintf(stderr, "%s: cancelled (%s); '%s' %s\n", kCalibrateCommand, cancelling_signal_name(),
                 readable_untrusted(out.string()).c_str(),
                 kind.ok() && *kind == FileKind::kRegular ? "was left as it was" : "was not written");
    return cancelled_exit_code();
  };
  const GptConfig& config = model->config().gpt;
  const int rank = o.rank > 0 ? o.rank : config.width;
  if (rank > config.width) {
    std::fprintf(stderr, "%s: --rank %d is more than the model's width %d\n", kCalibrateCommand, rank, config.width);
    return 2;
  }

  KvCalibration calibration(config);
  for (const std::string& prompt : *prompts) {
    pause_if_testing("calibration");
    if (interrupted().load()) return report_cancel();
    const Status status = calibrate_on(*model, prompt, o.guidance, calibration);
    if (!status.ok()) {
      std::fprintf(stderr, "%s: '%s': %s\n", kCalibrateCommand, readable_untrusted(prompt).c_str(),
                   status.error().to_string().c_str());
      return 1;
    }
  }
  auto bases = calibration.bases(rank);
  if (!bases.ok()) {
    print_error(kCalibrateCommand, bases.error());
    return 1;
  }
  if (interrupted().load()) return report_cancel();
  WriteOptions write = output_write_options(o.force);
  write.cancel = &interrupted();
  write.before_rename = [] { pause_if_testing("rename"); };
  const Status written = write_kv_bases(out, *bases, config.width, write);
  if (!written.ok()) {
    if (written.error().code == ErrorCode::kCancelled) return report_cancel();
    print_error(kCalibrateCommand, written.error());
    return 1;
  }
  report_calibration(o, *model, out, prompts->size(), calibration, *bases, rank);
  return 0;
}

}  // namespace

Action add_calibrate_kv_command(CLI::App& app) {
  auto o = std::make_shared<CalibrateOptions>();
  CLI::App* cmd = app.add_subcommand(kCalibrateCommand,
                                     "Write low-rank key and value bases (for --kv-rank) from calibration captions");
  add_lab_options(cmd, o->lab, kAllLabOptions);
  cmd->add_option("--rank", o->rank, "Vectors per layer to write (0: the model's width, so any --kv-rank can use it)")
      ->check(whole_number_in(0, 1 << 20, "0 writes as many as the model's width"));
  cmd->add_option("--out,-o", o->out, "Where to write the bases (default: MODEL/kv_bases.safetensors)");
  cmd->add_flag("--force", o->force, "Replace the output file even if it is read-only");
  cmd->add_option("--guidance", o->guidance, "Classifier-free guidance scale of the calibration generations")
      ->check(number_in(0.0, 100.0, false, "0 turns guidance off"));
  return [cmd, o]() -> int { return cmd->parsed() ? run_calibrate(*o) : -1; };
}

}  // namespace cubeforge::cli
