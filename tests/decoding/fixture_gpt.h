// The reference fixture's GPT with its codebook installed, its CPU backend,
// and each case's condition rows, for the decoding tests.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "inference/backend/token_backend.h"
#include "inference/cpu_backend/cpu_token_backend.h"
#include "inference/model/gpt.h"
#include "tests/support/oracle.h"

namespace cubeforge::testing {

struct FixtureCase {
  std::string name;              // cfg_bbox | cfg | nocfg
  std::vector<float> cond, uncond;  // uncond empty without guidance
  float guidance = 0.f;
};

class FixtureGpt : public ::testing::Test {
 protected:
  // `config_change` edits the configuration before loading (a block-diffusion
  // variant of the same tensors).
  void load(void (*config_change)(GptConfig&) = nullptr) {
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok()) << expected.error().to_string();
    expected_ = std::move(*expected);
    auto yaml = parse_model_config_yaml(oracle_dir() / "config.yaml");
    ASSERT_TRUE(yaml.ok()) << yaml.error().to_string();
    GptConfig config = yaml->gpt;
    if (config_change) config_change(config);
    auto model = DualStreamGpt::load(oracle_dir() / "shape_gpt.safetensors", &config);
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_.emplace(std::move(*model));
    auto codebook = expected_.read_f32("decode.codebook");
    ASSERT_TRUE(codebook.ok());
    ASSERT_TRUE(model_->install_codebook(*codebook).ok());
    backend_ = make_cpu_token_backend(*model_);
  }

  // The CPU backend's decoding session for case `c` (through the seam the
  // strategies run over in decode_tokens); null, with a failure, if refused.
  std::unique_ptr<DecodingSession> open_decoding_session(const FixtureCase& c, int positions, AttentionMode attention,
                                                         DecodingMode decoding) {
    DecodingSessionOptions options;
    options.decoding = decoding;
    options.attention = attention;
    options.positions = positions;
    auto session = backend_->open_decoding_session(options, c.cond, c.uncond);
    EXPECT_TRUE(session.ok()) << session.error().to_string();
    return session.ok() ? std::move(*session) : nullptr;
  }

  std::vector<FixtureCase> cases() {
    std::vector<FixtureCase> found;
    for (const char* name : {"cfg_bbox", "cfg", "nocfg"}) {
      if (!expected_.contains(std::string(name) + ".cond")) continue;
      FixtureCase c;
      c.name = name;
      const bool guided = std::string(name) != "nocfg";
      std::vector<float> bbox;
      if (c.name == "cfg_bbox") bbox = *expected_.read_f32("bbox");
      c.cond = *model_->project_condition(*expected_.read_f32("text_embed"), bbox.empty() ? nullptr : bbox.data());
      if (guided) {
        c.uncond = *model_->project_condition(*expected_.read_f32("uncond_text_embed"), nullptr);
        c.guidance = 3.0f;
      }
      found.push_back(std::move(c));
    }
    return found;
  }

  // Tokens per shape of the fixture: how many a test decodes.
  static int shape_tokens() { return oracle_facts().shape_tokens; }

  std::vector<int> fixture_tokens(const std::string& name) {
    auto t = expected_.read_i64(name);
    EXPECT_TRUE(t.ok()) << name;
    return t.ok() ? std::vector<int>(t->begin(), t->end()) : std::vector<int>{};
  }

  SafetensorsFile expected_;
  std::optional<DualStreamGpt> model_;
  std::shared_ptr<TokenBackend> backend_;
};

}  // namespace cubeforge::testing
