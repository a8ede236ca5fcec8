// Times the CLIP text encoder at the size of openai/clip-vit-large-patch14's
// text tower (width 768, 12 layers, 12 heads, MLP 3072: 123 M parameters).
//
//   cubeforge-bench-text-encoder [--threads N]            random weights of the real shape
//   cubeforge-bench-text-encoder [--threads N] CLIP_DIR   a real Hugging Face CLIP folder
//
// Prints the median wall and CPU time of one prompt, and of the prompt
// together with "" (the conditional and unconditional rows the generator
// needs), and which OpenBLAS kernels ran.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <ctime>
#include <string>
#include <vector>

#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/ops.h"
#include "inference/model/random_weights.h"
#include "inference/tensor/safetensors.h"
#include "inference/text/clip_text_encoder.h"

namespace {

using namespace cubeforge;

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

double process_cpu_milliseconds() {
  timespec now{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &now);
  return double(now.tv_sec) * 1e3 + double(now.tv_nsec) * 1e-6;
}

struct Timing {
  double wall_ms;  // median
  double cpu_ms;   // median CPU time of all threads: stable on a busy machine
};

template <class F>
Timing median_time(int repeats, F&& run) {
  std::vector<double> walls, cpus;
  for (int r = 0; r < repeats; ++r) {
    const auto start = std::chrono::steady_clock::now();
    const double cpu_start = process_cpu_milliseconds();
    run();
    cpus.push_back(process_cpu_milliseconds() - cpu_start);
    walls.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(walls.begin(), walls.end());
  std::sort(cpus.begin(), cpus.end());
  return {walls[walls.size() / 2], cpus[cpus.size() / 2]};
}

}  // namespace

int main(int argc, char** argv) {
  std::string clip_dir;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      cpu::set_thread_count(std::atoi(argv[++i]));
    } else {
      clip_dir = argv[i];
    }
  }
  Result<ClipTextEncoder> encoder = make_error(ErrorCode::kInternal, "not loaded");
  if (!clip_dir.empty()) {
    encoder = ClipTextEncoder::load(clip_dir);
  } else {
    ClipTextConfig config;  // openai/clip-vit-large-patch14's text tower
    config.hidden_size = 768;
    config.intermediate_size = 3072;
    config.num_attention_heads = 12;
    config.num_hidden_layers = 12;
    auto file = random_weights_file(clip_text_tensors(config), 7, DType::kF32, "random CLIP-L text weights");
    if (!file.ok()) {
      std::fprintf(stderr, "%s\n", file.error().to_string().c_str());
      return 1;
    }
    encoder = ClipTextEncoder::from_safetensors(std::make_shared<const SafetensorsFile>(std::move(*file)), config);
  }
  if (!encoder.ok()) {
    std::fprintf(stderr, "%s\n", encoder.error().to_string().c_str());
    return 1;
  }
  const ClipTextConfig& config = encoder->config();
  std::printf("CLIP text encoder: width %d, %d layers, %d heads, MLP %d; %d CPU threads\n", config.hidden_size,
              config.num_hidden_layers, config.num_attention_heads, config.intermediate_size, cpu::thread_count());
  // OpenBLAS picks its kernels by CPU model when the library loads; on CPUs
  // newer than the library it may fall back to old SSE3 kernels ("Prescott"),
  // 3-5x slower. OPENBLAS_CORETYPE=SkylakeX (or Haswell) overrides it.
  std::printf("OpenBLAS kernels: %s (set OPENBLAS_CORETYPE to override)\n", cpu::blas_core_name());

  // A 10-token prompt and the empty prompt, as the tokenizer would give them.
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
  const TokenizedText both[] = {prompt, empty};

  // With a real folder, the tokenizer's load and per-prompt times too.
  if (!clip_dir.empty() && std::filesystem::exists(std::filesystem::path(clip_dir) / "vocab.json")) {
    const auto start = std::chrono::steady_clock::now();
    auto tokenizer = ClipTokenizer::load(clip_dir);
    const double load_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
    if (!tokenizer.ok()) {
      std::fprintf(stderr, "%s\n", tokenizer.error().to_string().c_str());
      return 1;
    }
    const std::string text = "Broad-winged flying red dragon, elongated, folded legs.";
    const Timing first = median_time(1, [&] { (void)tokenizer->encode(text); });
    const Timing cached = median_time(101, [&] { (void)tokenizer->encode(text); });
    std::printf("tokenizer: load %.1f ms; \"%s\": %.3f ms first, %.3f ms cached\n", load_ms, text.c_str(),
                first.wall_ms, cached.wall_ms);
  }

  (void)encoder->encode(prompt);  // warm-up: thread pools, page faults
  const Timing one = median_time(5, [&] { (void)encoder->encode(prompt); });
  const Timing pair = median_time(5, [&] { (void)encoder->encode_batch(both); });
  std::printf("encode 1 prompt  [77 tokens]: %.1f ms wall, %.1f ms CPU (medians of 5)\n", one.wall_ms, one.cpu_ms);
  std::printf("encode prompt + \"\" batched : %.1f ms wall, %.1f ms CPU (medians of 5)\n", pair.wall_ms,
              pair.cpu_ms);
  return 0;
}
