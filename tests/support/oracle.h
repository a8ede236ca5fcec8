// Shared helpers for tests that compare against the reference fixtures.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <span>
#include <string>

namespace cubeforge::testing {

// The fixture folder: $CUBEFORGE_ORACLE_DIR, else the project's default.
inline std::filesystem::path oracle_dir() {
  if (const char* env = std::getenv("CUBEFORGE_ORACLE_DIR"); env && *env) return env;
#ifdef CUBEFORGE_DEFAULT_ORACLE_DIR
  return CUBEFORGE_DEFAULT_ORACLE_DIR;
#else
  return {};
#endif
}

// The CLIP fixtures: the fixture folder's clip/.
inline std::filesystem::path oracle_clip_dir() { return oracle_dir() / "clip"; }

inline bool oracle_available() {
  const auto dir = oracle_dir();
  return !dir.empty() && std::filesystem::exists(dir / "expected.safetensors");
}

// ‖a − b‖ / ‖b‖ (‖a‖ when b is all zeros).
inline double relative_error(std::span<const float> a, std::span<const float> b) {
  if (a.size() != b.size()) return INFINITY;
  double diff = 0, norm = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += double(a[i] - b[i]) * double(a[i] - b[i]);
    norm += double(b[i]) * double(b[i]);
  }
  if (norm == 0) return std::sqrt(diff);
  return std::sqrt(diff / norm);
}

inline constexpr double kOracleTolerance = 1e-4;

}  // namespace cubeforge::testing

#define CUBEFORGE_REQUIRE_ORACLE()                                                                   \
  do {                                                                                               \
    if (!::cubeforge::testing::oracle_available())                                                   \
      GTEST_SKIP() << "reference fixtures not found at '" << ::cubeforge::testing::oracle_dir()      \
                   << "'; set CUBEFORGE_ORACLE_DIR to a fixture folder";                             \
  } while (0)

// Skips the current test when the CLIP fixture `file` is absent.
#define SKIP_WITHOUT_CLIP_ORACLE(file)                                                              \
  do {                                                                                               \
    if (!std::filesystem::exists(::cubeforge::testing::oracle_clip_dir() / (file)))                  \
      GTEST_SKIP() << "CLIP fixtures not found at " << ::cubeforge::testing::oracle_clip_dir() / (file) \
                   << "; set CUBEFORGE_ORACLE_DIR to a fixture set (e.g. shared/oracle/cube3d-v05)"; \
  } while (0)
