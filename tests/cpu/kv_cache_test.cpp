// KV cache formats: FP8 E4M3 against its definition, each stored form's
// per-value error, and attention over every format and instruction set
// against double precision over the same stored values and against the f32
// cache within the bound the stored values' errors imply.
//
// The bound: if every score moves by at most Δ, every softmax weight moves
// by a factor within e^{±2Δ}, so an output channel moves by at most
// (e^{2Δ} − 1)·max_j |v_j| from the keys plus max_j |δv_j| from the values.
// Δ for a query head is scale · Σ_d |q_d|·max_j |δk_jd|, with δ the measured
// error of each stored value.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inference/cpu/kernels.h"
#include "inference/cpu/kv_cache.h"
#include "inference/tensor/dtype.h"

namespace cubeforge {
namespace {


TEST(KvCache, Fp8E4M3CodesRoundTripAndRoundToNearest) {
  std::vector<float> values;  // every finite non-negative code's value, in code order
  for (int code = 0; code < 0x7F; ++code) {
    const float v = cpu::fp8_e4m3_to_f32(uint8_t(code));
    ASSERT_TRUE(std::isfinite(v));
    EXPECT_EQ(cpu::fp8_e4m3_from_f32(v), code) << v;
    EXPECT_EQ(cpu::fp8_e4m3_from_f32(-v), code | 0x80) << v;
    if (code) {
      EXPECT_GT(v, values.back());
    }
    values.push_back(v);
  }
  EXPECT_EQ(values.back(), 448.f);
  EXPECT_EQ(values[1], std::ldexp(1.f, -9));
  EXPECT_TRUE(std::isnan(cpu::fp8_e4m3_to_f32(0x7F)));
  // Nearest code by brute force, ties to the even code.
  std::mt19937 gen(1);
  std::uniform_real_distribution<float> u(0.f, 1.f);
  for (int i = 0; i < 20000; ++i) {
    const float x = std::ldexp(u(gen), int(i % 20) - 11) * 1.5f;
    size_t best = 0;
    for (size_t c = 1; c < values.size(); ++c) {
      const float d = std::fabs(values[c] - x), e = std::fabs(values[best] - x);
      if (d < e || (d == e && c % 2 == 0)) best = c;
    }
    ASSERT_EQ(cpu::fp8_e4m3_from_f32(x), best) << x;
  }
  // Midpoints round to the even code.
  for (size_t c = 0; c + 1 < values.size(); ++c) {
    const float mid = (values[c] + values[c + 1]) / 2;
    EXPECT_EQ(cpu::fp8_e4m3_from_f32(mid), c % 2 == 0 ? c : c + 1) << mid;
  }
  EXPECT_EQ(cpu::fp8_e4m3_from_f32(1e6f), 0x7E);
  EXPECT_EQ(cpu::fp8_e4m3_from_f32(-460.f), 0xFE);
}

std::vector<float> random_rows(int64_t rows, int64_t width, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> n(0.f, 1.f);
  std::vector<float> v(size_t(rows * width));
  for (auto& x : v) x = n(gen);
  // An outlier channel, as attention keys have, and a quiet slot.
  for (int64_t r = 0; r < rows; ++r) v[size_t(r * width + 3)] *= 8.f;
  if (rows > 5)
    for (int64_t c = 0; c < width; ++c) v[size_t(5 * width + c)] *= 1e-3f;
  return v;
}

TEST(KvCache, StoredValuesWithinEachFormatsError) {
  const int64_t slots = 70, heads = 3, D = 32, W = heads * D;
  const auto keys = random_rows(slots, W, 2), values = random_rows(slots, W, 3);
  for (KvFormat format : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8}) {
    cpu::KvStore store(format, slots, heads, D);
    for (int64_t j = 0; j < slots; ++j) cpu::kv_store(store, j, keys.data() + j * W, values.data() + j * W);
    if (format == KvFormat::kInt8) {
      EXPECT_EQ(store.quantized_slots, 64);
    }
    std::vector<float> k(static_cast<size_t>(W)), v(static_cast<size_t>(W));
    for (int64_t j = 0; j < slots; ++j) {
      cpu::kv_load(store, j, k.data(), v.data());
      for (int64_t c = 0; c < W; ++c) {
        const float key = keys[size_t(j * W + c)], value = values[size_t(j * W + c)];
        float key_bound = 0, value_bound = 0;
        auto head_max = [&](const std::vector<float>& rows) {
          float m = 0;
          for (int64_t d = 0; d < D; ++d) m = std::max(m, std::fabs(rows[size_t(j * W + c / D * D + d)]));
          return m;
        };
        switch (format) {
          case KvFormat::kF32: break;
          case KvFormat::kBF16:  // half a bfloat16 step
            key_bound = std::fabs(key) * 0x1p-8f;
            value_bound = std::fabs(value) * 0x1p-8f;
            break;
          case KvFormat::kFp8: {  // half a step: 2^-4 relative, 2^-10 of the scale among subnormals (+ division rounding)
            const float ks = head_max(keys) / 448.f, vs = head_max(values) / 448.f;
            key_bound = std::max(std::fabs(key) * 0x1p-4f, ks * 0x1p-10f) * 1.0001f;
            value_bound = std::max(std::fabs(value) * 0x1p-4f, vs * 0x1p-10f) * 1.0001f;
            break;
          }
          case KvFormat::kInt8: {  // half a scale: values per slot and head; keys per channel over a block of 32
            value_bound = head_max(values) / 127.f / 2 * 1.0001f;
            if (j < 64) {
              float m = 0;
              for (int64_t t = j / 32 * 32; t < j / 32 * 32 + 32; ++t) m = std::max(m, std::fabs(keys[size_t(t * W + c)]));
              key_bound = m / 127.f / 2 * 1.0001f;
            }
            break;
          }
        }
        ASSERT_LE(std::fabs(k[size_t(c)] - key), key_bound) << kv_format_name(format) << " slot " << j << " " << c;
        ASSERT_LE(std::fabs(v[size_t(c)] - value), value_bound) << kv_format_name(format) << " slot " << j;
      }
    }
  }
}

// softmax(scale · q·k)·v in double precision over float32 keys and values
// [visible, G·D]; probabilities summed over heads into `weights`.
std::vector<float> attention_reference(const std::vector<float>& q, int64_t H, const std::vector<float>& k,
                                       const std::vector<float>& v, int64_t G, int64_t D, int64_t visible,
                                       float scale, std::vector<double>* weights) {
  std::vector<float> out(size_t(H * D));
  if (weights) weights->assign(size_t(visible), 0.0);
  for (int64_t h = 0; h < H; ++h) {
    const int64_t g = h / (H / G);
    std::vector<double> s(static_cast<size_t>(visible));
    double m = -1e300;
    for (int64_t j = 0; j < visible; ++j) {
      double dot = 0;
      for (int64_t d = 0; d < D; ++d) dot += double(q[size_t(h * D + d)]) * k[size_t(j * G * D + g * D + d)];
      s[size_t(j)] = dot * scale;
      m = std::max(m, s[size_t(j)]);
    }
    double z = 0;
    for (auto& x : s) z += (x = std::exp(x - m));
    for (int64_t d = 0; d < D; ++d) {
      double acc = 0;
      for (int64_t j = 0; j < visible; ++j) acc += s[size_t(j)] * v[size_t(j * G * D + g * D + d)];
      out[size_t(h * D + d)] = float(acc / z);
    }
    if (weights)
      for (int64_t j = 0; j < visible; ++j) (*weights)[size_t(j)] += s[size_t(j)] / z;
  }
  return out;
}

TEST(KvCache, AttentionEveryFormatAndIsaAgreesWithDefinitionAndBound) {
  struct Kernels {
    const char* name;
    cpu::KvScoresKernel scores;
    cpu::KvValuesKernel values;
    bool available;
  };
  const Kernels isas[] = {{"generic", cpu::kv_scores_generic, cpu::kv_values_generic, true},
                          {"avx512", cpu::kv_scores_avx512, cpu::kv_values_avx512, cpu::supports_avx512_kernels()}};
  struct Shape {
    int64_t query_heads, heads, head_dim;
  };
  // Multi-head, one shared head (the low-rank latent's shape), and a head dim the vector kernels hand to the scalar ones.
  for (const Shape shape : {Shape{4, 4, 32}, Shape{4, 1, 48}, Shape{2, 2, 20}})
    for (KvFormat format : {KvFormat::kF32, KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8})
      for (int64_t visible : {int64_t(1), int64_t(45), int64_t(300)}) {
        const int64_t H = shape.query_heads, G = shape.heads, D = shape.head_dim, W = G * D, slots = 300;
        const auto keys = random_rows(slots, W, 7), values = random_rows(slots, W, 8);
        const auto q = random_rows(1, H * D, 9);
        const float scale = 1.f / std::sqrt(float(D));
        cpu::KvStore store(format, slots, G, D);
        for (int64_t j = 0; j < visible; ++j) cpu::kv_store(store, j, keys.data() + j * W, values.data() + j * W);
        std::vector<float> stored_keys(size_t(visible * W)), stored_values(size_t(visible * W));
        for (int64_t j = 0; j < visible; ++j)
          cpu::kv_load(store, j, stored_keys.data() + j * W, stored_values.data() + j * W);
        std::vector<double> weights;
        const auto definition = attention_reference(q, H, stored_keys, stored_values, G, D, visible, scale, &weights);
        const auto exact = attention_reference(q, H, keys, values, G, D, visible, scale, nullptr);
        const std::string what = std::string(kv_format_name(format)) + " H=" + std::to_string(H) +
                                 " G=" + std::to_string(G) + " D=" + std::to_string(D) +
                                 " visible=" + std::to_string(visible);
        for (const auto& isa : isas) {
          if (!isa.available) continue;
          // Score and value kernels over the whole range against the stored values.
          std::vector<float> scores(size_t(visible * H)), probabilities(size_t(visible * H), 0.25f);
          isa.scores(store, q.data(), H, scale, 0, visible, scores.data());
          std::vector<float> accum(size_t(H * D), 0.f);
          isa.values(store, probabilities.data(), H, 0, visible, accum.data());
          for (int64_t h = 0; h < H; ++h) {
            const int64_t g = h / (H / G);
            for (int64_t j = 0; j < visible; ++j) {
              double dot = 0, magnitude = 0;
              for (int64_t d = 0; d < D; ++d) {
                dot += double(q[size_t(h * D + d)]) * stored_keys[size_t(j * W + g * D + d)];
                magnitude += std::fabs(double(q[size_t(h * D + d)]) * stored_keys[size_t(j * W + g * D + d)]);
              }
              ASSERT_NEAR(scores[size_t(j * H + h)], dot * scale, 1e-5 * magnitude * scale + 1e-30) << isa.name << " " << what;
            }
            for (int64_t d = 0; d < D; ++d) {
              double sum = 0, magnitude = 0;
              for (int64_t j = 0; j < visible; ++j) {
                sum += 0.25 * stored_values[size_t(j * W + g * D + d)];
                magnitude += 0.25 * std::fabs(stored_values[size_t(j * W + g * D + d)]);
              }
              ASSERT_NEAR(accum[size_t(h * D + d)], sum, 1e-5 * magnitude + 1e-30) << isa.name << " " << what;
            }
          }
        }
        // The whole op (the CPU's kernels, threads over slot ranges).
        std::vector<float> out(size_t(H * D)), slot_weights(size_t(visible), 0.f);
        cpu::kv_attention(store, q.data(), H, scale, visible, out.data(), slot_weights.data());
        double weight_total = 0;
        for (int64_t j = 0; j < visible; ++j) {
          ASSERT_NEAR(slot_weights[size_t(j)], weights[size_t(j)], 1e-5) << what;
          weight_total += slot_weights[size_t(j)];
        }
        EXPECT_NEAR(weight_total, double(H), 1e-4) << what;
        for (int64_t h = 0; h < H; ++h) {
          const int64_t g = h / (H / G);
          double delta = 0;  // Δ for this head
          for (int64_t d = 0; d < D; ++d) {
            double worst = 0;
            for (int64_t j = 0; j < visible; ++j)
              worst = std::max(worst, std::fabs(double(stored_keys[size_t(j * W + g * D + d)]) - keys[size_t(j * W + g * D + d)]));
            delta += std::fabs(q[size_t(h * D + d)]) * worst;
          }
          delta *= scale;
          for (int64_t d = 0; d < D; ++d) {
            double largest = 0, value_error = 0;
            for (int64_t j = 0; j < visible; ++j) {
              const size_t i = size_t(j * W + g * D + d);
              largest = std::max(largest, std::fabs(double(values[i])));
              value_error = std::max(value_error, std::fabs(double(stored_values[i]) - values[i]));
            }
            const size_t o = size_t(h * D + d);
            ASSERT_NEAR(out[o], definition[o], 1e-5 * (largest + 1e-6)) << what;
            const double bound = std::expm1(2 * delta) * largest + value_error + 1e-5 * largest;
            ASSERT_LE(std::fabs(double(out[o]) - exact[o]), bound) << what << " head " << h << " channel " << d;
          }
        }
      }
}

TEST(KvCache, Int8KeysStayFloatUntilTheirBlockIsFull) {
  const int64_t W = 16;
  const auto keys = random_rows(40, W, 4), values = random_rows(40, W, 5);
  cpu::KvStore store(KvFormat::kInt8, 40, 1, W);
  std::vector<float> k(W);
  for (int64_t j = 0; j < 31; ++j) cpu::kv_store(store, j, keys.data() + j * W, values.data() + j * W);
  EXPECT_EQ(store.quantized_slots, 0);
  cpu::kv_load(store, 30, k.data(), nullptr);
  for (int64_t c = 0; c < W; ++c) EXPECT_EQ(k[size_t(c)], keys[size_t(30 * W + c)]);
  cpu::kv_store(store, 31, keys.data() + 31 * W, values.data() + 31 * W);
  EXPECT_EQ(store.quantized_slots, 32);
  store.clear();
  EXPECT_EQ(store.quantized_slots, 0);
}

}  // namespace
}  // namespace cubeforge
