// A fresh temporary folder per test, removed afterwards.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <string>

#include "tests/support/oracle.h"

namespace cubeforge::app::testing {

class TemporaryFolder {
 public:
  TemporaryFolder() {
    std::string pattern = (std::filesystem::temp_directory_path() / "cubeforge-app-test-XXXXXX").string();
    char* made = ::mkdtemp(pattern.data());
    EXPECT_NE(made, nullptr) << "cannot create a temporary folder";
    path_ = pattern;
  }
  ~TemporaryFolder() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  const std::filesystem::path& path() const { return path_; }

 private:
  std::filesystem::path path_;
};

// The fixture model folder, or empty when it is absent.
inline std::filesystem::path oracle_model_folder() {
  const std::filesystem::path folder = ::cubeforge::testing::oracle_dir();
  return std::filesystem::exists(folder / "shape_gpt.safetensors") ? folder : std::filesystem::path();
}

}  // namespace cubeforge::app::testing
