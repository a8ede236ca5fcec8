// Where the CLIP fixtures are: $CUBEFORGE_ORACLE_DIR (a fixture set such as
// cube3d-v05) or the build's default, with the CLIP folder in its clip/.
#pragma once

#include <cstdlib>
#include <filesystem>

namespace cubeforge::testing {

inline std::filesystem::path oracle_dir() {
  if (const char* from_env = std::getenv("CUBEFORGE_ORACLE_DIR"); from_env && *from_env) return from_env;
#ifdef CUBEFORGE_DEFAULT_ORACLE_DIR
  return CUBEFORGE_DEFAULT_ORACLE_DIR;
#else
  return {};
#endif
}

inline std::filesystem::path oracle_clip_dir() { return oracle_dir() / "clip"; }

}  // namespace cubeforge::testing

// Skips the current test when the CLIP fixture folder is absent.
#define SKIP_WITHOUT_CLIP_ORACLE(file)                                                              \
  do {                                                                                               \
    if (!std::filesystem::exists(::cubeforge::testing::oracle_clip_dir() / (file)))                  \
      GTEST_SKIP() << "CLIP fixtures not found at " << ::cubeforge::testing::oracle_clip_dir() / (file) \
                   << "; set CUBEFORGE_ORACLE_DIR to a fixture set (e.g. shared/oracle/cube3d-v05)"; \
  } while (0)
