// CPU ops against plain scalar definitions: every instruction-set path of the
// matrix-vector kernel, GEMM, attention masks, norms and RoPE, and the
// vector-math ops (dispatched and scalar) against double precision.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <numbers>
#include <random>

#include "inference/core/thread_pool.h"
#include "inference/cpu/kernels.h"
#include "inference/cpu/ops.h"
#include "tests/support/matvec_kernels.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::relative_error;

std::vector<float> random_vector(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

struct StoredMatrix {
  std::vector<float> f32;      // the exact values (after rounding to the storage type)
  std::vector<uint16_t> half;  // storage for F16/BF16
  cpu::WeightMatrix view;
};

StoredMatrix make_matrix(DType dtype, int64_t rows, int64_t cols, uint32_t seed) {
  StoredMatrix m;
  m.f32 = random_vector(size_t(rows * cols), seed);
  if (dtype == DType::kF32) {
    m.view = {dtype, m.f32.data(), rows, cols};
  } else {
    m.half.resize(m.f32.size());
    for (size_t i = 0; i < m.f32.size(); ++i) {
      m.half[i] = dtype == DType::kBF16 ? f32_to_bf16(m.f32[i]) : f32_to_f16(m.f32[i]);
      m.f32[i] = dtype == DType::kBF16 ? bf16_to_f32(m.half[i]) : f16_to_f32(m.half[i]);
    }
    m.view = {dtype, m.half.data(), rows, cols};
  }
  return m;
}

std::vector<float> reference_linear(const std::vector<float>& x, int64_t m, const StoredMatrix& w,
                                    const std::vector<float>& bias) {
  const int64_t n = w.view.rows, k = w.view.cols;
  std::vector<float> y(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = bias.empty() ? 0.0 : bias[size_t(j)];
      for (int64_t t = 0; t < k; ++t) acc += double(x[size_t(i * k + t)]) * w.f32[size_t(j * k + t)];
      y[size_t(i * n + j)] = float(acc);
    }
  return y;
}

TEST(CpuOps, MatvecEveryIsaAndDtypeAgreesWithScalar) {
  const auto kernels = testing::matvec_kernels();
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t k : {3, 8, 48, 99, 130})
      for (int batch : {1, 2}) {
        const int64_t n = 37;
        auto w = make_matrix(dtype, n, k, uint32_t(k * 10 + batch));
        auto x = random_vector(size_t(batch * k), 5);
        auto bias = random_vector(size_t(n), 6);
        auto expected = reference_linear(x, batch, w, bias);
        for (const auto& kernel : kernels) {
          if (!kernel.available) continue;
          std::vector<float> y(static_cast<size_t>(batch * n), NAN);
          kernel.fn(w.view, 0, n, x.data(), batch, bias.data(), y.data(), false);
          EXPECT_LT(relative_error(y, expected), 1e-6)
              << kernel.name << " " << dtype_name(dtype) << " K=" << k << " batch=" << batch;
          // Accumulate mode adds onto what is there.
          std::vector<float> acc(static_cast<size_t>(batch * n), 1.0f);
          kernel.fn(w.view, 0, n, x.data(), batch, nullptr, acc.data(), true);
          for (size_t i = 0; i < acc.size(); ++i)
            EXPECT_NEAR(acc[i], 1.0f + expected[i] - bias[i % size_t(n)], 1e-5) << kernel.name;
        }
      }
}

TEST(CpuOps, LinearThroughGemmMatchesScalar) {
  for (DType dtype : {DType::kF32, DType::kBF16}) {
    auto w = make_matrix(dtype, 300, 70, 11);
    auto x = random_vector(size_t(9 * 70), 12);
    auto bias = random_vector(300, 13);
    std::vector<float> y(9 * 300, NAN);
    cpu::linear(x.data(), 9, w.view, bias.data(), y.data());
    EXPECT_LT(relative_error(y, reference_linear(x, 9, w, bias)), 1e-6) << dtype_name(dtype);
  }
}

// linear_rows: any number of rows, each the same bits as that row through a
// one-row linear() (what a decode step computes), and close to the definition.
TEST(CpuOps, LinearRowsGiveEachRowTheDecodeBits) {
  for (DType dtype : {DType::kF32, DType::kF16, DType::kBF16})
    for (int64_t rows : {1, 2, 3, 7, 12}) {
      auto w = make_matrix(dtype, 300, 130, uint32_t(20 + rows));
      auto x = random_vector(size_t(rows * 130), 21);
      auto bias = random_vector(300, 22);
      std::vector<float> together(size_t(rows * 300), NAN);
      cpu::linear_rows(x.data(), rows, w.view, bias.data(), together.data());
      std::vector<float> accumulated(size_t(rows * 300), 0.5f);
      cpu::linear_rows_accumulate(x.data(), rows, w.view, bias.data(), accumulated.data());
      for (int64_t r = 0; r < rows; ++r) {
        std::vector<float> alone(300, NAN), alone_accumulated(300, 0.5f);
        cpu::linear(x.data() + r * 130, 1, w.view, bias.data(), alone.data());
        cpu::linear_accumulate(x.data() + r * 130, 1, w.view, bias.data(), alone_accumulated.data());
        for (int64_t j = 0; j < 300; ++j) {
          ASSERT_EQ(together[size_t(r * 300 + j)], alone[size_t(j)]) << dtype_name(dtype) << " rows " << rows;
          ASSERT_EQ(accumulated[size_t(r * 300 + j)], alone_accumulated[size_t(j)]) << dtype_name(dtype);
        }
      }
      EXPECT_LT(relative_error(together, reference_linear(x, rows, w, bias)), 1e-6) << dtype_name(dtype);
    }
}

// cpu::sgemm splits large products over the pool by rows or columns: every
// split, transposed or not, with strides, alpha and beta, gives the product.
TEST(CpuOps, SgemmInPartsMatchesDoublePrecision) {
  const int previous_threads = cpu::thread_count();
  cpu::set_thread_count(3);  // uneven parts, whatever the machine
  struct Case {
    int64_t M, N, K;
    bool transpose_b;
  };
  // More columns than rows, more rows than columns, sizes off multiples of 16,
  // and one small enough to stay on one thread.
  for (const Case c : {Case{37, 517, 83, true}, Case{37, 517, 83, false}, Case{601, 45, 71, true},
                       Case{601, 45, 71, false}, Case{5, 7, 3, true}}) {
    const int64_t lda = c.K + 3, ldb = (c.transpose_b ? c.K : c.N) + 5, ldc = c.N + 2;
    const int64_t b_rows = c.transpose_b ? c.N : c.K;
    const auto a = random_vector(size_t(c.M * lda), 21);
    const auto b = random_vector(size_t(b_rows * ldb), 22);
    const auto c0 = random_vector(size_t(c.M * ldc), 23);
    const float alpha = 0.75f, beta = 1.f;
    std::vector<float> out = c0;
    cpu::sgemm(c.transpose_b, c.M, c.N, c.K, alpha, a.data(), lda, b.data(), ldb, beta, out.data(), ldc);
    std::vector<float> got, expected;
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = 0; j < c.N; ++j) {
        double acc = 0.0;
        for (int64_t t = 0; t < c.K; ++t) {
          const float bv = c.transpose_b ? b[size_t(j * ldb + t)] : b[size_t(t * ldb + j)];
          acc += double(a[size_t(i * lda + t)]) * bv;
        }
        expected.push_back(float(alpha * acc + beta * c0[size_t(i * ldc + j)]));
        got.push_back(out[size_t(i * ldc + j)]);
      }
    EXPECT_LT(relative_error(got, expected), 1e-6) << c.M << "x" << c.N << "x" << c.K << (c.transpose_b ? " Bt" : " B");
    // The padding between rows of C is left alone.
    for (int64_t i = 0; i < c.M; ++i)
      for (int64_t j = c.N; j < ldc; ++j) ASSERT_EQ(out[size_t(i * ldc + j)], c0[size_t(i * ldc + j)]);
  }
  cpu::set_thread_count(previous_threads);
}

TEST(CpuOps, CausalAttentionMasksFutureKeys) {
  const int64_t heads = 2, dim = 8, len = 20;
  auto q = random_vector(size_t(len * heads * dim), 1);
  auto k = random_vector(size_t(len * heads * dim), 2);
  auto v = random_vector(size_t(len * heads * dim), 3);
  for (int64_t base : {0, 5, -1}) {
    std::vector<float> blocked(q.size(), NAN);
    cpu::attention(q.data(), len, heads * dim, k.data(), v.data(), len, heads * dim, heads, dim, base, blocked.data(),
                   heads * dim);
    std::vector<float> expected(q.size());
    for (int64_t i = 0; i < len; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        const int64_t visible = base < 0 ? len : std::min(len, base + i + 1);
        std::vector<double> s(static_cast<size_t>(visible));
        double mx = -1e30, total = 0;
        for (int64_t j = 0; j < visible; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d) dot += double(q[size_t(i * heads * dim + h * dim + d)]) * k[size_t(j * heads * dim + h * dim + d)];
          s[size_t(j)] = dot / std::sqrt(double(dim));
          mx = std::max(mx, s[size_t(j)]);
        }
        for (auto& e : s) total += e = std::exp(e - mx);
        for (int64_t d = 0; d < dim; ++d) {
          double o = 0;
          for (int64_t j = 0; j < visible; ++j) o += s[size_t(j)] / total * v[size_t(j * heads * dim + h * dim + d)];
          expected[size_t(i * heads * dim + h * dim + d)] = float(o);
        }
      }
    EXPECT_LT(relative_error(blocked, expected), 1e-5) << "causal_base " << base;
    // The direct (decode) path agrees for a single query row.
    std::vector<float> one(static_cast<size_t>(heads * dim));
    const int64_t row = 7;
    cpu::attention(q.data() + row * heads * dim, 1, heads * dim, k.data(), v.data(),
                   base < 0 ? len : std::min(len, base + row + 1), heads * dim, heads, dim, -1, one.data(), heads * dim);
    EXPECT_LT(relative_error(one, std::span<const float>(expected).subspan(size_t(row * heads * dim), one.size())), 1e-5);
  }
}

// Decode over a long cache takes the key-split path with merged softmaxes.
TEST(CpuOps, SingleQueryOverLongCacheMatchesScalar) {
  const int64_t heads = 4, dim = 32, len = 700;
  auto q = random_vector(size_t(heads * dim), 21);
  auto k = random_vector(size_t(len * heads * dim), 22);
  auto v = random_vector(size_t(len * heads * dim), 23);
  for (auto& x : q) x *= 3.f;  // peakier softmax
  for (int64_t base : {-1, 500}) {
    const int64_t visible = base < 0 ? len : base + 1;
    std::vector<float> out(static_cast<size_t>(heads * dim), NAN);
    cpu::attention(q.data(), 1, heads * dim, k.data(), v.data(), len, heads * dim, heads, dim, base, out.data(),
                   heads * dim);
    std::vector<float> expected(out.size());
    for (int64_t h = 0; h < heads; ++h) {
      std::vector<double> s(static_cast<size_t>(visible));
      double mx = -1e30, total = 0;
      for (int64_t j = 0; j < visible; ++j) {
        double dot = 0;
        for (int64_t d = 0; d < dim; ++d) dot += double(q[size_t(h * dim + d)]) * k[size_t(j * heads * dim + h * dim + d)];
        s[size_t(j)] = dot / std::sqrt(double(dim));
        mx = std::max(mx, s[size_t(j)]);
      }
      for (auto& e : s) total += e = std::exp(e - mx);
      for (int64_t d = 0; d < dim; ++d) {
        double o = 0;
        for (int64_t j = 0; j < visible; ++j) o += s[size_t(j)] / total * v[size_t(j * heads * dim + h * dim + d)];
        expected[size_t(h * dim + d)] = float(o);
      }
    }
    EXPECT_LT(relative_error(out, expected), 1e-5) << "causal_base " << base;
  }
}

// attention_over_rows reads the named rows in place: every instruction-set
// path against double precision over the same rows, with the weights summed
// over heads, for head sizes of whole and partial registers (80 = 64 + 16)
// and one that is no multiple of 16 (the scalar fallback).
TEST(CpuOps, AttentionOverNamedRowsMatchesDoublePrecision) {
  struct Path {
    const char* name;
    decltype(&cpu::attention_over_rows_generic) kernel;
    bool available;
  };
  const Path paths[] = {{"generic", cpu::attention_over_rows_generic, true},
                        {"avx512", cpu::attention_over_rows_avx512, cpu::supports_avx512_kernels()}};
  const int64_t heads = 3, rows = 5, latents = 40;
  const std::vector<int32_t> named = {7, 0, 39, 12, 13, 25, 3, 30, 31, 18, 2, 21, 8, 36, 5, 16, 11};
  const int64_t count = int64_t(named.size());
  for (int64_t dim : {16, 80, 20}) {
    const int64_t W = heads * dim;
    auto q = random_vector(size_t(rows * W), 31);
    auto k = random_vector(size_t(latents * W), 32);
    auto v = random_vector(size_t(latents * W), 33);
    for (auto& x : q) x *= 2.f;  // peakier softmax
    std::vector<float> expected(size_t(rows * W)), expected_mass(size_t(rows * count), 0.f);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < heads; ++h) {
        std::vector<double> p(static_cast<size_t>(count));
        double mx = -1e30, total = 0;
        for (int64_t j = 0; j < count; ++j) {
          double dot = 0;
          for (int64_t d = 0; d < dim; ++d)
            dot += double(q[size_t(r * W + h * dim + d)]) * k[size_t(named[size_t(j)] * W + h * dim + d)];
          p[size_t(j)] = dot / std::sqrt(double(dim));
          mx = std::max(mx, p[size_t(j)]);
        }
        for (auto& e : p) total += e = std::exp(e - mx);
        for (int64_t j = 0; j < count; ++j) expected_mass[size_t(r * count + j)] += float(p[size_t(j)] / total);
        for (int64_t d = 0; d < dim; ++d) {
          double o = 0;
          for (int64_t j = 0; j < count; ++j) o += p[size_t(j)] / total * v[size_t(named[size_t(j)] * W + h * dim + d)];
          expected[size_t(r * W + h * dim + d)] = float(o);
        }
      }
    for (const Path& path : paths) {
      if (!path.available) continue;
      std::vector<float> out(expected.size(), NAN), mass(expected_mass.size(), NAN);
      path.kernel(q.data(), rows, k.data(), v.data(), named.data(), count, heads, dim, out.data(), mass.data());
      EXPECT_LT(relative_error(out, expected), 1e-5) << path.name << ", head size " << dim;
      EXPECT_LT(relative_error(mass, expected_mass), 1e-5) << path.name << ", head size " << dim;
      std::vector<float> without_mass(expected.size(), NAN);
      path.kernel(q.data(), rows, k.data(), v.data(), named.data(), count, heads, dim, without_mass.data(), nullptr);
      EXPECT_EQ(without_mass, out) << path.name << ", head size " << dim;
    }
  }
}

TEST(CpuOps, RopeRotatesPairsByPosition) {
  std::vector<float> x = {1.f, 0.f, 0.f, 1.f};  // one head of dim 4
  const int32_t position = 3;
  cpu::rope_interleaved(x.data(), 1, 1, 4, 4, &position, 10000.f);
  EXPECT_NEAR(x[0], std::cos(3.f), 1e-6);
  EXPECT_NEAR(x[1], std::sin(3.f), 1e-6);
  const float f1 = 3.f / 100.f;  // theta^(-2/4) = 1/100
  EXPECT_NEAR(x[2], -std::sin(f1), 1e-6);
  EXPECT_NEAR(x[3], std::cos(f1), 1e-6);
}

TEST(CpuOps, NormsMatchDefinitions) {
  auto x = random_vector(3 * 16, 9);
  std::vector<float> y(x.size());
  cpu::layer_norm(x.data(), 3, 16, 1e-6f, nullptr, nullptr, y.data());
  for (int r = 0; r < 3; ++r) {
    double mean = 0, var = 0;
    for (int j = 0; j < 16; ++j) mean += y[size_t(r * 16 + j)];
    for (int j = 0; j < 16; ++j) var += std::pow(y[size_t(r * 16 + j)] - mean / 16, 2);
    EXPECT_NEAR(mean / 16, 0.0, 1e-6);
    EXPECT_NEAR(var / 16, 1.0, 1e-4);
  }
  std::vector<float> w(16, 2.f);
  cpu::rms_norm(x.data(), 3, 16, 1e-5f, w.data(), y.data());
  double sq = 0;
  for (int j = 0; j < 16; ++j) sq += y[size_t(j)] * y[size_t(j)];
  EXPECT_NEAR(sq / 16, 4.0, 1e-3);
}

// ---- The vector-math ops (dispatched, and the scalar loops) against double precision.

struct KernelSet {
  const char* name;
  void (*fourier_embed)(const float*, const float*, int64_t, const float*, int64_t, float*);
  void (*layer_norm)(const float*, int64_t, int64_t, float, const float*, const float*, float*);
  void (*softmax_rows)(float*, int64_t, int64_t, float);
  void (*gelu)(float*, int64_t);
  void (*silu)(float*, int64_t);
};

std::vector<KernelSet> kernel_sets() {
  return {{"dispatched", cpu::fourier_embed, cpu::layer_norm_lanes, cpu::softmax_rows, cpu::gelu_erf_lanes,
           cpu::silu_lanes},
          {"scalar", cpu::fourier_embed_scalar, cpu::layer_norm, cpu::softmax_rows_scalar, cpu::gelu_erf_inplace,
           cpu::silu_lanes_scalar}};
}

// |a - exact| relative to |exact|, or absolute below 1e-3: a GELU/SiLU output
// that small is at the scale of rounding in the layer that reads it.
double activation_error(float actual, double exact) {
  return std::abs(double(actual) - exact) / std::max(std::abs(exact), 1e-3);
}

// Each embedded value is a sum of two sines or cosines of float32 arguments
// formed as the kernels form them; the reference sums them in double precision.
TEST(CpuVectorMath, FourierEmbeddingMatchesDoublePrecision) {
  for (int64_t F : {16, 8, 21}) {  // one vector, a partial one, one and a partial
    std::mt19937 rng{static_cast<uint32_t>(F)};
    std::normal_distribution<float> normal(0.f, std::sqrt(0.5f * float(F)));
    std::uniform_real_distribution<float> uniform(-1.2f, 1.2f);
    std::vector<float> weight(static_cast<size_t>(3 * F)), carrier(static_cast<size_t>(F)), points;
    for (float& w : weight) w = normal(rng);
    weight[0] = 60.f;  // arguments up to ±72: several turns of range reduction
    for (int64_t f = 0; f < F; ++f) carrier[size_t(f)] = float(f) * 1.7f;
    for (int i = 0; i < 3 * 3000; ++i) points.push_back(uniform(rng));
    for (float v : {0.f, -0.f, 1.f, -1.f, 1.05f, -1.05f}) points.insert(points.end(), {v, -v, v});
    const int64_t count = int64_t(points.size() / 3), dim = 3 * (2 * F + 1);
    for (const auto& set : kernel_sets()) {
      std::vector<float> out(size_t(count * dim), -7.f);
      set.fourier_embed(weight.data(), carrier.data(), F, points.data(), count, out.data());
      double worst = 0.0;
      for (int64_t p = 0; p < count; ++p)
        for (int i = 0; i < 3; ++i) {
          const float x = points[size_t(p * 3 + i)];
          EXPECT_EQ(out[size_t(p * dim + i)], x);
          const float phase = x * 0.5f * std::numbers::pi_v<float>;
          for (int64_t f = 0; f < F; ++f) {
            const double modulated = double(x * weight[size_t(i * F + f)]);
            const double carried = double(phase + carrier[size_t(f)]);
            const float c = out[size_t(p * dim + 3 + i * F + f)], s = out[size_t(p * dim + 3 + 3 * F + i * F + f)];
            worst = std::max({worst, std::abs(double(c) - (std::cos(modulated) + std::cos(carried))),
                              std::abs(double(s) - (std::sin(modulated) + std::sin(carried)))});
          }
        }
      std::printf("  Fourier F=%lld (%s, %s): worst error %.3g\n", static_cast<long long>(F), set.name,
                  cpu::kernel_isa(), worst);
      // A couple of ulp of each term (values lie in [-2, 2]).
      EXPECT_LT(worst, 1e-6) << set.name << " F=" << F;
    }
  }
}

TEST(CpuVectorMath, LayerNormMatchesDoublePrecision) {
  std::mt19937 rng{5};
  std::normal_distribution<float> normal(0.f, 1.f);
  for (int64_t n : {64, 37, 16, 5}) {
    const int64_t rows = 300;
    std::vector<float> x(size_t(rows * n)), weight(static_cast<size_t>(n)), bias(static_cast<size_t>(n));
    for (int64_t r = 0; r < rows; ++r)  // rows with large offsets: the mean must come off first
      for (int64_t j = 0; j < n; ++j) x[size_t(r * n + j)] = normal(rng) * float(r % 7 + 1) + float(r % 5) * 30.f;
    for (float& w : weight) w = normal(rng);
    for (float& b : bias) b = normal(rng);
    for (bool affine : {true, false})
      for (const auto& set : kernel_sets()) {
        std::vector<float> y(x.size(), -7.f);
        set.layer_norm(x.data(), rows, n, 1e-6f, affine ? weight.data() : nullptr, affine ? bias.data() : nullptr,
                       y.data());
        // Errors in units of the row's own float32 resolution: max |x| / std, times
        // the weight. Rows far from zero mean lose digits in x − mean in any float32
        // implementation; the kernels must not lose more than a few ulp beyond that.
        double worst = 0.0;
        for (int64_t r = 0; r < rows; ++r) {
          double mean = 0.0, var = 0.0, largest = 0.0;
          for (int64_t j = 0; j < n; ++j) {
            mean += x[size_t(r * n + j)];
            largest = std::max(largest, std::abs(double(x[size_t(r * n + j)])));
          }
          mean /= double(n);
          for (int64_t j = 0; j < n; ++j) var += (x[size_t(r * n + j)] - mean) * (x[size_t(r * n + j)] - mean);
          const double inverse = 1.0 / std::sqrt(var / double(n) + 1e-6);
          for (int64_t j = 0; j < n; ++j) {
            double expected = (x[size_t(r * n + j)] - mean) * inverse;
            double scale = largest * inverse;
            if (affine) {
              expected = expected * weight[size_t(j)] + bias[size_t(j)];
              scale *= std::max(1.0, std::abs(double(weight[size_t(j)])));
            }
            worst = std::max(worst, std::abs(double(y[size_t(r * n + j)]) - expected) / scale);
          }
        }
        std::printf("  LayerNorm n=%lld (%s, %s): worst error %.3g of the row's resolution\n",
                    static_cast<long long>(n), set.name, cpu::kernel_isa(), worst);
        // float32's epsilon is 1.2e-7: a few ulp.
        EXPECT_LT(worst, 6e-7) << set.name << " n=" << n;
      }
  }
}

TEST(CpuVectorMath, GeluMatchesErf) {
  std::vector<float> x;
  for (int i = -4000; i <= 4000; ++i) x.push_back(float(i) * 0.0025f);  // [-10, 10]
  for (float v : {0.f, -0.f, 1e-30f, -1e-30f, 30.f, -30.f, 1e4f, -1e4f}) x.push_back(v);
  for (const auto& set : kernel_sets()) {
    std::vector<float> y = x;
    set.gelu(y.data(), int64_t(y.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, activation_error(y[i], 0.5 * double(x[i]) * (1.0 + std::erf(double(x[i]) / std::sqrt(2.0)))));
    std::printf("  GELU (%s, %s): worst error %.3g\n", set.name, cpu::kernel_isa(), worst);
    // A few ulp. (Written as 1 + erf in float32 this loses up to 8e-5 near
    // x = -5 by cancellation; both paths evaluate erfc there instead.)
    EXPECT_LT(worst, 2e-6) << set.name;
  }
}

TEST(CpuVectorMath, SiluMatchesDoublePrecision) {
  std::vector<float> x;
  for (int i = -6000; i <= 6000; ++i) x.push_back(float(i) * 0.005f);  // [-30, 30]
  for (float v : {0.f, 100.f, -100.f, 1e-20f}) x.push_back(v);
  for (const auto& set : kernel_sets()) {
    std::vector<float> y = x;
    set.silu(y.data(), int64_t(y.size()));
    double worst = 0.0;
    for (size_t i = 0; i < x.size(); ++i)
      worst = std::max(worst, activation_error(y[i], double(x[i]) / (1.0 + std::exp(-double(x[i])))));
    std::printf("  SiLU (%s, %s): worst error %.3g\n", set.name, cpu::kernel_isa(), worst);
    EXPECT_LT(worst, 1e-6) << set.name;
  }
}

TEST(CpuVectorMath, SoftmaxRowsMatchDoublePrecision) {
  const int64_t rows = 5, n = 1037;  // a tail that is not a multiple of 16
  std::vector<float> scores(size_t(rows * n));
  for (int64_t i = 0; i < rows * n; ++i) scores[size_t(i)] = float(std::sin(double(i) * 0.37) * 12.0 + double(i % 7));
  const float scale = 0.125f;
  for (const auto& set : kernel_sets()) {
    std::vector<float> result = scores;
    set.softmax_rows(result.data(), rows, n, scale);
    double worst = 0.0;
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = scores.data() + r * n;
      double max_value = -1e300, sum = 0.0;
      for (int64_t j = 0; j < n; ++j) max_value = std::max(max_value, double(row[j]) * scale);
      for (int64_t j = 0; j < n; ++j) sum += std::exp(double(row[j]) * scale - max_value);
      for (int64_t j = 0; j < n; ++j) {
        const double exact = std::exp(double(row[j]) * scale - max_value) / sum;
        worst = std::max(worst, std::abs(double(result[size_t(r * n + j)]) - exact) / exact);
      }
    }
    std::printf("  softmax (%s, %s): worst relative error %.3g\n", set.name, cpu::kernel_isa(), worst);
    EXPECT_LT(worst, 2e-6) << set.name;
  }
}

TEST(ThreadPool, CoversEveryIndexOnce) {
  ThreadPool pool(3);
  std::vector<int> hits(1000, 0);
  for (int round = 0; round < 50; ++round)
    pool.parallel_for(1000, 10, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) ++hits[size_t(i)];
    });
  for (int h : hits) EXPECT_EQ(h, 50);
}

}  // namespace
}  // namespace cubeforge
