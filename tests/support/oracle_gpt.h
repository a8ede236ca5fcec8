// The reference fixture's GPT, loaded as the reference ran it (its
// config.yaml when present, else the configuration the weights imply) with
// the reference's codebook installed, and readers of its expected tensors.
// Test fixtures of any backend mix it in.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "inference/model/config.h"
#include "inference/model/gpt.h"
#include "inference/tensor/safetensors.h"
#include "tests/support/oracle.h"

namespace cubeforge::testing {

class OracleGpt {
 protected:
  // Loads expected_ and model_; a failure fails the test (wrap the call in
  // ASSERT_NO_FATAL_FAILURE). Call after CUBEFORGE_REQUIRE_ORACLE().
  void load_oracle_gpt() {
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok()) << expected.error().to_string();
    expected_ = std::move(*expected);
    std::optional<ModelConfig> yaml;
    if (std::filesystem::exists(oracle_dir() / "config.yaml")) {
      auto parsed = parse_model_config_yaml(oracle_dir() / "config.yaml");
      ASSERT_TRUE(parsed.ok()) << parsed.error().to_string();
      yaml = *parsed;
    }
    auto model = DualStreamGpt::load(oracle_dir() / "shape_gpt.safetensors", yaml ? &yaml->gpt : nullptr);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
    auto codebook = expected_.read_f32("decode.codebook");
    ASSERT_TRUE(codebook.ok()) << codebook.error().to_string();
    ASSERT_TRUE(model_->install_codebook(*codebook).ok());
  }

  std::vector<float> tensor(const std::string& name) {
    auto t = expected_.read_f32(name);
    EXPECT_TRUE(t.ok()) << t.error().to_string();
    return t.ok() ? *t : std::vector<float>{};
  }
  std::vector<int> ids(const std::string& name) {
    auto t = expected_.read_i64(name);
    EXPECT_TRUE(t.ok()) << t.error().to_string();
    return t.ok() ? std::vector<int>(t->begin(), t->end()) : std::vector<int>{};
  }
  // The generation cases the fixture has, of cfg_bbox, cfg and nocfg.
  std::vector<std::string> cases() {
    std::vector<std::string> found;
    for (const char* name : {"cfg_bbox", "cfg", "nocfg"})
      if (expected_.contains(std::string(name) + ".cond")) found.push_back(name);
    return found;
  }

  SafetensorsFile expected_;
  std::optional<DualStreamGpt> model_;
};

}  // namespace cubeforge::testing
