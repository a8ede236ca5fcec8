// `cubeforge-lab bench-text-encoder`: the CLIP text encoder's time for one
// prompt, and for the prompt together with "" (the conditional and
// unconditional rows generation needs), as medians of wall and CPU time, and
// which OpenBLAS kernels ran. On a model folder's clip/ (the built-in model's
// by default), with the tokenizer's load and per-prompt times; or, with
// --shape v01|v05, on random weights of the text tower those models use
// (openai/clip-vit-large-patch14's: width 768, 12 layers, 12 heads, MLP 3072,
// 123 M parameters).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "app/lab/bench_statistics.h"
#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/core/untrusted_text.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/model/random_weights.h"
#include "inference/tensor/safetensors.h"
#include "inference/text/clip_text_encoder.h"
#include "inference/text/clip_tokenizer.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kTextEncoderCommand = "bench-text-encoder";

struct TextEncoderBenchOptions {
  LabOptions lab;
  std::string shape;  // random CLIP-L weights instead of a model folder
  int repeats = 5;
};

// The tensors of `config`'s text tower.
std::vector<ExpectedTensor> clip_text_tensors(const ClipTextConfig& config) {
  const int64_t c = config.hidden_size, i = config.intermediate_size;
  std::vector<ExpectedTensor> tensors = {
      {"text_model.embeddings.token_embedding.weight", {config.vocab_size, c}},
      {"text_model.embeddings.position_embedding.weight", {config.max_position_embeddings, c}},
      {"text_model.final_layer_norm.weight", {c}},
      {"text_model.final_layer_norm.bias", {c}},
  };
  for (int l = 0; l < config.num_hidden_layers; ++l) {
    const std::string p = "text_model.encoder.layers." + std::to_string(l) + ".";
    for (const char* norm : {"layer_norm1", "layer_norm2"}) {
      tensors.push_back({p + norm + ".weight", {c}});
      tensors.push_back({p + norm + ".bias", {c}});
    }
    for (const char* projection : {"q_proj", "k_proj", "v_proj", "out_proj"}) {
      tensors.push_back({p + "self_attn." + projection + ".weight", {c, c}});
      tensors.push_back({p + "self_attn." + projection + ".bias", {c}});
    }
    tensors.push_back({p + "mlp.fc1.weight", {i, c}});
    tensors.push_back({p + "mlp.fc1.bias", {i}});
    tensors.push_back({p + "mlp.fc2.weight", {c, i}});
    tensors.push_back({p + "mlp.fc2.bias", {c}});
  }
  return tensors;
}

struct Timing {
  double wall_ms = 0;  // median
  double cpu_ms = 0;   // median CPU time of all threads: stable on a busy machine
};

template <class F>
Timing median_timing(int repeats, F&& run) {
  std::vector<double> walls, cpus;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_ms();
    run();
    cpus.push_back(process_cpu_ms() - cpu_start);
    walls.push_back(ms_since(start));
  }
  return {median(walls), median(cpus)};
}

// What the run measures: the encoder, its name, and the tokenizer of a real folder.
struct TextEncoderUnderTest {
  std::optional<ClipTextEncoder> encoder;
  std::optional<ClipTokenizer> tokenizer;
  double tokenizer_load_ms = 0;
  std::string name;
};

Result<TextEncoderUnderTest> load_text_encoder(const TextEncoderBenchOptions& o, const std::filesystem::path& folder) {
  TextEncoderUnderTest loaded;
  if (!o.shape.empty()) {
    ClipTextConfig config;  // openai/clip-vit-large-patch14's text tower, which v0.1 and v0.5 use
    config.hidden_size = 768;
    config.intermediate_size = 3072;
    config.num_attention_heads = 12;
    config.num_hidden_layers = 12;
    CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsFile file, random_weights_file(clip_text_tensors(config), 7, DType::kF32,
                                                                         "random CLIP-L text weights"));
    CUBEFORGE_ASSIGN_OR_RETURN(loaded.encoder, ClipTextEncoder::from_safetensors(
                                                   std::make_shared<const SafetensorsFile>(std::move(file)), config));
    loaded.name = "random CLIP-L text tower (" + o.shape + ")";
    return loaded;
  }
  const std::filesystem::path clip = folder / "clip";
  CUBEFORGE_ASSIGN_OR_RETURN(loaded.encoder, ClipTextEncoder::load(clip));
  const auto start = std::chrono::steady_clock::now();
  CUBEFORGE_ASSIGN_OR_RETURN(loaded.tokenizer, ClipTokenizer::load(clip));
  loaded.tokenizer_load_ms = ms_since(start);
  loaded.name = readable_untrusted(clip.string());
  return loaded;
}

// A 10-token prompt and the empty prompt: the tokenizer's, or made up for
// random weights (CLIP-L's start and end tokens around ten words).
std::vector<TokenizedText> prompt_and_empty(const TextEncoderUnderTest& loaded, const std::string& text) {
  if (loaded.tokenizer) return {loaded.tokenizer->encode(text), loaded.tokenizer->encode("")};
  TokenizedText prompt, empty;
  prompt.input_ids.assign(kClipContextLength, 49407);
  prompt.attention_mask.assign(kClipContextLength, 0);
  empty = prompt;
  for (int t = 0; t < 12; ++t) {
    prompt.input_ids[size_t(t)] = t == 0 ? 49406 : t == 11 ? 49407 : 320 + t;
    prompt.attention_mask[size_t(t)] = 1;
  }
  empty.input_ids[0] = 49406;
  empty.attention_mask[0] = empty.attention_mask[1] = 1;
  return {prompt, empty};
}

struct TextEncoderFigures {
  Timing tokenize_first, tokenize_cached;  // with a tokenizer only
  Timing one, pair;
};

Result<TextEncoderFigures> measure_text_encoder(const TextEncoderUnderTest& loaded, int repeats,
                                                const std::string& text) {
  TextEncoderFigures figures;
  if (loaded.tokenizer) {
    figures.tokenize_first = median_timing(1, [&] { (void)loaded.tokenizer->encode(text); });
    figures.tokenize_cached = median_timing(101, [&] { (void)loaded.tokenizer->encode(text); });
  }
  const std::vector<TokenizedText> both = prompt_and_empty(loaded, text);
  CUBEFORGE_TRY(loaded.encoder->encode(both[0]));  // warm-up: thread pools, page faults
  figures.one = median_timing(repeats, [&] { (void)loaded.encoder->encode(both[0]); });
  figures.pair = median_timing(repeats, [&] { (void)loaded.encoder->encode_batch(both); });
  return figures;
}

nlohmann::json timing_json(const Timing& t) { return {{"wall_ms", t.wall_ms}, {"cpu_ms", t.cpu_ms}}; }

void report_text_encoder(const TextEncoderBenchOptions& o, const TextEncoderUnderTest& loaded,
                         const TextEncoderFigures& f, const std::string& text) {
  const ClipTextConfig& config = loaded.encoder->config();
  if (o.lab.json) {
    nlohmann::json results = {{"model", loaded.name},
                              {"width", config.hidden_size},
                              {"layers", config.num_hidden_layers},
                              {"heads", config.num_attention_heads},
                              {"mlp", config.intermediate_size},
                              {"repeats", o.repeats},
                              {"encode_one", timing_json(f.one)},
                              {"encode_with_empty", timing_json(f.pair)}};
    if (loaded.tokenizer)
      results["tokenizer"] = {{"load_ms", loaded.tokenizer_load_ms},
                              {"first_ms", f.tokenize_first.wall_ms},
                              {"cached_ms", f.tokenize_cached.wall_ms}};
    print_lab_report(kTextEncoderCommand, results);
    return;
  }
  std::printf("CLIP text encoder %s: width %d, %d layers, %d heads, MLP %d; %d CPU threads\n", loaded.name.c_str(),
              config.hidden_size, config.num_hidden_layers, config.num_attention_heads, config.intermediate_size,
              cpu::thread_count());
  // OpenBLAS picks its kernels by CPU model when the library loads; on CPUs
  // newer than the library it may fall back to old SSE3 kernels ("Prescott"),
  // 3-5x slower. OPENBLAS_CORETYPE=SkylakeX (or Haswell) overrides it.
  std::printf("OpenBLAS kernels: %s (set OPENBLAS_CORETYPE to override)\n", cpu::blas_core_name());
  if (loaded.tokenizer)
    std::printf("tokenizer: load %.1f ms; \"%s\": %.3f ms first, %.3f ms cached\n", loaded.tokenizer_load_ms,
                text.c_str(), f.tokenize_first.wall_ms, f.tokenize_cached.wall_ms);
  std::printf("encode 1 prompt  [77 tokens]: %.1f ms wall, %.1f ms CPU (medians of %d)\n", f.one.wall_ms, f.one.cpu_ms,
              o.repeats);
  std::printf("encode prompt + \"\" batched : %.1f ms wall, %.1f ms CPU (medians of %d)\n", f.pair.wall_ms,
              f.pair.cpu_ms, o.repeats);
}

int run_text_encoder_bench(const TextEncoderBenchOptions& o) {
  apply_lab_threads(o.lab);
  std::filesystem::path folder;
  if (o.shape.empty()) {
    const auto resolved = lab_model_folder(o.lab, kTextEncoderCommand);
    if (!resolved) return 2;
    folder = *resolved;
  }
  auto loaded = load_text_encoder(o, folder);
  if (!loaded.ok()) {
    print_error(kTextEncoderCommand, loaded.error());
    return 1;
  }
  const std::string text = "Broad-winged flying red dragon, elongated, folded legs.";
  auto figures = measure_text_encoder(*loaded, o.repeats, text);
  if (!figures.ok()) {
    print_error(kTextEncoderCommand, figures.error());
    return 1;
  }
  report_text_encoder(o, *loaded, *figures, text);
  return 0;
}

}  // namespace

Action add_text_encoder_bench_command(CLI::App& app) {
  auto o = std::make_shared<TextEncoderBenchOptions>();
  CLI::App* cmd = app.add_subcommand(kTextEncoderCommand, "Measure the CLIP text encoder's time per prompt");
  CLI::Option* model = add_lab_options(cmd, o->lab, kModelOption | kThreadsOption | kJsonOption);
  cmd->add_option("--shape", o->shape, "Random weights of the CLIP-L text tower v01 and v05 use instead: v01 or v05")
      ->check(CLI::IsMember({"v01", "v05"}))
      ->excludes(model);
  cmd->add_option("--repeats", o->repeats, "Timed encodings of each kind (the median is reported)")
      ->check(whole_number_in(1, 1000, "the median of this many"));
  return [cmd, o]() -> int { return cmd->parsed() ? run_text_encoder_bench(*o) : -1; };
}

}  // namespace cubeforge::cli
