// Shared helpers for tests that compare against the reference fixtures.
#pragma once

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <span>
#include <string>

#include <nlohmann/json.hpp>

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

// What a fixture folder says of itself in its meta.json, so a test expects
// what the folder holds rather than what one fixture happens to hold.
struct OracleFacts {
  int shape_tokens = 0;  // tokens per shape (the GPT's sequence length)
  int codes = 0;         // V: shape codes; the vocabulary is V + 3
  int bos_id = 0, eos_id = 0, padding_id = 0;
  std::string prompt;                      // the prompt the cases were recorded for
  bool decoded_field_has_surface = false;  // its guided tokens' occupancy crosses zero
};

// The facts of oracle_dir(); every field zero when meta.json is missing or unreadable.
inline OracleFacts oracle_facts() {
  OracleFacts facts;
  std::ifstream in(oracle_dir() / "meta.json");
  const auto meta = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (!meta.is_object()) return facts;
  facts.shape_tokens = meta.value("tokens", 0);
  facts.codes = meta.value("num_codes", 0);
  facts.bos_id = meta.value("bos_id", 0);
  facts.eos_id = meta.value("eos_id", 0);
  facts.padding_id = meta.value("padding_id", 0);
  facts.prompt = meta.value("prompt", "");
  facts.decoded_field_has_surface = meta.value("decode.has_surface", false);
  return facts;
}

// The fixture CLIP vocabulary's id of `token` (as written in vocab.json, e.g.
// "a</w>"), or -1 when it has none; and its size.
inline const nlohmann::json& oracle_clip_vocabulary() {
  static const nlohmann::json vocabulary = [] {
    std::ifstream in(oracle_clip_dir() / "vocab.json");
    auto parsed = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    return parsed.is_object() ? parsed : nlohmann::json::object();
  }();
  return vocabulary;
}
inline int oracle_clip_token_id(const std::string& token) {
  const auto& vocabulary = oracle_clip_vocabulary();
  const auto found = vocabulary.find(token);
  return found != vocabulary.end() && found->is_number_integer() ? found->get<int>() : -1;
}
inline int oracle_clip_vocabulary_size() { return int(oracle_clip_vocabulary().size()); }

// Blocks of 8 positions when the fixture's shapes split into them, else one
// block of the whole shape.
inline int oracle_block_size() {
  const int tokens = oracle_facts().shape_tokens;
  return tokens % 8 == 0 ? 8 : tokens;
}

// Makes `folder` the fixture's model with `gpt_lines` (YAML indented by two)
// added to its config's gpt_model section; the fixture's files are linked.
// False when the config cannot be read or the folder written.
inline bool make_oracle_model_variant(const std::filesystem::path& folder, const std::string& gpt_lines) {
  std::error_code error;
  std::filesystem::create_directories(folder, error);
  std::filesystem::create_directory_symlink(oracle_dir() / "clip", folder / "clip", error);
  if (error) return false;
  for (const char* file : {"shape_gpt.safetensors", "shape_tokenizer.safetensors"}) {
    std::filesystem::create_symlink(oracle_dir() / file, folder / file, error);
    if (error) return false;
  }
  std::ifstream in(oracle_dir() / "config.yaml");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string section = "gpt_model:\n";
  const size_t at = config.find(section);
  if (at == std::string::npos) return false;
  config.insert(at + section.size(), gpt_lines);
  std::ofstream out(folder / "config.yaml");
  out << config;
  return bool(out.flush());
}

// Makes `folder` the fixture's model read as a block-diffusion model (blocks
// of oracle_block_size(), the padding token's row as the mask, as
// tools/train/diffusion.py makes it): its config gains a block_diffusion
// section. Its tokens mean nothing; the decoding rules are what a test
// measures.
inline bool make_oracle_block_diffusion_model(const std::filesystem::path& folder) {
  return make_oracle_model_variant(folder, "  block_diffusion:\n    block_size: " +
                                               std::to_string(oracle_block_size()) + "\n    mask_token_id: " +
                                               std::to_string(oracle_facts().padding_id) + "\n");
}

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
