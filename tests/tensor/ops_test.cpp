// CPU ops against plain scalar definitions: every instruction-set path of the
// matrix-vector kernel, GEMM, attention masks, norms and RoPE.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inference/core/thread_pool.h"
#include "inference/cpu/matvec.h"
#include "inference/cpu/ops.h"
#include "support/oracle.h"

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
  __builtin_cpu_init();
  struct Kernel {
    const char* name;
    cpu::MatvecKernel fn;
    bool available;
  };
  const Kernel kernels[] = {
      {"generic", cpu::matvec_generic, true},
      {"avx2", cpu::matvec_avx2, __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")},
      {"avx512", cpu::matvec_avx512, __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw")},
  };
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
