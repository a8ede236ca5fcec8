// Text to mesh end to end on the fixture model folder: the prompt in
// meta.json must give the reference's tokens in both attention modes, and
// the mesh must match the reference's within 1% of its diagonal.
#include <gtest/gtest.h>

#include <cmath>

#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/pipeline/generation.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

class Pipeline : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (!testing::oracle_available() || !std::filesystem::exists(oracle_dir() / "clip")) return;
    auto model = CubeModel::load(oracle_dir());
    ASSERT_TRUE(model.ok()) << model.error().to_string();
    model_ = new CubeModel(std::move(*model));
    auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
    ASSERT_TRUE(expected.ok());
    expected_ = new SafetensorsFile(std::move(*expected));
    auto meta = read_file_text(oracle_dir() / "meta.json");
    ASSERT_TRUE(meta.ok());
    prompt_ = nlohmann::json::parse(*meta).value("prompt", "");
  }
  static void TearDownTestSuite() {
    delete model_;
    delete expected_;
    model_ = nullptr;
    expected_ = nullptr;
  }
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    if (!model_) GTEST_SKIP() << "fixture folder has no clip/ model";
  }
  std::vector<int> ids(const std::string& name) {
    auto t = expected_->read_i64(name);
    EXPECT_TRUE(t.ok());
    return t.ok() ? std::vector<int>(t->begin(), t->end()) : std::vector<int>{};
  }

  static inline CubeModel* model_ = nullptr;
  static inline SafetensorsFile* expected_ = nullptr;
  static inline std::string prompt_;
};

TEST_F(Pipeline, PromptGivesReferenceTokensInBothAttentionModes) {
  for (auto [mode, fixture] : {std::pair{AttentionMode::kCausal, "cfg.causal.tokens"},
                               std::pair{AttentionMode::kReference, "cfg.refkv.tokens"}}) {
    GenerationRequest request;
    request.prompt = prompt_;
    request.attention = mode;
    request.resolution = 4;
    std::vector<int> streamed;
    auto result = generate_shape(*model_, request, [&](const GenerationEvent& e) {
      if (e.kind == GenerationEvent::Kind::kToken) streamed.push_back(e.token);
    });
    ASSERT_TRUE(result.ok()) << result.error().to_string();
    EXPECT_EQ(result->tokens, ids(fixture)) << fixture;
    EXPECT_EQ(streamed, result->tokens) << "the event stream carries every token in order";
  }
}

TEST_F(Pipeline, MeshMatchesReferenceWithinOnePercent) {
  MeshingOptions options;
  options.resolution = 5;
  options.vertex_mapping = VertexMapping::kReference;
  options.remove_floaters = false;
  options.target_faces = -1;
  options.coarse_to_fine = false;
  auto result = tokens_to_mesh(*model_, ids("decode.tokens"), options);
  ASSERT_TRUE(result.ok()) << result.error().to_string();
  if (!expected_->contains("decode.mesh_vertices")) {
    EXPECT_TRUE(result->mesh.empty()) << "the reference found no surface";
    return;
  }
  Mesh reference;
  reference.positions = *expected_->read_f32("decode.mesh_vertices");
  auto faces = expected_->read_i64("decode.mesh_faces");
  ASSERT_TRUE(faces.ok());
  for (int64_t i : *faces) reference.indices.push_back(uint32_t(i));
  auto chamfer = chamfer_distance(result->mesh, reference);
  ASSERT_TRUE(chamfer.ok()) << chamfer.error().to_string();
  const double diagonal = bounding_diagonal(reference);
  EXPECT_LT(chamfer->symmetric, 0.01 * diagonal) << "symmetric Chamfer " << chamfer->symmetric;
}

TEST_F(Pipeline, CoarseToFineMeshAgreesWithDense) {
  MeshingOptions options;
  options.resolution = 6;
  options.target_faces = -1;
  options.remove_floaters = false;
  options.coarse_to_fine = false;
  auto dense = tokens_to_mesh(*model_, ids("decode.tokens"), options);
  options.coarse_to_fine = true;
  auto refined = tokens_to_mesh(*model_, ids("decode.tokens"), options);
  ASSERT_TRUE(dense.ok()) << dense.error().to_string();
  ASSERT_TRUE(refined.ok()) << refined.error().to_string();
  EXPECT_LE(refined->stats.occupancy_points, dense->stats.occupancy_points);
  if (dense->mesh.empty()) {
    EXPECT_TRUE(refined->mesh.empty());
    return;
  }
  auto chamfer = chamfer_distance(refined->mesh, dense->mesh);
  ASSERT_TRUE(chamfer.ok());
  EXPECT_LT(chamfer->symmetric, 0.002 * bounding_diagonal(dense->mesh));
}

TEST_F(Pipeline, CancelStopsGeneration) {
  GenerationRequest request;
  request.prompt = prompt_;
  std::atomic<bool> cancel{false};
  int tokens = 0;
  auto result = generate_shape(*model_, request, [&](const GenerationEvent& e) {
    if (e.kind == GenerationEvent::Kind::kToken && ++tokens == 3) cancel.store(true);
  }, &cancel);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(tokens, 3);
}

TEST_F(Pipeline, BadRequestsAreClearErrors) {
  GenerationRequest request;
  request.prompt = prompt_;
  request.bbox = std::array<float, 3>{1.f, 0.f, 2.f};
  auto result = generate_shape(*model_, request);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("bounding box"), std::string::npos);
  request.bbox.reset();
  request.resolution = 13;
  result = generate_shape(*model_, request);
  ASSERT_FALSE(result.ok());
  EXPECT_NE(result.error().message.find("resolution"), std::string::npos);
}

TEST(PipelineBbox, NormalisedLikeTheReference) {
  auto b = normalize_bbox({1.f, 2.f, 1.5f});
  ASSERT_TRUE(b.ok());
  EXPECT_FLOAT_EQ((*b)[1], 1.925f);
  EXPECT_FLOAT_EQ((*b)[0], 0.9625f);
}

// 3e38 is a finite float and was accepted; every side is held to a range,
// and the proportions to what a grid can show.
TEST(PipelineBbox, SidesOutsideTheirRangeAreRefused) {
  for (const std::array<float, 3>& size : std::vector<std::array<float, 3>>{
           {3e38f, 1.f, 1.f}, {3e38f, 3e38f, 3e38f}, {1e-7f, 1e-7f, 1e-7f}, {0.f, 1.f, 1.f}, {NAN, 1.f, 1.f}}) {
    auto b = normalize_bbox(size);
    ASSERT_FALSE(b.ok()) << size[0];
    EXPECT_NE(b.error().message.find("sides must be numbers from"), std::string::npos) << b.error().message;
  }
  auto thin = normalize_bbox({2000.f, 1.f, 1.f});
  ASSERT_FALSE(thin.ok());
  EXPECT_NE(thin.error().message.find("under 1/1000 of the largest"), std::string::npos) << thin.error().message;
  EXPECT_TRUE(normalize_bbox({1e6f, 1e6f, 1e3f}).ok());
  EXPECT_TRUE(normalize_bbox({1e-6f, 1e-6f, 1e-6f}).ok());
}

TEST(PipelineModelFolder, MissingFolderExplainsHowToAssembleOne) {
  auto model = CubeModel::load("/nonexistent/cubeforge-model");
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.error().code, ErrorCode::kNotFound);
  EXPECT_NE(model.error().message.find("Roblox/cube3d-v0.5"), std::string::npos);
  EXPECT_NE(model.error().message.find("/nonexistent/cubeforge-model"), std::string::npos);
}

}  // namespace
}  // namespace cubeforge
