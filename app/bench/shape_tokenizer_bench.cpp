// Shape tokenizer throughput on the CPU at the real Cube 3D v0.5 sizes
// (width 768, 12 heads, 1024 latents, 128 frequencies, 16384 codes), with
// random weights of those shapes: occupancy points per second (the hot path of
// meshing), the time to decode 1024 tokens into latents, and the time to encode
// 8192 surface samples into tokens.
//
// usage: cubeforge-bench-shape-tokenizer [points=16384] [chunk=4096] [decoder_layers=24] [threads=0: all]
// Occupancy does not depend on the decoder depth; pass fewer decoder layers to
// shorten the run when only points/s matter.
#include <time.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/ops.h"
#include "inference/model/random_weights.h"
#include "inference/model/shape_tokenizer.h"

namespace {

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

// CPU seconds of every thread of the process: on a shared machine wall time
// also counts the time other processes held the cores.
double process_cpu_seconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace cubeforge;
  const long points = argc > 1 ? std::atol(argv[1]) : 16384;
  const long chunk = argc > 2 ? std::atol(argv[2]) : 4096;
  const int decoder_layers = argc > 3 ? std::atoi(argv[3]) : 24;
  const int threads = argc > 4 ? std::atoi(argv[4]) : 0;
  if (points <= 0 || chunk <= 0 || decoder_layers <= 0) {
    std::fprintf(stderr, "usage: %s [points>0] [chunk>0] [decoder_layers>0] [threads>=0]\n", argv[0]);
    return 2;
  }
  if (threads > 0) cpu::set_thread_count(threads);

  ShapeModelConfig config = preset_model_config("v05").value().shape;  // open_model_v0.5.yaml
  config.decoder_layers = decoder_layers;

  auto start = std::chrono::steady_clock::now();
  auto file = random_weights_file(expected_shape_tensors(config), 2024, DType::kF32, "random v0.5 shape tokenizer");
  if (!file.ok()) {
    std::fprintf(stderr, "%s\n", file.error().to_string().c_str());
    return 1;
  }
  auto tokenizer = ShapeTokenizer::from_file(std::move(file).value(), config);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.error().to_string().c_str());
    return 1;
  }
  std::printf("random v0.5-size model (%d decoder layers) built in %.2f s; %d threads, %s kernels, BLAS core %s\n",
              decoder_layers, seconds_since(start), cpu::thread_count(), cpu::kernel_isa(), cpu::blas_core_name());

  std::vector<int64_t> tokens(size_t(config.latents));
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t((i * 7919) % size_t(config.codes));
  start = std::chrono::steady_clock::now();
  double cpu_start = process_cpu_seconds();
  auto latents = tokenizer->decode_tokens(tokens);
  const double decode_s = seconds_since(start);
  const double decode_cpu_s = process_cpu_seconds() - cpu_start;
  if (!latents.ok()) {
    std::fprintf(stderr, "%s\n", latents.error().to_string().c_str());
    return 1;
  }
  std::printf("decode %d tokens through %d layers: %.3f s (%.3f s per layer; %.3f CPU s)\n", config.latents,
              decoder_layers, decode_s, decode_s / decoder_layers, decode_cpu_s);

  start = std::chrono::steady_clock::now();
  auto prepared = tokenizer->prepare_latents(*latents);
  const double prepare_s = seconds_since(start);
  if (!prepared.ok()) return 1;

  std::vector<float> query(size_t(points) * 3);
  uint64_t state = 1;
  for (auto& v : query) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    v = float(double(state >> 40) / double(1ull << 24) * 2.1 - 1.05);
  }
  std::vector<float> logits(static_cast<size_t>(points));
  // One warm-up chunk, then the timed run.
  if (!tokenizer->occupancy(*prepared, std::span<const float>(query).first(size_t(std::min(points, chunk)) * 3),
                            std::span<float>(logits).first(size_t(std::min(points, chunk))), size_t(chunk))
           .ok())
    return 1;
  start = std::chrono::steady_clock::now();
  cpu_start = process_cpu_seconds();
  auto status = tokenizer->occupancy(*prepared, query, logits, size_t(chunk));
  const double occupancy_s = seconds_since(start);
  const double occupancy_cpu_s = process_cpu_seconds() - cpu_start;
  if (!status.ok()) {
    std::fprintf(stderr, "%s\n", status.error().to_string().c_str());
    return 1;
  }
  double checksum = 0.0;
  for (float v : logits) checksum += v;
  std::printf("prepare latents (LN, c_k, c_v over %d latents): %.4f s\n", config.latents, prepare_s);
  // 8.36 M multiply-adds per point at width 768 with 1024 latents (MLP 4.72 M,
  // attention 1.57 M, query embedding 0.89 M, c_q and c_proj 1.18 M).
  const double flops = 2.0 * 8.36e6 * double(points);
  std::printf("occupancy: %ld points in chunks of %ld: %.3f s = %.0f points/s (%.1f GFLOP/s); %.3f CPU s = %.0f points per CPU s\n",
              points, chunk, occupancy_s, double(points) / occupancy_s, flops / occupancy_s * 1e-9, occupancy_cpu_s,
              double(points) / occupancy_cpu_s);
  std::printf("logit mean %.4f\n", checksum / double(points));

  // Encoder: 8192 samples on a unit sphere with their normals, as the reference samples a mesh.
  const int64_t samples = 8192;
  std::vector<float> surface(size_t(samples) * 6);
  for (int64_t i = 0; i < samples; ++i) {
    const double z = 1.0 - 2.0 * (double(i) + 0.5) / double(samples);
    const double radius = std::sqrt(1.0 - z * z), angle = 2.39996322972865332 * double(i);
    const float p[3] = {float(radius * std::cos(angle)), float(radius * std::sin(angle)), float(z)};
    for (int k = 0; k < 3; ++k) surface[size_t(i * 6 + k)] = 0.96f * p[k];
    for (int k = 0; k < 3; ++k) surface[size_t(i * 6 + 3 + k)] = p[k];
  }
  start = std::chrono::steady_clock::now();
  cpu_start = process_cpu_seconds();
  auto encoded = tokenizer->encode(surface);
  if (!encoded.ok()) {
    std::fprintf(stderr, "%s\n", encoded.error().to_string().c_str());
    return 1;
  }
  std::printf("encode %ld surface samples into %zu tokens: %.3f s (%.3f CPU s)\n", long(samples), encoded->size(),
              seconds_since(start), process_cpu_seconds() - cpu_start);
  return 0;
}
