// Latent selection in coarse-to-fine occupancy (latent_selection.h) on the
// fixture's shape tokenizer and the reference's latents: with every latent
// selected the grid is full attention's bit for bit (on the fused decoder),
// the chosen top-k classifies every grid point as full attention does, and
// misuse is a clear error.
#include "inference/model/latent_selection.h"

#include <gtest/gtest.h>

#include "inference/geometry/occupancy_grid.h"
#include "inference/model/occupancy_slices.h"
#include "inference/pipeline/generation.h"
#include "tests/support/latent_selection_check.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

class LatentSelection : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::oracle_available()) return;
    auto yaml = parse_model_config_yaml(oracle_dir() / "config.yaml");
    ASSERT_TRUE(yaml.ok()) << yaml.error().to_string();
    auto shape = ShapeTokenizer::load(oracle_dir() / "shape_tokenizer.safetensors", &yaml->shape);
    ASSERT_TRUE(shape.ok()) << shape.error().to_string();
    shape_ = new ShapeTokenizer(std::move(*shape));
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok());
    auto latents = expected->read_f32("decode.latents");
    ASSERT_TRUE(latents.ok());
    latents_ = new std::vector<float>(std::move(*latents));
  }
  static void TearDownTestSuite() {
    delete shape_;
    delete latents_;
    shape_ = nullptr;
    latents_ = nullptr;
  }
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    ASSERT_NE(shape_, nullptr);
  }

  static inline ShapeTokenizer* shape_ = nullptr;
  static inline std::vector<float>* latents_ = nullptr;
};

// With every latent selected each block lists them all in order: the fused
// decoder then computes full attention's logits, so the grids are the same
// bits; layer at a time they classify every point alike. On this fixture
// (random weights, 24 latents whose attention is spread nearly evenly) that
// is also the only top-k that classifies every point as full attention does:
// 23 already changes thousands (docs/performance.md). Every point below the
// coarse level attends to its block's selection.
TEST_F(LatentSelection, EveryLatentSelectedIsFullAttention) {
  const int64_t S = shape_->config().latents;
  for (bool fused : {true, false}) {
    if (fused && !shape_->fused_occupancy_available()) continue;
    shape_->set_fused_occupancy(fused);
    for (int resolution = 5; resolution <= 7; ++resolution) {
      if (!fused && resolution == 7) continue;  // the layer-at-a-time path is slow; 5 and 6 cover it
      // At resolution 5 the default coarse level is the target: start lower.
      const int coarse = resolution == 5 ? 3 : 5;
      const auto check = testing::compare_latent_selection(*shape_, *latents_, resolution, coarse, S);
      ASSERT_TRUE(check.ok()) << check.error().to_string();
      const std::string where = std::string(fused ? "fused" : "layered") + ", resolution " + std::to_string(resolution);
      EXPECT_EQ(check->sign_disagreements, 0) << where;
      if (fused) {
        EXPECT_EQ(check->largest_difference, 0.0) << where;
      }
      const int64_t coarse_points =
          ((int64_t(1) << coarse) + 1) * ((int64_t(1) << coarse) + 1) * ((int64_t(1) << coarse) + 1);
      EXPECT_EQ(check->selection.full_attention_points, coarse_points) << where;
      EXPECT_EQ(check->selection.full_attention_points + check->selection.selected_points, check->evaluated_points)
          << where;
      EXPECT_EQ(check->evaluated_points, check->full_attention_evaluated_points) << where;
      // A block is the points one parent cell owns: at most 8 new ones (27 at the grid's far corner).
      EXPECT_GE(check->selection.blocks * 27, check->selection.selected_points) << where;
    }
    shape_->set_fused_occupancy(true);
  }
}

// Driven by hand: a cell none of whose corners was evaluated takes the
// latents of its parent cell (from the coarse level here), and every point
// then gets full attention's logit when k is every latent.
TEST_F(LatentSelection, CellsWithoutEvaluatedCornersTakeTheirParentsLatents) {
  const int64_t S = shape_->config().latents;
  auto prepared = shape_->prepare_latents(*latents_);
  ASSERT_TRUE(prepared.ok());
  GridSpec spec;
  spec.resolution = 6;
  const ShapeTokenizer::GridQueries grid = shape_->prepare_grid(grid_axis_coordinates(spec));
  auto selection = LatentSelectionField::create(*shape_, *prepared, grid, spec, S);
  ASSERT_TRUE(selection.ok()) << selection.error().to_string();
  // The coarse level, 3: every point of stride 8.
  std::vector<int32_t> coarse;
  for (int32_t i = 0; i <= 64; i += 8)
    for (int32_t j = 0; j <= 64; j += 8)
      for (int32_t k = 0; k <= 64; k += 8) coarse.insert(coarse.end(), {i, j, k});
  selection->begin_level(3);
  std::vector<float> coarse_values(coarse.size() / 3);
  ASSERT_TRUE(selection->evaluate(coarse, coarse_values).ok());
  // Resolution 6 next: (3, 3, 3)'s parent cell at level 5 spans 2..4 per axis,
  // no multiple of 8; its own parent at level 4 spans 0..4.
  selection->begin_level(6);
  const std::vector<int32_t> inside = {3, 3, 3, 50, 51, 49};
  std::vector<float> values(2), full(2);
  ASSERT_TRUE(selection->evaluate(inside, values).ok());
  EXPECT_EQ(selection->stats().inherited_blocks, 2);
  EXPECT_EQ(selection->stats().blocks, 2);
  ASSERT_TRUE(occupancy_on_grid_in_slices(*shape_, *prepared, grid, inside, full).ok());
  if (shape_->fused_occupancy_available()) {
    EXPECT_EQ(values, full);
  }
  EXPECT_EQ(selection->stats().kept_points, int64_t(coarse_values.size()));  // the target level's are not kept
}

TEST_F(LatentSelection, MisuseIsAClearError) {
  const int64_t S = shape_->config().latents;
  auto prepared = shape_->prepare_latents(*latents_);
  ASSERT_TRUE(prepared.ok());
  GridSpec spec;
  spec.resolution = 5;
  const ShapeTokenizer::GridQueries grid = shape_->prepare_grid(grid_axis_coordinates(spec));
  for (int64_t k : {int64_t(-1), S + 1}) {
    auto refused = LatentSelectionField::create(*shape_, *prepared, grid, spec, k);
    ASSERT_FALSE(refused.ok());
    EXPECT_NE(refused.error().message.find("use 0 (full attention) or 1 to " + std::to_string(S)), std::string::npos)
        << refused.error().message;
  }
  EXPECT_FALSE(LatentSelectionField::create(*shape_, *prepared, grid, spec, 0).ok());
  EXPECT_FALSE(check_latent_selection(4, /*coarse_to_fine=*/false, S).ok());
  EXPECT_TRUE(check_latent_selection(0, /*coarse_to_fine=*/false, S).ok());

  auto selection = LatentSelectionField::create(*shape_, *prepared, grid, spec, 4);
  ASSERT_TRUE(selection.ok());
  const std::vector<int32_t> point = {1, 1, 1};
  std::vector<float> value(1);
  EXPECT_FALSE(selection->evaluate(point, value).ok());  // no level begun
  selection->begin_level(3);                             // the coarse level, left unevaluated
  selection->begin_level(4);
  Status status = selection->evaluate(point, value);
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("must be evaluated at every point first"), std::string::npos)
      << status.error().message;
}

}  // namespace
}  // namespace cubeforge
