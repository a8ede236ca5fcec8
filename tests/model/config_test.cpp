// Model configuration: YAML and inference agree on the fixture; a YAML or a
// tensor file that disagrees is an error that says where.
#include <gtest/gtest.h>

#include <sys/stat.h>

#include <chrono>
#include <fstream>

#include "inference/core/file_io.h"
#include "inference/decoding/decoding.h"
#include "inference/model/config.h"
#include "inference/model/gpt.h"
#include "inference/model/shape_tokenizer.h"
#include "tests/support/hostile_files.h"
#include "tests/support/hostile_numbers.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

std::filesystem::path temp_dir() {
  auto dir = std::filesystem::temp_directory_path() / ("cubeforge-config-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

TEST(ModelConfig, YamlMatchesInferredSizes) {
  CUBEFORGE_REQUIRE_ORACLE();
  if (!std::filesystem::exists(oracle_dir() / "config.yaml")) GTEST_SKIP() << "fixture has no config.yaml";
  auto yaml = parse_model_config_yaml(oracle_dir() / "config.yaml");
  ASSERT_TRUE(yaml.ok()) << yaml.error().to_string();
  auto gpt_file = SafetensorsFile::open(oracle_dir() / "shape_gpt.safetensors");
  ASSERT_TRUE(gpt_file.ok());
  auto inferred = infer_gpt_config(*gpt_file);
  ASSERT_TRUE(inferred.ok()) << inferred.error().to_string();
  EXPECT_EQ(inferred->width, yaml->gpt.width);
  EXPECT_EQ(inferred->heads, yaml->gpt.heads);
  EXPECT_EQ(inferred->dual_layers, yaml->gpt.dual_layers);
  EXPECT_EQ(inferred->single_layers, yaml->gpt.single_layers);
  EXPECT_EQ(inferred->codes, yaml->gpt.codes);
  EXPECT_EQ(inferred->text_width, yaml->gpt.text_width);
  EXPECT_EQ(inferred->use_bbox, yaml->gpt.use_bbox);
  EXPECT_TRUE(check_gpt_config(yaml->gpt, *gpt_file, "config.yaml").ok());
  auto shape_file = SafetensorsFile::open(oracle_dir() / "shape_tokenizer.safetensors");
  ASSERT_TRUE(shape_file.ok());
  auto shape = infer_shape_config(*shape_file);
  ASSERT_TRUE(shape.ok()) << shape.error().to_string();
  EXPECT_EQ(shape->latents, yaml->shape.latents);
  EXPECT_EQ(shape->heads, yaml->shape.heads);
  EXPECT_EQ(shape->num_freqs, yaml->shape.num_freqs);
  EXPECT_EQ(shape->point_feats, yaml->shape.point_feats);
  Status check = check_shape_config(yaml->shape, *shape_file, "config.yaml");
  EXPECT_TRUE(check.ok()) << check.error().to_string();
}

TEST(ModelConfig, DisagreeingYamlNamesTheKey) {
  CUBEFORGE_REQUIRE_ORACLE();
  if (!std::filesystem::exists(oracle_dir() / "config.yaml")) GTEST_SKIP() << "fixture has no config.yaml";
  auto yaml = parse_model_config_yaml(oracle_dir() / "config.yaml");
  ASSERT_TRUE(yaml.ok());
  auto gpt_file = SafetensorsFile::open(oracle_dir() / "shape_gpt.safetensors");
  ASSERT_TRUE(gpt_file.ok());
  GptConfig wrong = yaml->gpt;
  wrong.dual_layers += 1;
  Status s = check_gpt_config(wrong, *gpt_file, "config.yaml");
  ASSERT_FALSE(s.ok());
  EXPECT_NE(s.error().message.find("gpt_model.n_layer"), std::string::npos) << s.error().message;
}

TEST(ModelConfig, MalformedYamlIsAClearError) {
  auto dir = temp_dir();
  ASSERT_TRUE(write_file_atomically(dir / "bad.yaml", std::string_view("gpt_model: [unclosed")).ok());
  auto parsed = parse_model_config_yaml(dir / "bad.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("bad.yaml"), std::string::npos);
  ASSERT_TRUE(write_file_atomically(dir / "missing.yaml", std::string_view("gpt_model:\n  n_head: 4\nshape_model:\n  width: 8\n")).ok());
  parsed = parse_model_config_yaml(dir / "missing.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("gpt_model.n_layer"), std::string::npos) << parsed.error().message;
  std::filesystem::remove_all(dir);
}

// gpt_model.block_diffusion marks a block-diffusion model; without it a model
// is autoregressive. Its mask token must be one of the special tokens.
// A small config.yaml whose gpt_model section ends in `gpt_tail`.
std::string small_config(const std::string& gpt_tail) {
  return "gpt_model:\n  n_layer: 2\n  n_head: 2\n  n_embd: 8\n  shape_model_vocab_size: 16\n"
         "  shape_model_embed_dim: 4\n  text_model_embed_dim: 8\n" +
         gpt_tail +
         "shape_model:\n  num_encoder_latents: 8\n  embed_dim: 4\n  width: 8\n  num_heads: 2\n  num_freqs: 4\n"
         "  num_encoder_layers: 1\n  num_decoder_layers: 1\n  num_codes: 16\n";
}

TEST(ModelConfig, BlockDiffusionSection) {
  auto dir = temp_dir();
  auto parse = [&](const std::string& diffusion) {
    EXPECT_TRUE(write_file_atomically(dir / "config.yaml", std::string_view(small_config(diffusion))).ok());
    return parse_model_config_yaml(dir / "config.yaml");
  };
  auto autoregressive = parse("");
  ASSERT_TRUE(autoregressive.ok()) << autoregressive.error().to_string();
  EXPECT_FALSE(autoregressive->gpt.block_diffusion());
  auto diffusion = parse("  block_diffusion:\n    block_size: 8\n    mask_token_id: 18\n");
  ASSERT_TRUE(diffusion.ok()) << diffusion.error().to_string();
  EXPECT_TRUE(diffusion->gpt.block_diffusion());
  EXPECT_EQ(diffusion->gpt.diffusion_block_size, 8);
  EXPECT_EQ(diffusion->gpt.mask_token_id, 18);
  auto code_as_mask = parse("  block_diffusion:\n    block_size: 8\n    mask_token_id: 3\n");
  ASSERT_FALSE(code_as_mask.ok());
  EXPECT_NE(code_as_mask.error().message.find("mask_token_id"), std::string::npos) << code_as_mask.error().message;
  auto no_size = parse("  block_diffusion:\n    mask_token_id: 18\n");
  ASSERT_FALSE(no_size.ok());
  EXPECT_NE(no_size.error().message.find("block_diffusion.block_size"), std::string::npos);
  std::filesystem::remove_all(dir);
}

// A block-diffusion folder may name the confidence threshold it decodes at by
// default; decoding options that leave the threshold to the model take it,
// and without one the engine's default.
TEST(ModelConfig, BlockDiffusionThresholdIsTheModelsDefault) {
  auto dir = temp_dir();
  auto parse = [&](const std::string& threshold) {
    const std::string config = small_config("  block_diffusion:\n    block_size: 8\n    mask_token_id: 18\n" + threshold);
    EXPECT_TRUE(write_file_atomically(dir / "config.yaml", std::string_view(config)).ok());
    return parse_model_config_yaml(dir / "config.yaml");
  };
  auto unnamed = parse("");
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().to_string();
  EXPECT_EQ(unnamed->gpt.diffusion_threshold, 0.f);
  EXPECT_EQ(diffusion_options_for_model({}, unnamed->gpt).threshold, kDefaultDiffusionThreshold);

  auto named = parse("    threshold: 0.55\n");
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(named->gpt.diffusion_threshold, 0.55f);
  EXPECT_EQ(diffusion_options_for_model({}, named->gpt).threshold, 0.55f);
  DiffusionOptions asked;
  asked.threshold = 0.8f;
  EXPECT_EQ(diffusion_options_for_model(asked, named->gpt).threshold, 0.8f) << "a threshold asked for stays";

  for (const char* bad : {"0", "1.5", "-0.2", "high", "[0.5]"}) {
    auto refused = parse(std::string("    threshold: ") + bad + "\n");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("block_diffusion.threshold"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("config.yaml"), std::string::npos) << refused.error().message;
  }
  std::filesystem::remove_all(dir);
}

// A folder may name the guidance scale it draws best at; a scale left to the
// model takes it, and without one the reference's.
TEST(ModelConfig, GuidanceScaleIsTheModelsDefault) {
  auto dir = temp_dir();
  auto parse = [&](const std::string& lines) {
    EXPECT_TRUE(write_file_atomically(dir / "config.yaml", std::string_view(small_config(lines))).ok());
    return parse_model_config_yaml(dir / "config.yaml");
  };
  auto unnamed = parse("");
  ASSERT_TRUE(unnamed.ok()) << unnamed.error().to_string();
  EXPECT_FALSE(unnamed->gpt.guidance_scale);
  EXPECT_EQ(guidance_for_model(kModelGuidance, unnamed->gpt), kReferenceGuidance);

  auto named = parse("  guidance_scale: 2.0\n");
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  EXPECT_EQ(named->gpt.guidance_scale, 2.0f);
  EXPECT_EQ(guidance_for_model(kModelGuidance, named->gpt), 2.0f);
  EXPECT_EQ(guidance_for_model(4.5f, named->gpt), 4.5f) << "a scale asked for stays";
  EXPECT_EQ(guidance_for_model(0.f, named->gpt), 0.f) << "guidance turned off stays off";
  auto unguided = parse("  guidance_scale: 0\n");
  ASSERT_TRUE(unguided.ok()) << unguided.error().to_string();
  EXPECT_EQ(guidance_for_model(kModelGuidance, unguided->gpt), 0.f) << "a model may decode unguided by default";

  for (const char* bad : {"-1", "101", "nan", "strong", "[2]"}) {
    auto refused = parse(std::string("  guidance_scale: ") + bad + "\n");
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("gpt_model.guidance_scale"), std::string::npos) << refused.error().message;
    EXPECT_NE(refused.error().message.find("config.yaml"), std::string::npos) << refused.error().message;
  }
  std::filesystem::remove_all(dir);
}

TEST(ModelConfig, MissingAndUnexpectedTensorsAreListed) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto gpt_file = SafetensorsFile::open(oracle_dir() / "shape_gpt.safetensors");
  ASSERT_TRUE(gpt_file.ok());
  auto config = infer_gpt_config(*gpt_file);
  ASSERT_TRUE(config.ok());
  // Rewrite the file without lm_head and with a stray tensor.
  std::vector<TensorToWrite> tensors;
  std::vector<float> stray(4, 1.f);
  for (const auto& e : gpt_file->entries()) {
    if (e.name == "lm_head.weight") continue;
    auto view = gpt_file->get(e.name);
    tensors.push_back({e.name, e.dtype, e.shape, std::span<const std::byte>(view->data, view->byte_size())});
  }
  tensors.push_back({"stray.weight", DType::kF32, {4}, std::as_bytes(std::span<const float>(stray))});
  auto dir = temp_dir();
  ASSERT_TRUE(write_safetensors(dir / "gpt.safetensors", tensors).ok());
  auto loaded = DualStreamGpt::load(dir / "gpt.safetensors", &*config);
  ASSERT_FALSE(loaded.ok());
  const std::string& message = loaded.error().message;
  EXPECT_NE(message.find("missing tensors: lm_head.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("unexpected tensors: stray.weight"), std::string::npos) << message;
  EXPECT_NE(message.find("gpt.safetensors"), std::string::npos) << message;
  std::filesystem::remove_all(dir);
}

// A 2 MB model file with one extra zero-byte tensor named as layer 999999
// once made the tensor-set check build 12 million expected names (11 GB, two
// minutes). Layer counts now come from the layer numbers present, which must
// run without gaps: the error names the stray tensor and comes at once.
TEST(ModelConfig, AStrayLayerNumberIsAnErrorAtOnceNotAMillionLayers) {
  testing::ScratchFolder folder("config");
  const auto builtin = testing::builtin_model_dir();
  struct Case {
    const char* file;
    const char* stray;
    const char* missing_layer;
  };
  for (const Case& c : {Case{"shape_gpt.safetensors", "transformer.dual_blocks.999999.x", "no layer 4"},
                        Case{"shape_gpt.safetensors", "transformer.single_blocks.999999.x", "no layer 1"},
                        Case{"shape_tokenizer.safetensors", "decoder.blocks.999999.x", "no layer 4"}}) {
    const auto path = folder / c.file;
    std::filesystem::copy_file(builtin / c.file, path, std::filesystem::copy_options::overwrite_existing);
    ASSERT_TRUE(testing::rewrite_safetensors(path, [&](testing::EditableTensors& t) {
      t.tensors.push_back({c.stray, DType::kF32, {0}, {}});
    }));
    auto file = SafetensorsFile::open(path);
    ASSERT_TRUE(file.ok());
    const auto start = std::chrono::steady_clock::now();
    auto as_status = [](auto result) -> Status {
      if (result.ok()) return ok_status();
      return result.take_error();
    };
    Status inferred = std::string(c.file) == "shape_gpt.safetensors" ? as_status(infer_gpt_config(*file))
                                                                     : as_status(infer_shape_config(*file));
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    EXPECT_LT(seconds, 1.0) << c.stray;
    ASSERT_FALSE(inferred.ok()) << c.stray;
    const std::string& message = inferred.error().message;
    EXPECT_NE(message.find(c.stray), std::string::npos) << message;
    EXPECT_NE(message.find(c.missing_layer), std::string::npos) << message;
  }
}

TEST(ModelConfig, ALayerWithAStrayTensorOrTwoIsNotALayer) {
  testing::ScratchFolder folder("config");
  const auto path = folder / "shape_gpt.safetensors";
  std::filesystem::copy_file(testing::builtin_model_dir() / "shape_gpt.safetensors", path);
  ASSERT_TRUE(testing::rewrite_safetensors(path, [&](testing::EditableTensors& t) {
    t.tensors.push_back({"transformer.dual_blocks.4.x", DType::kF32, {0}, {}});
  }));
  auto file = SafetensorsFile::open(path);
  auto inferred = infer_gpt_config(*file);
  ASSERT_FALSE(inferred.ok());
  EXPECT_NE(inferred.error().message.find("1 tensor(s) in layer 4"), std::string::npos) << inferred.error().message;
}

// NaN or infinite weights produced "no surface; try another seed"; the file is
// the cause, and the error names the tensor.
TEST(ModelConfig, NonFiniteWeightsAreAnErrorNamingTheTensor) {
  testing::ScratchFolder folder("config");
  const auto builtin = testing::builtin_model_dir();
  std::filesystem::copy_file(builtin / "shape_gpt.safetensors", folder / "gpt.safetensors");
  std::filesystem::copy_file(builtin / "shape_tokenizer.safetensors", folder / "shape.safetensors");
  const std::string gpt_tensor = "transformer.dual_blocks.0.attn.pre_x.c_v.weight";
  const std::string shape_tensor = "decoder.blocks.1.mlp.up_proj.weight";
  ASSERT_TRUE(testing::rewrite_safetensors(folder / "gpt.safetensors", [&](testing::EditableTensors& t) {
    testing::poison_first_element(t, gpt_tensor, std::numeric_limits<float>::quiet_NaN());
  }));
  ASSERT_TRUE(testing::rewrite_safetensors(folder / "shape.safetensors", [&](testing::EditableTensors& t) {
    testing::poison_first_element(t, shape_tensor, -std::numeric_limits<float>::infinity());
  }));
  auto yaml = parse_model_config_yaml(builtin / "config.yaml");
  ASSERT_TRUE(yaml.ok());
  auto gpt = DualStreamGpt::load(folder / "gpt.safetensors", &yaml->gpt);
  ASSERT_FALSE(gpt.ok());
  EXPECT_NE(gpt.error().message.find(gpt_tensor + "' holds NaN"), std::string::npos) << gpt.error().message;
  auto inferred_gpt = DualStreamGpt::load(folder / "gpt.safetensors", nullptr);
  ASSERT_FALSE(inferred_gpt.ok());
  auto shape = ShapeTokenizer::load(folder / "shape.safetensors", &yaml->shape);
  ASSERT_FALSE(shape.ok());
  EXPECT_NE(shape.error().message.find(shape_tensor + "' holds an infinity"), std::string::npos)
      << shape.error().message;
}

TEST(ModelConfig, AConfigThatIsNotARegularFileIsNamedNotWaitedOn) {
  testing::ScratchFolder folder("config");
  ASSERT_EQ(::mkfifo((folder / "fifo.yaml").c_str(), 0644), 0);
  std::filesystem::create_directory(folder / "dir.yaml");
  std::filesystem::create_symlink("loop.yaml", folder / "loop.yaml");
  for (const char* name : {"fifo.yaml", "dir.yaml", "loop.yaml"}) {
    auto parsed = parse_model_config_yaml(folder / name);  // before: blocked, threw std::ios_failure or aborted
    ASSERT_FALSE(parsed.ok()) << name;
    EXPECT_NE(parsed.error().message.find(name), std::string::npos) << parsed.error().message;
  }
}

TEST(ModelConfig, EpsAndRopeThetaMustBePositiveNumbers) {
  auto text = read_file_text(testing::builtin_model_dir() / "config.yaml");
  ASSERT_TRUE(text.ok());
  for (const auto& [from, to] : {std::pair<std::string, std::string>{"eps: 1.000000e-06", "eps: .nan"},
                                 {"rope_theta: 10000.0", "rope_theta: -1"}}) {
    std::string changed = *text;
    changed.replace(changed.find(from), from.size(), to);
    auto parsed = parse_model_config_yaml_text(changed, "config.yaml");
    EXPECT_FALSE(parsed.ok()) << to;
  }
}

// yaml-cpp takes the first of two equal keys: a config.yaml saying n_embd
// twice was read as the first and blamed on the weights, or accepted.
TEST(ModelConfig, AKeyGivenTwiceIsRefusedAtAnyLevel) {
  auto text = read_file_text(testing::builtin_model_dir() / "config.yaml");
  ASSERT_TRUE(text.ok());
  ASSERT_TRUE(parse_model_config_yaml_text(*text, "config.yaml").ok());
  std::string twice = *text;
  twice.insert(twice.find("  n_embd:"), "  n_embd: 64\n");
  auto parsed = parse_model_config_yaml_text(twice, "config.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("key 'gpt_model.n_embd' is given twice (lines"), std::string::npos)
      << parsed.error().message;
  parsed = parse_model_config_yaml_text(*text + "extra:\n  list:\n    - {a: 1, a: 2}\n", "config.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("key 'extra.list[0].a' is given twice"), std::string::npos)
      << parsed.error().message;
  // Aliases are walked within a bound set by the text's size, not expanded without end.
  std::string laughs = *text + "l0: &l0 [x, x, x, x, x, x, x, x]\n";
  for (int i = 1; i < 12; ++i) {
    const std::string name = std::to_string(i), previous = "*l" + std::to_string(i - 1);
    laughs.append("l").append(name).append(": &l").append(name).append(" [");
    for (int copy = 0; copy < 4; ++copy) laughs.append(copy ? ", " : "").append(previous);
    laughs.append("]\n");
  }
  parsed = parse_model_config_yaml_text(laughs, "config.yaml");
  ASSERT_FALSE(parsed.ok());
  EXPECT_NE(parsed.error().message.find("aliases expand to more than"), std::string::npos) << parsed.error().message;
}

// The class of clip/config.json's 1e-0256, in config.yaml: each float is
// checked as the float it becomes (1e-40 was accepted as a denormal eps),
// each size as the int it becomes.
TEST(ModelConfig, NumbersAreCheckedAfterNarrowing) {
  auto text = read_file_text(testing::builtin_model_dir() / "config.yaml");
  ASSERT_TRUE(text.ok());
  auto with = [&](const std::string& section, const std::string& key, const std::string& value) {
    std::string changed = *text;
    const size_t at = changed.find("  " + key + ": ", changed.find(section + ":")) + key.size() + 4;
    return changed.replace(at, changed.find('\n', at) - at, value);
  };
  for (const auto& [section, key] : std::vector<std::pair<std::string, std::string>>{
           {"gpt_model", "eps"}, {"shape_model", "eps"}, {"gpt_model", "rope_theta"}})
    for (const auto& number : testing::not_positive_normal_floats()) {
      auto parsed = parse_model_config_yaml_text(with(section, key, number.text), "model/config.yaml");
      ASSERT_FALSE(parsed.ok()) << section << "." << key << " = " << number.text;
      const std::string& message = parsed.error().message;
      EXPECT_NE(message.find("'model/config.yaml': " + section + "." + key + " = " + number.text), std::string::npos)
          << message;
      EXPECT_NE(message.find(number.reason), std::string::npos) << message;
    }
  for (const auto& [section, key] : std::vector<std::pair<std::string, std::string>>{
           {"gpt_model", "n_layer"}, {"gpt_model", "n_embd"}, {"shape_model", "num_codes"}})
    for (const auto& number : testing::not_whole_numbers_that_fit()) {
      auto parsed = parse_model_config_yaml_text(with(section, key, number.text), "model/config.yaml");
      ASSERT_FALSE(parsed.ok()) << section << "." << key << " = " << number.text;
      EXPECT_NE(parsed.error().message.find(section + "." + key + " = " + number.text), std::string::npos)
          << parsed.error().message;
    }
  auto fine = parse_model_config_yaml_text(with("gpt_model", "rope_theta", "3.4e38"), "model/config.yaml");
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  EXPECT_EQ(fine->gpt.rope_theta, 3.4e38f);
}

}  // namespace
}  // namespace cubeforge
