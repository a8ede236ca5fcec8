// Shared pieces of the CUDA kernel tests: the skip-without-GPU fixture (a
// failure instead where CUBEFORGE_REQUIRE_CUDA is set), status
// assertions, seeded random data, bf16 packing and error measures.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "inference/cuda/cuda_api.h"
#include "inference/cuda/device_memory.h"
#include "inference/tensor/dtype.h"

namespace cubeforge::cuda::testing {

// CUBEFORGE_REQUIRE_CUDA=1 (set by tools/device-check.sh on the GPU machine):
// a test that finds no CUDA device fails instead of skipping.
inline bool cuda_device_required() {
  const char* value = std::getenv("CUBEFORGE_REQUIRE_CUDA");
  return value && *value && std::string(value) != "0";
}

// Skips the calling test (or SetUp) without a CUDA device, or fails it when
// cuda_device_required().
#define CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE()                                                              \
  do {                                                                                                    \
    if (::cubeforge::cuda::device_count() == 0) {                                                         \
      if (::cubeforge::cuda::testing::cuda_device_required())                                             \
        FAIL() << "no CUDA device (" << ::cubeforge::cuda::device_summary()                               \
               << ") where one is required (CUBEFORGE_REQUIRE_CUDA is set)";                              \
      GTEST_SKIP() << "no CUDA device (" << ::cubeforge::cuda::device_summary()                           \
                   << "); the cuda label runs on a GPU machine, e.g. through tools/device-check.sh";      \
    }                                                                                                     \
  } while (0)

class CudaTest : public ::testing::Test {
 protected:
  void SetUp() override { CUBEFORGE_SKIP_WITHOUT_CUDA_DEVICE(); }
};

#define CUBEFORGE_ASSERT_OK(expr)                                        \
  do {                                                                   \
    auto cubeforge_status_ = (expr);                                     \
    ASSERT_TRUE(cubeforge_status_.ok()) << cubeforge_status_.error().to_string(); \
  } while (0)

#define CUBEFORGE_ASSERT_OK_AND_ASSIGN(lhs, expr)                                                   \
  auto CUBEFORGE_CONCAT_(cubeforge_test_result_, __LINE__) = (expr);                                \
  ASSERT_TRUE(CUBEFORGE_CONCAT_(cubeforge_test_result_, __LINE__).ok())                             \
      << CUBEFORGE_CONCAT_(cubeforge_test_result_, __LINE__).error().to_string();                   \
  lhs = std::move(CUBEFORGE_CONCAT_(cubeforge_test_result_, __LINE__)).value()

inline std::vector<float> random_floats(std::size_t count, std::uint32_t seed, float low = -1.0f, float high = 1.0f) {
  std::mt19937 generator(seed);
  std::uniform_real_distribution<float> distribution(low, high);
  std::vector<float> values(count);
  for (float& value : values) value = distribution(generator);
  return values;
}

inline std::vector<std::uint16_t> to_bf16(const std::vector<float>& values) {
  std::vector<std::uint16_t> bits(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) bits[i] = f32_to_bf16(values[i]);
  return bits;
}

inline std::vector<float> from_bf16(const std::vector<std::uint16_t>& bits) {
  std::vector<float> values(bits.size());
  for (std::size_t i = 0; i < bits.size(); ++i) values[i] = bf16_to_f32(bits[i]);
  return values;
}

// Values exactly representable in bf16 (so bf16 and f32 paths see the same numbers).
inline std::vector<float> bf16_exact(const std::vector<float>& values) { return from_bf16(to_bf16(values)); }

// ‖actual − expected‖ / ‖expected‖; infinity when any actual value is not finite.
template <class Actual, class Expected>
double normalised_error(const std::vector<Actual>& actual, const std::vector<Expected>& expected) {
  EXPECT_EQ(actual.size(), expected.size());
  double difference = 0.0, reference = 0.0;
  for (std::size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    if (!std::isfinite(double(actual[i]))) return INFINITY;
    const double d = double(actual[i]) - double(expected[i]);
    difference += d * d;
    reference += double(expected[i]) * double(expected[i]);
  }
  return std::sqrt(difference / std::max(reference, 1e-300));
}

template <class Actual, class Expected>
double max_abs_error(const std::vector<Actual>& actual, const std::vector<Expected>& expected) {
  double worst = 0.0;
  for (std::size_t i = 0; i < actual.size() && i < expected.size(); ++i) {
    if (!std::isfinite(double(actual[i]))) return INFINITY;
    worst = std::max(worst, std::abs(double(actual[i]) - double(expected[i])));
  }
  return worst;
}

template <class T>
Result<DeviceBuffer<T>> upload(const std::vector<T>& host, const char* name) {
  return DeviceBuffer<T>::from_host(host, name);
}

}  // namespace cubeforge::cuda::testing
