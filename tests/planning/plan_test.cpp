// Planning on a model folder of the fixture's layout: refusals name the option
// at fault before anything is opened; auto takes the CPU for one request the
// GPU does not run and keeps the GPU (when there is one) for the next; what a
// block-diffusion model cannot honour is said before a run.
#include "inference/planning/plan.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "tests/support/hostile_files.h"
#include "tests/support/oracle.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

OptionKey refused_option(const Status& status) {
  EXPECT_FALSE(status.ok());
  if (status.ok()) return OptionKey::kTrace;
  auto option = error_option(status.error());
  EXPECT_TRUE(option) << status.error().to_string();
  return option.value_or(OptionKey::kTrace);
}

template <class T>
Status status_of(const Result<T>& result) {
  if (result.ok()) return ok_status();
  return result.error();
}

class Planning : public ::testing::Test {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    auto loaded = CubeModel::load(oracle_dir());
    ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
    model_.emplace(std::move(*loaded));
  }
  GenerationRequest request() const {
    GenerationRequest r;
    r.prompt = "a chair";
    r.backend = BackendChoice::kAuto;
    return r;
  }
  std::optional<CubeModel> model_;
};

TEST_F(Planning, RefusalsNameTheOptionBeforeAnythingIsOpened) {
  GenerationRequest r = request();
  r.resolution = kMaxResolution + 1;
  EXPECT_EQ(refused_option(status_of(plan_generation(*model_, r))), OptionKey::kResolution);
  r = request();
  r.latent_top_k = model_->shape().config().latents + 1;  // more latents than the model has
  EXPECT_EQ(refused_option(status_of(plan_generation(*model_, r))), OptionKey::kLatentTopK);
  r = request();
  r.decoding.mode = DecodingMode::kJacobi;
  r.sampling.greedy = false;  // exact parallel decoding reproduces greedy decoding
  EXPECT_EQ(refused_option(can_run(*model_, r)), OptionKey::kSampling);
  EXPECT_EQ(refused_option(status_of(plan_generation(*model_, r))), OptionKey::kSampling);
  r = request();
  r.decoding.mode = DecodingMode::kDiffusion;  // the fixture is autoregressive
  EXPECT_EQ(refused_option(can_run(*model_, r)), OptionKey::kDecoding);
  r = request();
  r.bbox = std::array<float, 3>{1.f, 0.f, 1.f};
  EXPECT_EQ(refused_option(can_run(*model_, r)), OptionKey::kBoundingBox);
  EXPECT_TRUE(can_run(*model_, request()).ok());
}

TEST_F(Planning, AKvRankReadsTheModelFoldersBasesOrSaysWhereTheyWouldBe) {
  GenerationRequest r = request();
  r.kv_cache.rank = 16;
  auto planned = plan_generation(*model_, r);
  if (std::filesystem::exists(oracle_dir() / kKvBasesFile)) {
    ASSERT_TRUE(planned.ok()) << planned.error().to_string();
    ASSERT_NE(planned->request.kv_cache.low_rank, nullptr);
    return;
  }
  ASSERT_FALSE(planned.ok());
  EXPECT_EQ(planned.error().code, ErrorCode::kNotFound);
  EXPECT_EQ(error_option(planned.error()), OptionKey::kKvRank);
  EXPECT_NE(planned.error().message.find(kKvBasesFile), std::string::npos) << planned.error().message;
  r.use_kv_cache = false;  // without the cache there is nothing to store at a rank
  r.kv_cache = KvCacheOptions{};
  EXPECT_TRUE(plan_generation(*model_, r).ok());
}

// Auto asks each request: parallel decoding runs on the CPU backend, and the
// backend opened for the sequential request is kept for the next one.
TEST_F(Planning, AutoChoosesPerRequestAndKeepsWhatItOpened) {
  const bool gpu = cuda_availability().available;
  PlanCache cache;
  auto first = plan_generation(*model_, request(), &cache);
  ASSERT_TRUE(first.ok()) << first.error().to_string();
  EXPECT_EQ(first->request.token_backend->kind(), gpu ? BackendKind::kCuda : BackendKind::kCpu);
  EXPECT_NE(first->backend_reason.find("auto: "), std::string::npos) << first->backend_reason;

  GenerationRequest parallel = request();
  parallel.decoding.mode = DecodingMode::kJacobi;
  auto second = plan_generation(*model_, parallel, &cache);
  ASSERT_TRUE(second.ok()) << second.error().to_string();
  EXPECT_EQ(second->request.token_backend->kind(), BackendKind::kCpu) << second->backend_reason;
  EXPECT_TRUE(second->request.token_backend->supports(second->request.backend_request()).ok());

  auto third = plan_generation(*model_, request(), &cache);
  ASSERT_TRUE(third.ok()) << third.error().to_string();
  EXPECT_EQ(third->request.token_backend, first->request.token_backend) << "opened once, kept";

  GenerationRequest on_cuda = parallel;
  on_cuda.backend = BackendChoice::kCuda;
  const Status cuda_answer = can_run(*model_, on_cuda);
  ASSERT_FALSE(cuda_answer.ok()) << "the CUDA backend decodes one token per step";
  const OptionKey at_fault = refused_option(cuda_answer);
  EXPECT_TRUE(at_fault == OptionKey::kDecoding || at_fault == OptionKey::kBackend) << option_key(at_fault);
}

// A block-diffusion model takes each position's most likely code: sampling is
// refused naming the sampling switch, before a run, on any backend choice.
TEST(PlanningBlockDiffusion, SamplingIsRefusedNamingTheSwitch) {
  CUBEFORGE_REQUIRE_ORACLE();
  testing::ScratchFolder scratch("plan-diffusion");
  ASSERT_TRUE(testing::make_oracle_block_diffusion_model(scratch / "model"));
  auto model = CubeModel::load(scratch / "model");
  ASSERT_TRUE(model.ok()) << model.error().to_string();
  GenerationRequest r;
  r.prompt = "a chair";
  r.decoding.mode = DecodingMode::kDiffusion;
  EXPECT_TRUE(can_run(*model, r).ok());
  r.sampling.greedy = false;
  EXPECT_EQ(refused_option(can_run(*model, r)), OptionKey::kSampling);
  r.sampling.greedy = true;
  r.decoding.mode = DecodingMode::kSequential;  // a block-diffusion model decodes by blocks
  EXPECT_EQ(refused_option(can_run(*model, r)), OptionKey::kDecoding);
}

// A block-diffusion folder's own threshold (gpt_model.block_diffusion.threshold)
// is planned into a request that leaves the threshold to the model, so what
// runs and what every report says agree; a threshold asked for stays.
TEST(PlanningBlockDiffusion, ARequestLeavingTheThresholdToTheModelGetsTheFoldersThreshold) {
  CUBEFORGE_REQUIRE_ORACLE();
  testing::ScratchFolder scratch("plan-diffusion-threshold");
  const auto folder = scratch / "model";
  ASSERT_TRUE(testing::make_oracle_block_diffusion_model(folder));
  GenerationRequest r;
  r.prompt = "a chair";
  r.backend = BackendChoice::kCpu;
  r.decoding.mode = DecodingMode::kDiffusion;
  ASSERT_EQ(r.decoding.diffusion.threshold, 0.f) << "the default leaves the threshold to the model";
  {
    auto unnamed = CubeModel::load(folder);
    ASSERT_TRUE(unnamed.ok()) << unnamed.error().to_string();
    auto planned = plan_generation(*unnamed, r);
    ASSERT_TRUE(planned.ok()) << planned.error().to_string();
    EXPECT_EQ(planned->request.decoding.diffusion.threshold, kDefaultDiffusionThreshold);
  }
  std::ifstream in(folder / "config.yaml");
  std::string config((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::string section = "  block_diffusion:\n";
  const size_t at = config.find(section);
  ASSERT_NE(at, std::string::npos) << config;
  config.insert(at + section.size(), "    threshold: 0.55\n");
  std::ofstream(folder / "config.yaml") << config;
  auto named = CubeModel::load(folder);
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  auto planned = plan_generation(*named, r);
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  EXPECT_EQ(planned->request.decoding.diffusion.threshold, 0.55f);
  r.decoding.diffusion.threshold = 0.8f;
  planned = plan_generation(*named, r);
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  EXPECT_EQ(planned->request.decoding.diffusion.threshold, 0.8f);
}

// A folder's own guidance scale (gpt_model.guidance_scale) is planned into a
// request that leaves guidance to the model, and a generation run without
// planning settles it the same way: the tokens are those of the scale asked
// for explicitly. A scale asked for stays; a backend refuses one never settled.
TEST(PlanningGuidance, ARequestLeavingGuidanceToTheModelGetsTheFoldersScale) {
  CUBEFORGE_REQUIRE_ORACLE();
  testing::ScratchFolder scratch("plan-guidance");
  GenerationRequest r;
  r.prompt = "a chair";
  r.backend = BackendChoice::kCpu;
  r.resolution = 4;
  ASSERT_EQ(r.guidance_scale, kModelGuidance) << "a request leaves guidance to the model";
  auto reference = CubeModel::load(oracle_dir());
  ASSERT_TRUE(reference.ok()) << reference.error().to_string();
  auto planned = plan_generation(*reference, r);
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  EXPECT_EQ(planned->request.guidance_scale, kReferenceGuidance) << "a config naming none: the reference's";

  const float named_scale = 1.5f;
  ASSERT_TRUE(testing::make_oracle_model_variant(scratch / "model", "  guidance_scale: 1.5\n"));
  auto named = CubeModel::load(scratch / "model");
  ASSERT_TRUE(named.ok()) << named.error().to_string();
  planned = plan_generation(*named, r);
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  EXPECT_EQ(planned->request.guidance_scale, named_scale);
  EXPECT_EQ(planned->request.batch(), 2);

  auto left = generate_shape_tokens(*named, r);
  ASSERT_TRUE(left.ok()) << left.error().to_string();
  GenerationRequest asked = r;
  asked.guidance_scale = named_scale;
  auto explicit_scale = generate_shape_tokens(*reference, asked);
  ASSERT_TRUE(explicit_scale.ok()) << explicit_scale.error().to_string();
  EXPECT_EQ(left->tokens, explicit_scale->tokens);

  asked.guidance_scale = 0.f;
  planned = plan_generation(*named, asked);
  ASSERT_TRUE(planned.ok()) << planned.error().to_string();
  EXPECT_EQ(planned->request.guidance_scale, 0.f) << "guidance turned off stays off";
  EXPECT_EQ(planned->request.batch(), 1);

  TokenSessionOptions unsettled;
  unsettled.tokens = 1;
  unsettled.cond_length = 1;
  unsettled.guidance_scale = kModelGuidance;
  EXPECT_EQ(refused_option(check_token_session_options(named->gpt(), unsettled)), OptionKey::kGuidance);
}

}  // namespace
}  // namespace cubeforge
