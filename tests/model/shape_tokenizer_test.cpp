// Shape tokenizer against the reference fixtures, plus its load-time checks.
//
// The oracle folder holds a tiny random-weight OneDAutoEncoder and the tensors
// the public reference computed with it (expected.safetensors, "decode.*" and
// "encode.*"). Every float tensor must match with relative error
// ||a - b|| / ||b|| < 1e-4 and token ids exactly. Sizes come from the files, so
// any fixture folder of the same layout works (CUBEFORGE_ORACLE_DIR).
#include "inference/model/shape_tokenizer.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>

#include "inference/cpu/ops.h"
#include "inference/geometry/occupancy_grid.h"
#include "inference/model/random_weights.h"
#include "inference/tensor/trace_file.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

constexpr double kRelativeTolerance = 1e-4;

// ||a - b|| / ||b||, with the largest elementwise difference for the message.
::testing::AssertionResult close_to(const std::string& name, std::span<const float> actual,
                                    std::span<const float> expected) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure() << name << ": " << actual.size() << " values, expected " << expected.size();
  double diff = 0.0, norm = 0.0, max_abs = 0.0;
  size_t worst = 0;
  for (size_t i = 0; i < actual.size(); ++i) {
    const double d = double(actual[i]) - double(expected[i]);
    diff += d * d;
    norm += double(expected[i]) * expected[i];
    if (!(std::abs(d) <= max_abs)) {
      max_abs = std::abs(d);
      worst = i;
    }
  }
  const double relative = std::sqrt(diff) / std::max(std::sqrt(norm), 1e-30);
  if (relative < kRelativeTolerance) {
    std::printf("  %s: relative error %.3g, max |diff| %.3g\n", name.c_str(), relative, max_abs);
    return ::testing::AssertionSuccess() << name << ": relative error " << relative;
  }
  return ::testing::AssertionFailure() << name << ": relative error " << relative << " (max |diff| " << max_abs
                                       << " at " << worst << ": " << actual[worst] << " vs " << expected[worst]
                                       << "; first values " << actual[0] << " vs " << expected[0] << ")";
}

// The points of the reference's meshing grid at a resolution: (2^r + 1)³,
// x-major, over [-1.05, 1.05].
std::vector<float> meshing_grid_points(int resolution) {
  GridSpec spec;
  spec.resolution = resolution;
  return grid_points(spec);
}

struct Oracle {
  ShapeTokenizer tokenizer;
  SafetensorsFile expected;
  ModelConfig yaml_config;
};

// Loaded once for the whole suite; empty when the fixtures are absent.
Oracle* oracle(std::string* why_missing) {
  static std::optional<Oracle> loaded;
  static std::string missing;
  static bool tried = false;
  if (!tried) {
    tried = true;
    const auto dir = oracle_dir();
    if (!std::filesystem::exists(dir / "shape_tokenizer.safetensors") ||
        !std::filesystem::exists(dir / "expected.safetensors")) {
      missing = "reference fixtures not found in '" + dir.string() + "' (set CUBEFORGE_ORACLE_DIR)";
    } else {
      auto yaml = parse_model_config_yaml(dir / "config.yaml");
      auto expected = SafetensorsFile::open(dir / "expected.safetensors");
      if (!yaml.ok() || !expected.ok()) {
        missing = "cannot read fixtures: " + (yaml.ok() ? expected.error().to_string() : yaml.error().to_string());
      } else {
        auto tokenizer =
            ShapeTokenizer::load(dir / "shape_tokenizer.safetensors", &yaml->shape, (dir / "config.yaml").string());
        if (!tokenizer.ok()) {
          missing = "load failed: " + tokenizer.error().to_string();
        } else {
          loaded.emplace(Oracle{std::move(tokenizer).value(), std::move(expected).value(), std::move(yaml).value()});
        }
      }
    }
  }
  *why_missing = missing;
  return loaded ? &*loaded : nullptr;
}

class ShapeOracleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    oracle_ = oracle(&why);
    if (!oracle_) {
      // A fixture folder that exists but does not load is a failure, not a skip.
      if (why.rfind("reference fixtures not found", 0) == 0) GTEST_SKIP() << why;
      FAIL() << why;
    }
  }
  std::vector<float> expected(const std::string& name) const {
    auto values = oracle_->expected.read_f32(name);
    EXPECT_TRUE(values.ok()) << values.error().to_string();
    return values.ok() ? *values : std::vector<float>{};
  }
  std::vector<int64_t> expected_ids(const std::string& name) const {
    auto values = oracle_->expected.read_i64(name);
    EXPECT_TRUE(values.ok()) << values.error().to_string();
    return values.ok() ? *values : std::vector<int64_t>{};
  }
  const ShapeTokenizer& tokenizer() const { return oracle_->tokenizer; }

  // Runs `check` once per occupancy path this CPU has (fused, then layer at a
  // time), naming the path; the fused one is on again afterwards.
  template <typename Check>
  void for_each_occupancy_path(Check check) {
    ShapeTokenizer& t = oracle_->tokenizer;
    if (std::string(cpu::kernel_isa()) == "avx512") {
      EXPECT_TRUE(t.fused_occupancy_available()) << "the fixture's sizes fit the fused decoder";
    }
    for (bool fused : {true, false}) {
      if (fused && !t.fused_occupancy_available()) continue;
      t.set_fused_occupancy(fused);
      check(fused ? "fused" : "layered");
    }
    t.set_fused_occupancy(true);
  }

  Oracle* oracle_ = nullptr;
};

TEST_F(ShapeOracleTest, InferredConfigurationMatchesYaml) {
  auto inferred = ShapeTokenizer::load(oracle_dir() / "shape_tokenizer.safetensors");
  ASSERT_TRUE(inferred.ok()) << inferred.error().to_string();
  const auto& a = inferred->config();
  const auto& b = oracle_->yaml_config.shape;
  EXPECT_EQ(a.width, b.width);
  EXPECT_EQ(a.heads, b.heads);
  EXPECT_EQ(a.latents, b.latents);
  EXPECT_EQ(a.codes, b.codes);
  EXPECT_EQ(a.embed_dim, b.embed_dim);
  EXPECT_EQ(a.num_freqs, b.num_freqs);
  EXPECT_EQ(a.point_feats, b.point_feats);
  EXPECT_EQ(a.decoder_layers, b.decoder_layers);
  EXPECT_EQ(a.encoder_layers, b.encoder_layers);
  EXPECT_EQ(a.encoder_cross_attention_levels, b.encoder_cross_attention_levels);
}

TEST_F(ShapeOracleTest, CodebookMatchesReference) {
  EXPECT_TRUE(close_to("decode.codebook", tokenizer().codebook(), expected("decode.codebook")));
}

TEST_F(ShapeOracleTest, DecodeMatchesReference) {
  const auto tokens = expected_ids("decode.tokens");
  std::vector<float> z_q;
  auto latents = tokenizer().decode_tokens(tokens, &z_q);
  ASSERT_TRUE(latents.ok()) << latents.error().to_string();
  EXPECT_TRUE(close_to("decode.z_q", z_q, expected("decode.z_q")));
  EXPECT_TRUE(close_to("decode.latents", *latents, expected("decode.latents")));
}

// The float32 values of a recorded tensor, after checking its shape.
std::vector<float> traced(const TraceRecorder& trace, const std::string& name, std::vector<int64_t> shape) {
  const TraceRecorder::Tensor* t = trace.find(name);
  EXPECT_NE(t, nullptr) << name;
  if (!t) return {};
  EXPECT_EQ(t->shape, shape) << name;
  EXPECT_EQ(t->dtype, DType::kF32) << name;
  std::vector<float> values(t->data.size() / sizeof(float));
  std::memcpy(values.data(), t->data.data(), t->data.size());
  return values;
}

TEST_F(ShapeOracleTest, DecodeTraceNamesEveryLayerAndCarriesTheReferenceLatents) {
  const auto tokens = expected_ids("decode.tokens");
  TraceRecorder trace;
  auto latents = tokenizer().decode_tokens(tokens, nullptr, &trace);
  ASSERT_TRUE(latents.ok()) << latents.error().to_string();
  auto untraced = tokenizer().decode_tokens(tokens);
  ASSERT_TRUE(untraced.ok());
  EXPECT_EQ(*latents, *untraced);  // bit for bit

  const int64_t T = int64_t(tokens.size()), W = tokenizer().config().width;
  std::vector<std::string> expected_names = {"decoder.z_q", "decoder.input"};
  for (int i = 0; i < tokenizer().config().decoder_layers; ++i)
    for (const char* point : {"ln_1", "q", "k", "v", "attn", "attn_residual", "ln_2", "mlp_hidden", "out"})
      expected_names.push_back("decoder." + std::to_string(i) + "." + point);
  expected_names.push_back("decoder.latents");
  std::vector<std::string> names;
  for (const auto& t : trace.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, expected_names);
  EXPECT_TRUE(close_to("decoder.z_q", traced(trace, "decoder.z_q", {T, W}), expected("decode.z_q")));
  EXPECT_TRUE(close_to("decoder.latents", traced(trace, "decoder.latents", {T, W}), expected("decode.latents")));
  const int64_t last = tokenizer().config().decoder_layers - 1;
  EXPECT_EQ(traced(trace, "decoder." + std::to_string(last) + ".out", {T, W}), *latents);
  EXPECT_EQ(traced(trace, "decoder.0.mlp_hidden", {T, 4 * W}).size(), size_t(T * 4 * W));
}

TEST_F(ShapeOracleTest, OccupancyTraceFollowsTheLayeredPathAndGivesTheReferenceLogits) {
  const auto latents = expected("decode.latents");
  const auto points = expected("decode.query_points");
  const auto reference = expected("decode.occupancy_logits");
  auto prepared = tokenizer().prepare_latents(latents);
  ASSERT_TRUE(prepared.ok());
  // The fused decoder stays switched on: a trace takes the layered path anyway,
  // in one chunk whatever the chunk size asked for.
  TraceRecorder trace;
  std::vector<float> logits(points.size() / 3);
  auto status = tokenizer().occupancy(*prepared, points, logits, 100, nullptr, &trace);
  ASSERT_TRUE(status.ok()) << status.error().to_string();
  EXPECT_TRUE(close_to("occupancy (traced)", logits, reference));

  const int64_t P = int64_t(points.size() / 3), W = tokenizer().config().width, T = prepared->latent_count;
  std::vector<std::string> names;
  for (const auto& t : trace.tensors()) names.push_back(t.name);
  EXPECT_EQ(names, (std::vector<std::string>{"occupancy.points", "occupancy.k", "occupancy.v", "occupancy.fourier",
                                             "occupancy.query", "occupancy.ln_1", "occupancy.q", "occupancy.attn",
                                             "occupancy.attn_residual", "occupancy.ln_2", "occupancy.mlp_hidden",
                                             "occupancy.out", "occupancy.ln_f", "occupancy.logits"}));
  EXPECT_EQ(traced(trace, "occupancy.points", {P, 3}), points);
  EXPECT_EQ(traced(trace, "occupancy.k", {T, W}), prepared->keys);
  EXPECT_TRUE(close_to("occupancy.fourier", traced(trace, "occupancy.fourier", {P, tokenizer().config().fourier_dim()}),
                       expected("decode.fourier")));
  EXPECT_EQ(traced(trace, "occupancy.logits", {P, 1}), logits);
}

TEST_F(ShapeOracleTest, FourierEmbeddingMatchesReference) {
  const auto points = expected("decode.query_points");
  EXPECT_TRUE(close_to("decode.fourier", tokenizer().fourier_embed(points), expected("decode.fourier")));
}

TEST_F(ShapeOracleTest, OccupancyMatchesReferenceInAnyChunking) {
  const auto latents = expected("decode.latents");
  const auto points = expected("decode.query_points");
  const auto reference = expected("decode.occupancy_logits");
  auto prepared = tokenizer().prepare_latents(latents);
  ASSERT_TRUE(prepared.ok()) << prepared.error().to_string();
  for_each_occupancy_path([&](const std::string& path) {
    for (size_t chunk : {size_t(8192), size_t(1000), size_t(7)}) {
      std::vector<float> logits(points.size() / 3);
      auto status = tokenizer().occupancy(*prepared, points, logits, chunk);
      ASSERT_TRUE(status.ok()) << status.error().to_string();
      EXPECT_TRUE(close_to("decode.occupancy_logits (" + path + ", chunk " + std::to_string(chunk) + ")", logits,
                           reference));
    }
  });
}

TEST_F(ShapeOracleTest, GridLogitsMatchReference) {
  const auto reference = expected("decode.grid_logits_r5");
  const auto points = meshing_grid_points(5);
  ASSERT_EQ(points.size() / 3, reference.size());
  for_each_occupancy_path([&](const std::string& path) {
    std::vector<float> logits(reference.size());
    auto status = tokenizer().occupancy(std::span<const float>(expected("decode.latents")), points, logits);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_TRUE(close_to("decode.grid_logits_r5 (" + path + ")", logits, reference));

    // The same grid by axis indices, as meshing asks for it (the fused path
    // from per-axis first-layer terms).
    GridSpec spec;
    spec.resolution = 5;
    const ShapeTokenizer::GridQueries grid = tokenizer().prepare_grid(grid_axis_coordinates(spec));
    EXPECT_EQ(grid.terms.empty(), path != "fused");
    std::vector<int32_t> ijk;
    for (int32_t i = 0; i < 33; ++i)
      for (int32_t j = 0; j < 33; ++j)
        for (int32_t k = 0; k < 33; ++k) ijk.insert(ijk.end(), {i, j, k});
    auto prepared = tokenizer().prepare_latents(expected("decode.latents"));
    ASSERT_TRUE(prepared.ok());
    std::vector<float> by_index(reference.size());
    status = tokenizer().occupancy_on_grid(*prepared, grid, ijk, by_index);
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_TRUE(close_to("decode.grid_logits_r5 (" + path + ", by grid index)", by_index, reference));
  });
}

// The points of a resolution-r grid by axis index, x-major.
std::vector<int32_t> grid_indices(int resolution) {
  const int32_t n = (int32_t(1) << resolution) + 1;
  std::vector<int32_t> ijk;
  for (int32_t i = 0; i < n; ++i)
    for (int32_t j = 0; j < n; ++j)
      for (int32_t k = 0; k < n; ++k) ijk.insert(ijk.end(), {i, j, k});
  return ijk;
}

// Every row of [rows, n] sums to `sum` within float32 rounding.
::testing::AssertionResult rows_sum_to(std::span<const float> values, int64_t n, double sum) {
  for (size_t row = 0; row * size_t(n) < values.size(); ++row) {
    double total = 0;
    for (int64_t j = 0; j < n; ++j) total += values[row * size_t(n) + size_t(j)];
    if (std::abs(total - sum) > 1e-4 * sum)
      return ::testing::AssertionFailure() << "row " << row << " sums to " << total << ", not " << sum;
  }
  return ::testing::AssertionSuccess();
}

// Subsets that list every latent in order attend as full attention does: bit
// for bit on the fused decoder, whose arithmetic for a point does not depend
// on the points beside it; layer at a time within the reference tolerance and
// with the same signs (BLAS rounds a product by how many rows share it). The
// attention mass, summed over heads, sums to the head count at every point.
TEST_F(ShapeOracleTest, SubsetsOfEveryLatentAttendAsFullAttention) {
  auto prepared = tokenizer().prepare_latents(expected("decode.latents"));
  ASSERT_TRUE(prepared.ok());
  const int64_t S = prepared->latent_count, heads = tokenizer().config().heads;
  GridSpec spec;
  spec.resolution = 4;
  const std::vector<int32_t> ijk = grid_indices(4);
  const int64_t P = int64_t(ijk.size() / 3);
  // Groups of 7 neighbouring points, every one listing latents 0..S-1.
  std::vector<int32_t> group(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) group[size_t(p)] = int32_t(p / 7);
  const int64_t groups = (P + 6) / 7;
  std::vector<int32_t> every(size_t(groups * S));
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t j = 0; j < S; ++j) every[size_t(g * S + j)] = int32_t(j);
  const LatentSubsets subsets{S, every, group};
  for_each_occupancy_path([&](const std::string& path) {
    const ShapeTokenizer::GridQueries grid = tokenizer().prepare_grid(grid_axis_coordinates(spec));
    std::vector<float> full(static_cast<size_t>(P)), with_mass(full.size()), restricted(full.size());
    std::vector<float> full_mass(size_t(P * S)), restricted_mass(size_t(P * S));
    ASSERT_TRUE(tokenizer().occupancy_on_grid(*prepared, grid, ijk, full).ok());
    ASSERT_TRUE(tokenizer().occupancy_on_grid(*prepared, grid, ijk, with_mass, {nullptr, full_mass}).ok());
    auto status = tokenizer().occupancy_on_grid(*prepared, grid, ijk, restricted, {&subsets, restricted_mass});
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_TRUE(rows_sum_to(full_mass, S, double(heads))) << path;
    EXPECT_TRUE(rows_sum_to(restricted_mass, S, double(heads))) << path;
    if (path == "fused") {
      EXPECT_EQ(with_mass, full);
      EXPECT_EQ(restricted, full);
      EXPECT_EQ(restricted_mass, full_mass);
    } else {
      EXPECT_TRUE(close_to("with mass (" + path + ")", with_mass, full));
      EXPECT_TRUE(close_to("every latent (" + path + ")", restricted, full));
      EXPECT_TRUE(close_to("attention mass (" + path + ")", restricted_mass, full_mass));
      int64_t sign_changes = 0;
      for (int64_t p = 0; p < P; ++p) sign_changes += (restricted[size_t(p)] > 0.f) != (full[size_t(p)] > 0.f);
      EXPECT_EQ(sign_changes, 0) << path;
    }
  });
}

// A subset attends as if its latents were the only ones: its points' logits
// are full attention's over latents made of the subset's keys and values.
// Groups alternate point by point, so every run of one group is one point.
TEST_F(ShapeOracleTest, SubsetsAttendLikeTheirLatentsAlone) {
  auto prepared = tokenizer().prepare_latents(expected("decode.latents"));
  ASSERT_TRUE(prepared.ok());
  const int64_t S = prepared->latent_count, W = prepared->width, k = 4;
  ASSERT_GE(S, 24);
  const std::vector<int32_t> chosen = {0, 5, 11, 23, /**/ 1, 2, 3, 4, /**/ 20, 7, 21, 8};
  const int64_t groups = int64_t(chosen.size()) / k;
  GridSpec spec;
  spec.resolution = 4;
  const std::vector<int32_t> ijk = grid_indices(4);
  const int64_t P = int64_t(ijk.size() / 3);
  std::vector<int32_t> group(static_cast<size_t>(P));
  for (int64_t p = 0; p < P; ++p) group[size_t(p)] = int32_t(p % groups);
  const LatentSubsets subsets{k, chosen, group};
  for_each_occupancy_path([&](const std::string& path) {
    const ShapeTokenizer::GridQueries grid = tokenizer().prepare_grid(grid_axis_coordinates(spec));
    std::vector<float> restricted(static_cast<size_t>(P)), mass(static_cast<size_t>(P * k));
    auto status = tokenizer().occupancy_on_grid(*prepared, grid, ijk, restricted, {&subsets, mass});
    ASSERT_TRUE(status.ok()) << status.error().to_string();
    EXPECT_TRUE(rows_sum_to(mass, k, double(tokenizer().config().heads))) << path;
    for (int64_t g = 0; g < groups; ++g) {
      PreparedLatents alone;
      alone.latent_count = k;
      alone.width = W;
      for (int64_t j = 0; j < k; ++j) {
        const int64_t latent = chosen[size_t(g * k + j)];
        alone.keys.insert(alone.keys.end(), prepared->keys.begin() + latent * W,
                          prepared->keys.begin() + (latent + 1) * W);
        alone.values.insert(alone.values.end(), prepared->values.begin() + latent * W,
                            prepared->values.begin() + (latent + 1) * W);
      }
      std::vector<int32_t> group_ijk;
      std::vector<float> from_subsets;
      for (int64_t p = g; p < P; p += groups) {
        group_ijk.insert(group_ijk.end(), ijk.begin() + p * 3, ijk.begin() + p * 3 + 3);
        from_subsets.push_back(restricted[size_t(p)]);
      }
      std::vector<float> alone_logits(from_subsets.size());
      ASSERT_TRUE(tokenizer().occupancy_on_grid(alone, grid, group_ijk, alone_logits).ok());
      if (path == "fused")
        EXPECT_EQ(from_subsets, alone_logits) << "group " << g;
      else
        EXPECT_TRUE(close_to("group " + std::to_string(g) + " (" + path + ")", from_subsets, alone_logits));
    }
  });
}

TEST_F(ShapeOracleTest, EncodeMatchesReference) {
  const auto surface = expected("encode.surface");
  std::vector<float> z_e;
  auto indices = tokenizer().encode(surface, &z_e);
  ASSERT_TRUE(indices.ok()) << indices.error().to_string();
  EXPECT_TRUE(close_to("encode.z_e", z_e, expected("encode.z_e")));
  EXPECT_EQ(*indices, expected_ids("encode.indices"));
}

TEST_F(ShapeOracleTest, DecodeClampsIdsLikeTheReference) {
  const int64_t codes = tokenizer().config().codes;
  const std::vector<int64_t> wild = {-7, codes + 5, 3};
  const std::vector<int64_t> clamped = {0, codes - 1, 3};
  auto a = tokenizer().decode_tokens(wild);
  auto b = tokenizer().decode_tokens(clamped);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_FALSE(tokenizer().decode_tokens(std::vector<int64_t>{}).ok());
  EXPECT_FALSE(tokenizer().decode_tokens(std::vector<int64_t>(size_t(tokenizer().config().latents + 1), 0)).ok());
}

// ---- Load-time checks and dtype handling on small random models (no fixtures needed).

ShapeModelConfig tiny_config() {
  ShapeModelConfig c;
  c.latents = 6;
  c.embed_dim = 4;
  c.width = 32;
  c.heads = 2;
  c.num_freqs = 4;
  c.point_feats = 3;
  c.encoder_layers = 2;
  c.encoder_cross_attention_levels = {0};
  c.decoder_layers = 2;
  c.codes = 16;
  return c;
}

std::vector<std::byte> image_of(std::span<const OwnedTensor> tensors) {
  std::vector<TensorToWrite> views;
  for (const OwnedTensor& t : tensors) views.push_back(t.view());
  auto image = safetensors_image(views);
  CUBEFORGE_CHECK(image.ok(), "test tensors have unique names and sizes that match their shapes");
  return std::move(image).value();
}

SafetensorsFile open_image(std::span<const OwnedTensor> tensors, const std::string& name) {
  auto file = SafetensorsFile::from_bytes(image_of(tensors), name);
  CUBEFORGE_CHECK(file.ok(), "a generated safetensors image must parse");
  return std::move(file).value();
}

std::string load_error(std::vector<OwnedTensor> tensors, const ShapeModelConfig& config) {
  auto file = SafetensorsFile::from_bytes(image_of(tensors), "broken_tokenizer.safetensors");
  if (!file.ok()) return file.error().to_string();
  auto tokenizer = ShapeTokenizer::from_file(std::move(file).value(), config, "test config.yaml");
  return tokenizer.ok() ? std::string() : tokenizer.error().to_string();
}

TEST(ShapeTokenizerLoad, MissingTensorIsNamed) {
  auto tensors = random_tensors(expected_shape_tensors(tiny_config()), 1);
  std::erase_if(tensors, [](const OwnedTensor& t) { return t.name == "decoder.blocks.1.mlp.up_proj.bias"; });
  const std::string error = load_error(tensors, tiny_config());
  EXPECT_NE(error.find("broken_tokenizer.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("missing tensors: decoder.blocks.1.mlp.up_proj.bias"), std::string::npos) << error;
}

TEST(ShapeTokenizerLoad, WrongShapeAndUnexpectedTensorsAreNamed) {
  auto tensors = random_tensors(expected_shape_tensors(tiny_config()), 2);
  for (auto& t : tensors)
    if (t.name == "encoder.ln_f.bias") {
      t.shape = {int64_t(t.bytes.size() / 8), 2};
    }
  tensors.push_back(OwnedTensor{"decoder.extra_scale", DType::kF32, {1}, std::vector<std::byte>(4)});
  const std::string error = load_error(tensors, tiny_config());
  EXPECT_NE(error.find("broken_tokenizer.safetensors"), std::string::npos) << error;
  EXPECT_NE(error.find("encoder.ln_f.bias is [16, 2], expected [32]"), std::string::npos) << error;
  EXPECT_NE(error.find("unexpected tensors: decoder.extra_scale"), std::string::npos) << error;
}

TEST(ShapeTokenizerLoad, ConfigurationThatDisagreesWithWeightsIsNamed) {
  auto tensors = random_tensors(expected_shape_tensors(tiny_config()), 3);
  ShapeModelConfig other = tiny_config();
  other.decoder_layers = 3;
  const std::string error = load_error(tensors, other);
  EXPECT_NE(error.find("'test config.yaml' says shape_model.num_decoder_layers = 3"), std::string::npos) << error;
  EXPECT_NE(error.find("broken_tokenizer.safetensors"), std::string::npos) << error;
}

TEST(ShapeTokenizerLoad, TruncatedFileOnDiskIsNamed) {
  const auto image = image_of(random_tensors(expected_shape_tensors(tiny_config()), 4));
  const auto path = std::filesystem::path(::testing::TempDir()) / "truncated_shape_tokenizer.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    out.write(reinterpret_cast<const char*>(image.data()), std::streamsize(image.size() - 100));
  }
  auto tokenizer = ShapeTokenizer::load(path);
  ASSERT_FALSE(tokenizer.ok());
  EXPECT_NE(tokenizer.error().message.find(path.string()), std::string::npos) << tokenizer.error().to_string();
  std::filesystem::remove(path);
}

// Half-precision checkpoints compute exactly what their values widened to F32 compute.
TEST(ShapeTokenizerWeights, Bf16WeightsMatchTheirF32Widening) {
  const ShapeModelConfig config = tiny_config();
  auto half = random_tensors(expected_shape_tensors(config), 5, DType::kBF16);
  std::vector<OwnedTensor> widened;
  for (const auto& t : half) {
    OwnedTensor w{t.name, DType::kF32, t.shape, std::vector<std::byte>(t.bytes.size() * 2)};
    convert_to_f32(DType::kBF16, t.bytes.data(), reinterpret_cast<float*>(w.bytes.data()), t.bytes.size() / 2);
    widened.push_back(std::move(w));
  }
  auto a = ShapeTokenizer::from_file(open_image(half, "bf16"), config);
  auto b = ShapeTokenizer::from_file(open_image(widened, "f32"), config);
  ASSERT_TRUE(a.ok()) << a.error().to_string();
  ASSERT_TRUE(b.ok()) << b.error().to_string();
  const std::vector<int64_t> tokens = {3, 1, 4, 1, 5, 9};
  auto latents_a = a->decode_tokens(tokens);
  auto latents_b = b->decode_tokens(tokens);
  ASSERT_TRUE(latents_a.ok() && latents_b.ok());
  EXPECT_TRUE(close_to("bf16 latents", *latents_a, *latents_b));
  const auto points = meshing_grid_points(2);
  std::vector<float> logits_a(points.size() / 3), logits_b(points.size() / 3);
  ASSERT_TRUE(a->occupancy(std::span<const float>(*latents_a), points, logits_a).ok());
  ASSERT_TRUE(b->occupancy(std::span<const float>(*latents_b), points, logits_b).ok());
  EXPECT_TRUE(close_to("bf16 logits", logits_a, logits_b));
}

TEST(ShapeTokenizerWeights, RejectsMisshapenInputs) {
  auto tokenizer = ShapeTokenizer::from_file(
      open_image(random_tensors(expected_shape_tensors(tiny_config()), 6), "random"), tiny_config());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  std::vector<float> latents(size_t(6 * 32) + 1), logits(2);
  const std::vector<float> points = {0, 0, 0, 1, 1, 1};
  EXPECT_FALSE(tokenizer->occupancy(std::span<const float>(latents), points, logits).ok());
  latents.pop_back();
  EXPECT_TRUE(tokenizer->occupancy(std::span<const float>(latents), points, logits).ok());
  std::vector<float> short_logits(1);
  EXPECT_FALSE(tokenizer->occupancy(std::span<const float>(latents), points, short_logits).ok());
  EXPECT_FALSE(tokenizer->encode(std::vector<float>(10)).ok());
}

TEST(ShapeTokenizerWeights, RejectsMisshapenLatentSubsets) {
  auto tokenizer = ShapeTokenizer::from_file(
      open_image(random_tensors(expected_shape_tensors(tiny_config()), 8), "random"), tiny_config());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  auto latents = tokenizer->decode_tokens(std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(latents.ok());
  auto prepared = tokenizer->prepare_latents(*latents);
  ASSERT_TRUE(prepared.ok());
  const std::vector<float> points = {0, 0, 0, 0.5f, 0.5f, 0.5f};
  std::vector<float> logits(2);
  auto error_of = [&](const LatentSubsets& subsets, std::span<float> mass = {}) {
    Status status = tokenizer->occupancy(*prepared, points, logits, 8192, nullptr, nullptr, {&subsets, mass});
    return status.ok() ? std::string() : status.error().message;
  };
  const std::vector<int32_t> two_groups = {0, 1, 2, 3, 4, 5}, group = {0, 1};
  EXPECT_EQ(error_of({3, two_groups, group}), "");
  EXPECT_NE(error_of({0, two_groups, group}).find("a subset holds 1 to 6"), std::string::npos);
  EXPECT_NE(error_of({7, two_groups, group}).find("a subset holds 1 to 6"), std::string::npos);
  EXPECT_NE(error_of({4, two_groups, group}).find("not a multiple of 4"), std::string::npos);
  EXPECT_NE(error_of({3, two_groups, std::vector<int32_t>{0}}).find("for 1 of 2 points"), std::string::npos);
  EXPECT_NE(error_of({3, two_groups, std::vector<int32_t>{0, 2}}).find("outside the 2 groups"), std::string::npos);
  EXPECT_NE(error_of({3, std::vector<int32_t>{0, 1, 6}, std::vector<int32_t>{0, 0}}).find("latent index 6"),
            std::string::npos);
  std::vector<float> short_mass(5);
  EXPECT_NE(error_of({3, two_groups, group}, short_mass).find("2 points × 3 latents"), std::string::npos);
}

TEST(ShapeTokenizerWeights, OccupancyReportsProgressAndCancels) {
  auto tokenizer = ShapeTokenizer::from_file(
      open_image(random_tensors(expected_shape_tensors(tiny_config()), 7), "random"), tiny_config());
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
  auto latents = tokenizer->decode_tokens(std::vector<int64_t>{1, 2, 3, 4, 5, 6});
  ASSERT_TRUE(latents.ok());
  auto prepared = tokenizer->prepare_latents(*latents);
  ASSERT_TRUE(prepared.ok());
  const auto points = meshing_grid_points(2);  // 125 points
  std::vector<float> logits(125), reference(125);
  ASSERT_TRUE(tokenizer->occupancy(*prepared, points, reference).ok());
  std::vector<int64_t> reported;
  auto status = tokenizer->occupancy(*prepared, points, logits, 50, [&](int64_t done, int64_t total) {
    EXPECT_EQ(total, 125);
    reported.push_back(done);
    return true;
  });
  ASSERT_TRUE(status.ok());
  EXPECT_EQ(reported, (std::vector<int64_t>{50, 100, 125}));
  EXPECT_TRUE(close_to("chunked logits", logits, reference));
  status = tokenizer->occupancy(*prepared, points, logits, 50, [](int64_t done, int64_t) { return done < 100; });
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kCancelled);
}

TEST(DenseGrid, IsXMajorAndSpansTheBounds) {
  const auto points = meshing_grid_points(1);  // 3 points per axis
  ASSERT_EQ(points.size(), size_t(27 * 3));
  EXPECT_FLOAT_EQ(points[0], -1.05f);
  EXPECT_FLOAT_EQ(points[3 * 1 + 2], 0.f);      // z moves first
  EXPECT_FLOAT_EQ(points[3 * 9 + 0], 0.f);      // x moves last
  EXPECT_FLOAT_EQ(points[3 * 26 + 0], 1.05f);
  EXPECT_FLOAT_EQ(points[3 * 26 + 1], 1.05f);
}

// On random weights the fused decoder agrees with the layered one at the
// points of a resolution-4 grid and by grid index from per-axis terms, a grid
// point's logit is the same whichever points are asked with it, and indices
// outside the axis are refused. Leaves the fused path on.
void expect_fused_occupancy_matches_layered(ShapeTokenizer& tokenizer, int64_t width) {
  std::vector<int64_t> tokens(20);
  for (size_t i = 0; i < tokens.size(); ++i) tokens[i] = int64_t(i * 5 % 16);
  auto latents = tokenizer.decode_tokens(tokens);
  ASSERT_TRUE(latents.ok());
  const std::vector<float> points = meshing_grid_points(4);
  std::vector<float> fused(points.size() / 3), layered(points.size() / 3);
  tokenizer.set_fused_occupancy(true);
  ASSERT_TRUE(tokenizer.occupancy(*latents, points, fused).ok());
  tokenizer.set_fused_occupancy(false);
  ASSERT_TRUE(tokenizer.occupancy(*latents, points, layered).ok());
  tokenizer.set_fused_occupancy(true);
  EXPECT_TRUE(close_to("random-weight occupancy (fused vs layered)", fused, layered));

  // By grid index from per-axis terms: the same points, the same logits to rounding.
  GridSpec spec;
  spec.resolution = 4;
  const ShapeTokenizer::GridQueries grid = tokenizer.prepare_grid(grid_axis_coordinates(spec));
  ASSERT_EQ(grid.terms.size(), size_t(3 * 17 * width));
  std::vector<int32_t> ijk;
  for (int32_t i = 0; i < 17; ++i)
    for (int32_t j = 0; j < 17; ++j)
      for (int32_t k = 0; k < 17; ++k) ijk.insert(ijk.end(), {i, j, k});
  auto prepared = tokenizer.prepare_latents(*latents);
  ASSERT_TRUE(prepared.ok());
  std::vector<float> by_index(fused.size());
  ASSERT_TRUE(tokenizer.occupancy_on_grid(*prepared, grid, ijk, by_index).ok());
  EXPECT_TRUE(close_to("random-weight occupancy (by grid index vs at points)", by_index, fused));
  EXPECT_TRUE(close_to("random-weight occupancy (by grid index vs layered)", by_index, layered));
  // Evaluated point by point or in any order, a grid point's logit is the same.
  std::vector<float> one(1);
  for (size_t p : {size_t(0), size_t(100), by_index.size() - 1}) {
    ASSERT_TRUE(tokenizer.occupancy_on_grid(*prepared, grid, std::span(ijk).subspan(p * 3, 3), one).ok());
    EXPECT_EQ(one[0], by_index[p]) << "point " << p;
  }
  // Indices outside the axis are refused, not read.
  const std::vector<int32_t> outside = {0, 17, 3};
  auto refused = tokenizer.occupancy_on_grid(*prepared, grid, outside, one);
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("grid index 17"), std::string::npos) << refused.error().message;
}

// The fused decoder is for decoders whose weights stay in L2; a wide one (and
// any on a CPU without AVX-512) goes through BLAS a layer at a time.
TEST(ShapeTokenizerLoad, OnlySmallDecodersTakeTheFusedOccupancyPath) {
  const bool avx512 = std::string(cpu::kernel_isa()) == "avx512";
  ShapeModelConfig small = tiny_config();
  small.width = 64;
  small.heads = 4;
  small.latents = 20;
  small.num_freqs = 8;
  auto small_file =
      random_weights_file(expected_shape_tensors(small), 11, DType::kF32, "random shape_tokenizer.safetensors");
  ASSERT_TRUE(small_file.ok());
  auto small_tokenizer = ShapeTokenizer::from_file(std::move(small_file).value(), small);
  ASSERT_TRUE(small_tokenizer.ok()) << small_tokenizer.error().to_string();
  EXPECT_EQ(small_tokenizer->fused_occupancy_available(), avx512);

  ShapeModelConfig wide = small;
  wide.width = 256;  // 256·1024·2 MLP weights alone exceed the limit
  auto wide_file =
      random_weights_file(expected_shape_tensors(wide), 12, DType::kF32, "random shape_tokenizer.safetensors");
  ASSERT_TRUE(wide_file.ok());
  auto wide_tokenizer = ShapeTokenizer::from_file(std::move(wide_file).value(), wide);
  ASSERT_TRUE(wide_tokenizer.ok()) << wide_tokenizer.error().to_string();
  EXPECT_FALSE(wide_tokenizer->fused_occupancy_available());

  ShapeModelConfig odd = small;
  odd.width = 40;  // not a multiple of 16
  odd.heads = 2;
  auto odd_file =
      random_weights_file(expected_shape_tensors(odd), 13, DType::kF32, "random shape_tokenizer.safetensors");
  ASSERT_TRUE(odd_file.ok());
  auto odd_tokenizer = ShapeTokenizer::from_file(std::move(odd_file).value(), odd);
  ASSERT_TRUE(odd_tokenizer.ok()) << odd_tokenizer.error().to_string();
  EXPECT_FALSE(odd_tokenizer->fused_occupancy_available());

  // Where it runs, the fused decoder agrees with the layered one on random weights too.
  if (small_tokenizer->fused_occupancy_available())
    expect_fused_occupancy_matches_layered(*small_tokenizer, small.width);
}

// A head size need not be a multiple of 16: the per-head products take masked
// tails. Width 96 over 4 heads (24 per head, the built-in model's) and width
// 48 over 4 (12, under one vector) take the fused path and agree with the
// layered one, at points and by grid index.
TEST(ShapeTokenizerLoad, FusedOccupancyTakesAnyHeadSize) {
  if (std::string(cpu::kernel_isa()) != "avx512") GTEST_SKIP() << "the fused decoder needs AVX-512";
  for (const auto& [width, heads] : {std::pair<int64_t, int64_t>{96, 4}, std::pair<int64_t, int64_t>{48, 4}}) {
    SCOPED_TRACE("width " + std::to_string(width) + ", " + std::to_string(heads) + " heads");
    ShapeModelConfig config = tiny_config();
    config.width = width;
    config.heads = heads;
    config.latents = 20;
    config.num_freqs = 8;
    auto file = random_weights_file(expected_shape_tensors(config), uint32_t(20 + width), DType::kF32,
                                    "random shape_tokenizer.safetensors");
    ASSERT_TRUE(file.ok());
    auto tokenizer = ShapeTokenizer::from_file(std::move(file).value(), config);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.error().to_string();
    ASSERT_TRUE(tokenizer->fused_occupancy_available());
    expect_fused_occupancy_matches_layered(*tokenizer, width);
  }
}

}  // namespace
}  // namespace cubeforge
