// CLIP text encoder against the oracle: last_hidden_state of Hugging Face's
// CLIPTextModel (float32, PyTorch) for the prompts of expected_tokens.json.
#include "inference/text/clip_text_encoder.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include "inference/core/file_io.h"
#include "inference/text/clip_tokenizer.h"
#include "inference/tensor/safetensors.h"
#include "inference/tensor/trace_file.h"
#include "tests/support/hostile_numbers.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

std::vector<std::string> prompts_of(const std::string& expected_tokens_json) {
  std::vector<std::string> prompts;
  for (const nlohmann::json& c : nlohmann::json::parse(expected_tokens_json)) prompts.push_back(c.at("prompt"));
  return prompts;
}

double relative_error(const float* actual, const float* expected, size_t count) {
  double difference = 0.0, reference = 0.0;
  for (size_t i = 0; i < count; ++i) {
    difference += (double(actual[i]) - expected[i]) * (double(actual[i]) - expected[i]);
    reference += double(expected[i]) * expected[i];
  }
  return std::sqrt(difference / reference);
}

TEST(ClipTextEncoder, MatchesHuggingFaceLastHiddenState) {
  SKIP_WITHOUT_CLIP_ORACLE("expected_hidden_states.safetensors");
  const auto clip_dir = testing::oracle_clip_dir();
  auto tokenizer = ClipTokenizer::load(clip_dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  auto encoder = ClipTextEncoder::load(clip_dir);
  ASSERT_TRUE(encoder.ok()) << encoder.error().to_string();
  auto expected_file = SafetensorsFile::open(clip_dir / "expected_hidden_states.safetensors");
  ASSERT_TRUE(expected_file.ok()) << expected_file.error().to_string();
  auto expected_text = read_file_text(clip_dir / "expected_tokens.json");
  ASSERT_TRUE(expected_text.ok()) << expected_text.error().to_string();

  auto input_ids = expected_file->read_i64("input_ids");
  auto attention_mask = expected_file->read_i64("attention_mask");
  auto hidden_states = expected_file->read_f32("last_hidden_state");
  ASSERT_TRUE(input_ids.ok() && attention_mask.ok() && hidden_states.ok());
  auto hidden_view = expected_file->get("last_hidden_state");
  ASSERT_TRUE(hidden_view.ok());
  const std::vector<int64_t>& shape = hidden_view->shape();
  ASSERT_EQ(shape.size(), 3u);
  const size_t prompts = size_t(shape[0]), tokens = size_t(shape[1]), hidden = size_t(shape[2]);
  ASSERT_EQ(tokens, size_t(kClipContextLength));
  ASSERT_EQ(int(hidden), encoder->hidden_size());

  // The prompts are the ones of expected_tokens.json, in order; our tokenizer
  // must give the stored ids, and the encoder the stored states.
  const auto cases = prompts_of(expected_text.value());
  ASSERT_EQ(cases.size(), prompts);
  std::vector<TokenizedText> batch;
  for (size_t p = 0; p < prompts; ++p) {
    TokenizedText tokens_of_prompt = tokenizer->encode(cases[p]);
    for (size_t t = 0; t < tokens; ++t) {
      ASSERT_EQ(tokens_of_prompt.input_ids[t], input_ids.value()[p * tokens + t]) << "prompt " << p << " token " << t;
      ASSERT_EQ(tokens_of_prompt.attention_mask[t], attention_mask.value()[p * tokens + t]) << "prompt " << p;
    }
    batch.push_back(std::move(tokens_of_prompt));
  }

  auto batched = encoder->encode_batch(batch);
  ASSERT_TRUE(batched.ok()) << batched.error().to_string();
  ASSERT_EQ(batched->size(), prompts * tokens * hidden);
  for (size_t p = 0; p < prompts; ++p) {
    const float* expected = hidden_states.value().data() + p * tokens * hidden;
    const double batch_error = relative_error(batched->data() + p * tokens * hidden, expected, tokens * hidden);
    EXPECT_LT(batch_error, 1e-4) << "prompt " << p << " \"" << cases[p] << "\" (batched)";

    auto single = encoder->encode(batch[p]);
    ASSERT_TRUE(single.ok()) << single.error().to_string();
    const double single_error = relative_error(single->data(), expected, tokens * hidden);
    EXPECT_LT(single_error, 1e-4) << "prompt " << p << " \"" << cases[p] << "\" (alone)";
    std::printf("prompt %zu: relative error %.2e batched, %.2e alone; token 3 starts %.5f %.5f (expected %.5f %.5f)\n",
                p, batch_error, single_error, (*single)[3 * hidden], (*single)[3 * hidden + 1], expected[3 * hidden],
                expected[3 * hidden + 1]);
  }
}

TEST(ClipTextEncoder, TraceNamesEveryLayerAndEndsInTheReferenceState) {
  SKIP_WITHOUT_CLIP_ORACLE("expected_hidden_states.safetensors");
  const auto clip_dir = testing::oracle_clip_dir();
  auto tokenizer = ClipTokenizer::load(clip_dir);
  auto encoder = ClipTextEncoder::load(clip_dir);
  auto expected_file = SafetensorsFile::open(clip_dir / "expected_hidden_states.safetensors");
  auto expected_text = read_file_text(clip_dir / "expected_tokens.json");
  ASSERT_TRUE(tokenizer.ok() && encoder.ok() && expected_file.ok() && expected_text.ok());
  auto hidden_states = expected_file->read_f32("last_hidden_state");
  ASSERT_TRUE(hidden_states.ok());
  const auto cases = prompts_of(expected_text.value());
  const TokenizedText tokens = tokenizer->encode(cases.front());

  TraceRecorder trace;
  auto traced = encoder->encode(tokens, &trace);
  auto plain = encoder->encode(tokens);
  ASSERT_TRUE(traced.ok() && plain.ok());
  EXPECT_EQ(*traced, *plain);  // bit for bit

  const ClipTextConfig& c = encoder->config();
  const int64_t T = kClipContextLength, C = c.hidden_size;
  std::vector<std::pair<std::string, std::vector<int64_t>>> expected = {{"clip.embeddings", {1, T, C}}};
  for (int i = 0; i < c.num_hidden_layers; ++i)
    for (const char* point : {"ln_1", "q", "k", "v", "attn", "attn_residual", "ln_2", "mlp_hidden", "out"})
      expected.push_back({"clip." + std::to_string(i) + "." + point,
                          std::string(point) == "mlp_hidden" ? std::vector<int64_t>{1, T, c.intermediate_size}
                                                             : std::vector<int64_t>{1, T, C}});
  expected.push_back({"clip.last_hidden_state", {1, T, C}});
  ASSERT_EQ(trace.tensors().size(), expected.size());
  for (size_t i = 0; i < expected.size(); ++i) {
    EXPECT_EQ(trace.tensors()[i].name, expected[i].first);
    EXPECT_EQ(trace.tensors()[i].shape, expected[i].second) << expected[i].first;
  }
  const TraceRecorder::Tensor* last = trace.find("clip.last_hidden_state");
  ASSERT_NE(last, nullptr);
  const float* last_values = reinterpret_cast<const float*>(last->data.data());
  EXPECT_LT(relative_error(last_values, hidden_states->data(), size_t(T * C)), 1e-4);
}

// Writes copies of the oracle CLIP weights with changes: other dtypes, and
// missing or misshapen tensors.
class WeightVariants : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() / ("cubeforge_clip_test_" + std::to_string(getpid()));
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // Copies model.safetensors without `dropped` (and with `reshaped` given a
  // flattened shape), returning the new file's path.
  std::filesystem::path write_variant(const SafetensorsFile& source, const std::string& dropped,
                                      const std::string& reshaped) {
    std::vector<TensorToWrite> tensors;
    for (const TensorEntry& entry : source.entries()) {
      if (entry.name == dropped) continue;
      auto view = source.get(entry.name);
      TensorToWrite tensor{entry.name, entry.dtype, entry.shape,
                           std::span<const std::byte>(view->data, view->byte_size())};
      if (entry.name == reshaped) tensor.shape = {entry.element_count()};
      tensors.push_back(tensor);
    }
    const auto path = directory_ / "model.safetensors";
    EXPECT_TRUE(write_safetensors(path, tensors).ok());
    return path;
  }

  std::filesystem::path directory_;
};

TEST_F(WeightVariants, ErrorsNameTheFileAndTensor) {
  SKIP_WITHOUT_CLIP_ORACLE("model.safetensors");
  const auto clip_dir = testing::oracle_clip_dir();
  auto source = SafetensorsFile::open(clip_dir / "model.safetensors");
  ASSERT_TRUE(source.ok()) << source.error().to_string();
  auto config_text = read_file_text(clip_dir / "config.json");
  ASSERT_TRUE(config_text.ok());
  auto config = ClipTextConfig::from_json(config_text.value(), "config.json");
  ASSERT_TRUE(config.ok()) << config.error().to_string();

  const std::string missing = "text_model.encoder.layers.1.mlp.fc2.bias";
  {
    auto file = SafetensorsFile::open(write_variant(source.value(), missing, ""));
    ASSERT_TRUE(file.ok());
    auto encoder = ClipTextEncoder::from_safetensors(std::make_shared<const SafetensorsFile>(std::move(*file)),
                                                     config.value());
    ASSERT_FALSE(encoder.ok());
    EXPECT_NE(encoder.error().message.find(missing), std::string::npos) << encoder.error().message;
    EXPECT_NE(encoder.error().message.find("model.safetensors"), std::string::npos) << encoder.error().message;
  }
  const std::string reshaped = "text_model.encoder.layers.0.self_attn.k_proj.weight";
  {
    auto file = SafetensorsFile::open(write_variant(source.value(), "", reshaped));
    ASSERT_TRUE(file.ok());
    auto encoder = ClipTextEncoder::from_safetensors(std::make_shared<const SafetensorsFile>(std::move(*file)),
                                                     config.value());
    ASSERT_FALSE(encoder.ok());
    EXPECT_NE(encoder.error().message.find(reshaped), std::string::npos) << encoder.error().message;
  }
  {
    ClipTextConfig wrong = config.value();
    wrong.intermediate_size += 1;
    auto encoder = ClipTextEncoder::from_safetensors(
        std::make_shared<const SafetensorsFile>(std::move(source.value())), wrong);
    ASSERT_FALSE(encoder.ok());
    EXPECT_NE(encoder.error().message.find("mlp.fc1.weight"), std::string::npos) << encoder.error().message;
  }
}

TEST_F(WeightVariants, Float32CopyGivesIdenticalStates) {
  SKIP_WITHOUT_CLIP_ORACLE("model.safetensors");
  const auto clip_dir = testing::oracle_clip_dir();
  auto source = SafetensorsFile::open(clip_dir / "model.safetensors");
  ASSERT_TRUE(source.ok()) << source.error().to_string();
  // Widening F16/BF16 to F32 is exact, so the F32 file must give the same bits.
  std::vector<std::vector<float>> widened;
  std::vector<TensorToWrite> tensors;
  for (const TensorEntry& entry : source->entries()) {
    auto values = source->read_f32(entry.name);
    ASSERT_TRUE(values.ok());
    widened.push_back(std::move(values.value()));
    const std::vector<float>& data = widened.back();
    tensors.push_back({entry.name, DType::kF32, entry.shape,
                       std::span<const std::byte>(reinterpret_cast<const std::byte*>(data.data()), data.size() * 4)});
  }
  const auto path = directory_ / "model_f32.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors).ok());
  auto config_text = read_file_text(clip_dir / "config.json");
  ASSERT_TRUE(config_text.ok());
  auto config = ClipTextConfig::from_json(config_text.value(), "config.json");
  ASSERT_TRUE(config.ok());
  auto f32_file = SafetensorsFile::open(path);
  ASSERT_TRUE(f32_file.ok());
  auto from_f32 =
      ClipTextEncoder::from_safetensors(std::make_shared<const SafetensorsFile>(std::move(*f32_file)), config.value());
  auto from_source = ClipTextEncoder::load(clip_dir);
  ASSERT_TRUE(from_f32.ok()) << from_f32.error().to_string();
  ASSERT_TRUE(from_source.ok()) << from_source.error().to_string();

  auto tokenizer = ClipTokenizer::load(clip_dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  const TokenizedText tokens = tokenizer->encode("a red car");
  auto a = from_f32->encode(tokens);
  auto b = from_source->encode(tokens);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a.value(), b.value());
}

TEST(ClipTextConfig, ReadsTextConfigWithDefaultsAndRejectsBadValues) {
  auto config = ClipTextConfig::from_json(
      R"({"text_config": {"hidden_size": 768, "num_attention_heads": 12, "hidden_act": "gelu"}})", "config.json");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  EXPECT_EQ(config->hidden_size, 768);
  EXPECT_EQ(config->num_attention_heads, 12);
  EXPECT_EQ(config->intermediate_size, 2048);  // Hugging Face's default
  EXPECT_EQ(config->num_hidden_layers, 12);
  EXPECT_EQ(config->hidden_act, ClipActivation::kGelu);

  auto bad_act = ClipTextConfig::from_json(R"({"text_config": {"hidden_act": "relu"}})", "my_config.json");
  ASSERT_FALSE(bad_act.ok());
  EXPECT_NE(bad_act.error().message.find("my_config.json"), std::string::npos);
  EXPECT_NE(bad_act.error().message.find("relu"), std::string::npos);

  auto bad_heads = ClipTextConfig::from_json(R"({"text_config": {"hidden_size": 50, "num_attention_heads": 8}})",
                                             "config.json");
  EXPECT_FALSE(bad_heads.ok());
  EXPECT_FALSE(ClipTextConfig::from_json("[1,2", "config.json").ok());

  // Strict JSON: nesting bounded, keys once.
  auto deep = ClipTextConfig::from_json(
      "{\"text_config\": {\"vocab_size\": " + std::string(100000, '[') + std::string(100000, ']') + "}}", "config.json");
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("nested more than 64 levels deep (in text_config.vocab_size"), std::string::npos)
      << deep.error().message;
  auto twice = ClipTextConfig::from_json(R"({"text_config": {"hidden_size": 768, "hidden_size": 64}})", "config.json");
  ASSERT_FALSE(twice.ok());
  EXPECT_NE(twice.error().message.find("key 'hidden_size' appears twice in text_config"), std::string::npos)
      << twice.error().message;
  // A long value is shown cut short.
  auto long_value = ClipTextConfig::from_json("{\"vocab_size\": \"" + std::string(100000, 'x') + "\"}", "config.json");
  ASSERT_FALSE(long_value.ok());
  EXPECT_LT(long_value.error().message.size(), 300u);
}

// A configuration claiming 2^24 layers allocated gigabytes of empty layers
// before the first tensor was looked for; the file bounds the claim.
TEST_F(WeightVariants, ALayerCountBeyondTheFileIsRefusedBeforeAllocating) {
  SKIP_WITHOUT_CLIP_ORACLE("model.safetensors");
  const auto clip_dir = testing::oracle_clip_dir();
  auto source = SafetensorsFile::open(clip_dir / "model.safetensors");
  ASSERT_TRUE(source.ok());
  auto config = read_file_text(clip_dir / "config.json");
  ASSERT_TRUE(config.ok());
  auto claimed = ClipTextConfig::from_json(*config, "config.json");
  ASSERT_TRUE(claimed.ok());
  claimed->num_hidden_layers = 1 << 24;
  auto encoder = ClipTextEncoder::from_safetensors(std::make_shared<const SafetensorsFile>(std::move(*source)), *claimed);
  ASSERT_FALSE(encoder.ok());
  EXPECT_NE(encoder.error().message.find("num_hidden_layers = 16777216 but"), std::string::npos)
      << encoder.error().message;
}

// Found by fuzzing: "layer_norm_eps": 1e-0256 is a positive double and 0 as
// the float the encoder adds to a variance. Every number is checked as kept.
TEST(ClipTextConfig, NumbersAreCheckedAfterNarrowing) {
  const std::string builtin = R"({"text_config": {"vocab_size": 727, "hidden_size": 96, "intermediate_size": 384,
      "num_attention_heads": 4, "num_hidden_layers": 2, "max_position_embeddings": 77, "layer_norm_eps": EPS}})";
  auto with = [&](const std::string& key, const std::string& value) {
    std::string text = builtin;
    if (key == "layer_norm_eps") return text.replace(text.find("EPS"), 3, value);
    text.replace(text.find("EPS"), 3, "1e-05");
    const size_t at = text.find("\"" + key + "\": ") + key.size() + 4;
    return text.replace(at, text.find_first_of(",}", at) - at, value);
  };
  auto fine = ClipTextConfig::from_json(with("layer_norm_eps", "1e-05"), "clip/config.json");
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  EXPECT_EQ(fine->layer_norm_eps, 1e-5f);
  for (const auto& number : testing::not_positive_normal_floats()) {
    auto config = ClipTextConfig::from_json(with("layer_norm_eps", number.text), "clip/config.json");
    ASSERT_FALSE(config.ok()) << number.text;
    EXPECT_NE(config.error().message.find("clip/config.json"), std::string::npos) << config.error().message;
    if (!number.json) continue;  // not JSON: the file is refused as such
    EXPECT_NE(config.error().message.find("text_config.layer_norm_eps = "), std::string::npos)
        << config.error().message;
    EXPECT_NE(config.error().message.find(number.reason), std::string::npos) << config.error().message;
  }
  for (const char* key : {"vocab_size", "hidden_size", "num_attention_heads", "max_position_embeddings"})
    for (const auto& number : testing::not_whole_numbers_that_fit()) {
      auto config = ClipTextConfig::from_json(with(key, number.text), "clip/config.json");
      ASSERT_FALSE(config.ok()) << key << " = " << number.text;
      if (number.json) {
        EXPECT_NE(config.error().message.find(std::string("text_config.") + key), std::string::npos)
            << config.error().message;
      }
    }
}

TEST(ClipTextEncoder, RejectsMalformedTokens) {
  SKIP_WITHOUT_CLIP_ORACLE("model.safetensors");
  auto encoder = ClipTextEncoder::load(testing::oracle_clip_dir());
  ASSERT_TRUE(encoder.ok()) << encoder.error().to_string();
  auto tokenizer = ClipTokenizer::load(testing::oracle_clip_dir());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  // The empty prompt: start, end, then padding (end) unattended.
  const TokenizedText tokens = tokenizer->encode("");
  EXPECT_TRUE(encoder->encode(tokens).ok());

  auto config_text = read_file_text(testing::oracle_clip_dir() / "config.json");
  ASSERT_TRUE(config_text.ok());
  auto config = ClipTextConfig::from_json(config_text.value(), "config.json");
  ASSERT_TRUE(config.ok()) << config.error().to_string();
  TokenizedText out_of_vocabulary = tokens;
  out_of_vocabulary.input_ids[3] = config->vocab_size;
  EXPECT_FALSE(encoder->encode(out_of_vocabulary).ok());

  TokenizedText too_long = tokens;
  too_long.input_ids.push_back(1);
  too_long.attention_mask.push_back(1);
  EXPECT_FALSE(encoder->encode(too_long).ok());

  TokenizedText unattended_start = tokens;
  unattended_start.attention_mask[0] = 0;
  EXPECT_FALSE(encoder->encode(unattended_start).ok());

  TokenizedText mask_with_hole = tokens;
  mask_with_hole.attention_mask[3] = 1;  // ones, a zero, then a one again
  auto rejected = encoder->encode(mask_with_hole);
  ASSERT_FALSE(rejected.ok());
  EXPECT_NE(rejected.error().message.find("attention_mask"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
