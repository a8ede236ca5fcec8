// Quantised weights: the formats' error bound against the original values,
// and every instruction set's matrix-vector kernel against the formats'
// scalar definition and against the float32 product it stands in for.
//
// The bound: each weight is within half its scale of the original (the
// scales are rounded up and the offsets down, so no code saturates), so a
// product y = Σ w·x is within Σ (s_k/2)·|x_k| of the float32 one, plus the
// float32 rounding of both sums.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "inference/cpu/kernels.h"
#include "inference/cpu/ops.h"
#include "inference/cpu/quantize.h"
#include "tests/support/matvec_kernels.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::relative_error;

struct Format {
  cpu::Quantization quantization;
  int64_t group;
  const char* name;
};
constexpr Format kFormats[] = {
    {cpu::Quantization::kQ8, 32, "q8"}, {cpu::Quantization::kQ4, 32, "q4/32"}, {cpu::Quantization::kQ4, 64, "q4/64"}};

// Values of a trained layer's scale with the awkward cases mixed in: an
// outlier per row, a constant group, a group of zeros, tiny values.
std::vector<float> weight_values(int64_t rows, int64_t cols, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> normal(0.f, 1.f / std::sqrt(float(cols)));
  std::vector<float> v(size_t(rows * cols));
  for (auto& x : v) x = normal(gen);
  for (int64_t r = 0; r < rows; ++r) v[size_t(r * cols + (r * 7) % cols)] *= 20.f;
  if (cols >= 128 && rows >= 3) {
    std::fill_n(v.begin() + cols, 64, 0.25f);
    std::fill_n(v.begin() + 2 * cols + 64, 64, 0.f);
    for (int64_t i = 0; i < 32; ++i) v[size_t(2 * cols + i)] *= 1e-4f;
  }
  return v;
}

struct QuantizedMatrix {
  std::vector<float> original;   // [N, K]
  std::vector<float> dequantized;
  std::vector<uint8_t> codes;
  std::vector<uint16_t> scales, offsets;
  cpu::WeightMatrix view;
};

QuantizedMatrix quantize(const Format& f, int64_t rows, int64_t cols, uint32_t seed) {
  QuantizedMatrix m;
  m.original = weight_values(rows, cols, seed);
  const int64_t groups = cols / f.group;
  m.codes.resize(size_t(rows * cpu::quantized_row_bytes(f.quantization, cols)));
  m.scales.resize(size_t(rows * groups));
  bool ok;
  if (f.quantization == cpu::Quantization::kQ8) {
    ok = cpu::quantize_rows_q8(m.original.data(), rows, cols, reinterpret_cast<int8_t*>(m.codes.data()),
                               m.scales.data());
    m.view = {DType::kI8, m.codes.data(), rows, cols, f.quantization, f.group, m.scales.data(), nullptr};
  } else {
    m.offsets.resize(m.scales.size());
    ok = cpu::quantize_rows_q4(m.original.data(), rows, cols, f.group, m.codes.data(), m.scales.data(),
                               m.offsets.data());
    m.view = {DType::kU8, m.codes.data(), rows, cols, f.quantization, f.group, m.scales.data(), m.offsets.data()};
  }
  EXPECT_TRUE(ok);
  m.dequantized.resize(m.original.size());
  cpu::dequantize_rows(m.view, 0, rows, m.dequantized.data());
  return m;
}

float scale_at(const QuantizedMatrix& m, int64_t row, int64_t col) {
  const int64_t groups = m.view.cols / m.view.group;
  return f16_to_f32(m.scales[size_t(row * groups + col / m.view.group)]);
}

TEST(Quantize, F16RoundingStaysOnItsSide) {
  std::mt19937 gen(3);
  std::uniform_real_distribution<float> u(-2.f, 2.f);
  for (int i = 0; i < 10000; ++i) {
    const float x = u(gen) * std::pow(10.f, float(i % 9) - 6.f);
    const float up = f16_to_f32(cpu::f16_rounded_up(x)), down = f16_to_f32(cpu::f16_rounded_down(x));
    ASSERT_GE(up, x);
    ASSERT_LE(down, x);
    // Neighbours: at most one F16 step apart (two when x is itself an F16 value... then both equal it).
    ASSERT_LE(up - down, std::max(std::fabs(x) * 2e-3f, 1.3e-7f)) << x;
  }
  EXPECT_EQ(cpu::f16_rounded_up(0.f), 0);
  EXPECT_GT(f16_to_f32(cpu::f16_rounded_up(1e-9f)), 0.f);
  EXPECT_LT(f16_to_f32(cpu::f16_rounded_down(-1e-9f)), 0.f);
}

TEST(Quantize, EveryWeightWithinHalfItsScale) {
  for (const Format& f : kFormats) {
    const int64_t rows = 5, cols = 320;
    QuantizedMatrix m = quantize(f, rows, cols, 21);
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t k = 0; k < cols; ++k) {
        const size_t i = size_t(r * cols + k);
        const float s = scale_at(m, r, k);
        // Half a scale, and the float32 rounding of code · s + m for Q4.
        const float slack = f.quantization == cpu::Quantization::kQ4 ? 1e-7f * std::fabs(m.original[i]) + 1e-12f : 0.f;
        ASSERT_LE(std::fabs(m.dequantized[i] - m.original[i]), s / 2 + slack) << f.name << " row " << r << " col " << k;
      }
    // Zeros come back exactly, and in Q4 so does a constant group (its offset).
    if (f.quantization == cpu::Quantization::kQ4) {
      EXPECT_EQ(m.dequantized[size_t(cols)], 0.25f) << f.name;
    }
    EXPECT_EQ(m.dequantized[size_t(2 * cols + 64)], 0.f) << f.name;
  }
}

TEST(Quantize, NonFiniteValuesAreRefused) {
  std::vector<float> v(64, 0.5f);
  v[7] = NAN;
  std::vector<int8_t> codes(64);
  std::vector<uint8_t> packed(32);
  std::vector<uint16_t> scales(2), offsets(2);
  EXPECT_FALSE(cpu::quantize_rows_q8(v.data(), 1, 64, codes.data(), scales.data()));
  EXPECT_FALSE(cpu::quantize_rows_q4(v.data(), 1, 64, 32, packed.data(), scales.data(), offsets.data()));
  v[7] = 1e30f;  // a scale beyond F16's range
  EXPECT_FALSE(cpu::quantize_rows_q8(v.data(), 1, 64, codes.data(), scales.data()));
}

std::vector<float> random_activations(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> u(-1.f, 1.f);
  std::vector<float> v(n);
  for (auto& x : v) x = u(gen);
  return v;
}

TEST(Quantize, MatvecEveryIsaAgreesWithDefinitionAndBound) {
  const auto kernels = testing::matvec_kernels();
  // 17 groups cross the AVX-512 kernel's 16-group steps; 37 rows leave a tail.
  for (const Format& f : kFormats)
    for (int64_t k : {f.group, 3 * f.group, 17 * f.group})
      for (int batch : {1, 2}) {
        const int64_t n = 37;
        QuantizedMatrix w = quantize(f, n, k, uint32_t(k + batch));
        const auto x = random_activations(size_t(batch * k), 9);
        const auto bias = random_activations(size_t(n), 10);
        std::vector<float> exact(size_t(batch * n)), quantized(size_t(batch * n)), bound(size_t(batch * n));
        for (int b = 0; b < batch; ++b)
          for (int64_t row = 0; row < n; ++row) {
            double e = bias[size_t(row)], q = bias[size_t(row)], worst = 0, magnitude = 0;
            for (int64_t t = 0; t < k; ++t) {
              const size_t wi = size_t(row * k + t);
              const double xv = x[size_t(b * k + t)];
              e += double(w.original[wi]) * xv;
              q += double(w.dequantized[wi]) * xv;
              worst += scale_at(w, row, t) / 2 * std::fabs(xv);
              magnitude += std::fabs(double(w.original[wi]) * xv);
            }
            exact[size_t(b * n + row)] = float(e);
            quantized[size_t(b * n + row)] = float(q);
            bound[size_t(b * n + row)] = float(worst * (1 + 1e-6) + 1e-6 * magnitude);
          }
        for (const auto& kernel : kernels) {
          if (!kernel.available) continue;
          std::vector<float> y(size_t(batch * n), NAN);
          kernel.fn(w.view, 0, n, x.data(), batch, bias.data(), y.data(), false);
          EXPECT_LT(relative_error(y, quantized), 1e-6) << kernel.name << " " << f.name << " K=" << k;
          for (size_t i = 0; i < y.size(); ++i)
            ASSERT_LE(std::fabs(y[i] - exact[i]), bound[i]) << kernel.name << " " << f.name << " K=" << k << " i=" << i;
          std::vector<float> acc(size_t(batch * n), 1.0f);
          kernel.fn(w.view, 0, n, x.data(), batch, nullptr, acc.data(), true);
          for (size_t i = 0; i < acc.size(); ++i)
            EXPECT_NEAR(acc[i], 1.0f + quantized[i] - bias[i % size_t(n)], 1e-5) << kernel.name << " " << f.name;
        }
      }
}

TEST(Quantize, LinearThroughGemmDequantizes) {
  for (const Format& f : kFormats) {
    QuantizedMatrix w = quantize(f, 300, 128, 31);
    const auto x = random_activations(9 * 128, 32);
    std::vector<float> y(9 * 300, NAN), expected(9 * 300);
    cpu::linear(x.data(), 9, w.view, nullptr, y.data());
    for (int64_t i = 0; i < 9; ++i)
      for (int64_t j = 0; j < 300; ++j) {
        double acc = 0;
        for (int64_t t = 0; t < 128; ++t) acc += double(x[size_t(i * 128 + t)]) * w.dequantized[size_t(j * 128 + t)];
        expected[size_t(i * 300 + j)] = float(acc);
      }
    EXPECT_LT(relative_error(y, expected), 1e-6) << f.name;
    EXPECT_EQ(w.view.byte_size(),
              size_t(300 * cpu::quantized_row_bytes(f.quantization, 128)) +
                  size_t(300 * 128 / f.group) * 2 * (f.quantization == cpu::Quantization::kQ4 ? 2 : 1));
  }
}

}  // namespace
}  // namespace cubeforge
