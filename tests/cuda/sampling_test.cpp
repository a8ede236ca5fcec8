// On-device CFG combine and sampling against CPU references: combined logits
// bit for bit (PyTorch's rounding of the guidance weights), greedy tokens
// exactly, the embedding of the chosen token in every next-input row, the
// token ring, and for temperature / top-k / top-p: every sampled token inside
// the support that the CPU TokenSampler (inference/sampling) computes, the same
// token as an inverse CDF in token order for the same uniform number (when no
// boundary is within 1e-5 of a decision), and frequencies that match the
// softmax.
#include <algorithm>
#include <cmath>
#include <numeric>

#include "cuda_test_support.h"
#include "inference/cuda/sampling.h"
#include "inference/sampling/sampler.h"

namespace cubeforge::cuda::testing {
namespace {

std::vector<float> cpu_combine(const std::vector<float>& logits, int rows, int vocab, int stride, float scale,
                               int total_steps, int step) {
  std::vector<float> combined(vocab);
  const double gamma = double(scale) * double(total_steps - step) / double(total_steps);
  const float conditional_weight = float(1.0 + gamma), unconditional_weight = float(gamma);
  for (int i = 0; i < vocab; ++i) {
    if (rows == 1) {
      combined[i] = logits[i];
    } else {
      const float a = conditional_weight * logits[i];
      const float b = unconditional_weight * logits[std::size_t(stride) + i];
      combined[i] = a - b;
    }
  }
  return combined;
}

struct CpuChoice {
  int token = -1;
  std::vector<bool> allowed;  // the support after top-k / top-p
  bool ambiguous = false;     // a threshold or a CDF boundary within 1e-5 of the decision
};

CpuChoice cpu_choose(const std::vector<float>& logits, const SamplingOptions& options, int step) {
  const int vocab = int(logits.size());
  CpuChoice choice;
  const int argmax = int(std::max_element(logits.begin(), logits.end()) - logits.begin());
  if (options.greedy) {
    choice.token = argmax;
    choice.allowed.assign(vocab, false);
    choice.allowed[argmax] = true;
    return choice;
  }
  const float max_logit = logits[argmax];
  std::vector<float> weight(vocab);
  for (int i = 0; i < vocab; ++i) weight[i] = std::exp((logits[i] - max_logit) / options.temperature);
  if (options.top_k > 0 && options.top_k < vocab) {
    std::vector<float> sorted = logits;
    std::nth_element(sorted.begin(), sorted.begin() + (options.top_k - 1), sorted.end(), std::greater<float>());
    const float kth = sorted[options.top_k - 1];
    for (int i = 0; i < vocab; ++i)
      if (logits[i] < kth) weight[i] = 0.0f;
  }
  if (options.top_p < 1.0f) {
    // The most likely tokens, heaviest first, until their mass reaches p.
    const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
    const double limit = double(options.top_p) * total;
    std::vector<float> sorted = weight;
    std::sort(sorted.begin(), sorted.end(), std::greater<float>());
    double mass = 0.0;
    float smallest_kept = sorted[0];
    for (std::size_t i = 0; i < sorted.size() && sorted[i] > 0.0f;) {
      std::size_t j = i;
      while (j < sorted.size() && sorted[j] == sorted[i]) mass += sorted[j++];
      if (std::abs(mass - limit) < 1e-5 * total) choice.ambiguous = true;
      smallest_kept = sorted[i];
      if (mass >= limit) break;
      i = j;
    }
    for (float& w : weight)
      if (w < smallest_kept) w = 0.0f;
  }
  choice.allowed.resize(vocab);
  for (int i = 0; i < vocab; ++i) choice.allowed[i] = weight[i] > 0.0f;
  const double total = std::accumulate(weight.begin(), weight.end(), 0.0);
  const double target = double(sampling_uniform(options.seed, step)) * total;
  double prefix = 0.0;
  for (int i = 0; i < vocab; ++i) {
    if (weight[i] <= 0.0f) continue;
    prefix += weight[i];
    if (std::abs(prefix - target) < 1e-5 * total) choice.ambiguous = true;
    if (choice.token < 0 && target < prefix) choice.token = i;
  }
  if (choice.token < 0) choice.token = int(std::find(choice.allowed.rbegin(), choice.allowed.rend(), true) - choice.allowed.rbegin());
  return choice;
}

class SamplingTest : public CudaTest {
 protected:
  static constexpr int kEmbeddingDim = 40;

  struct Setup {
    int rows = 2;
    int vocab = 16384;
    int stride = 16387;  // the lm_head's rows: codes plus three specials
    float scale = 3.0f;
    int total_steps = 1024;
  };

  // Runs `count` consecutive steps from `first_step` on fixed logits and returns the tokens.
  std::vector<int> sample_steps(const Setup& setup, const std::vector<float>& logits, const SamplingOptions& options,
                                int first_step, int count, std::vector<float>* combined = nullptr) {
    auto logits_device = upload(logits, "logits");
    auto step_device = upload(std::vector<int>{first_step}, "step");
    auto tokens = DeviceBuffer<int>::allocate(first_step + count, "tokens");
    auto combined_device = DeviceBuffer<float>::allocate(setup.vocab, "combined");
    if (!logits_device.ok() || !step_device.ok() || !tokens.ok() || !combined_device.ok()) {
      ADD_FAILURE() << "allocation failed";
      return {};
    }
    CfgSampleArgs args;
    args.logits = logits_device->data();
    args.logits_stride = setup.stride;
    args.rows = setup.rows;
    args.vocab = setup.vocab;
    args.guidance_scale = setup.scale;
    args.total_steps = setup.total_steps;
    args.step = step_device->data();
    args.sampling = options;
    args.tokens = tokens->data();
    args.combined_logits = combined ? combined_device->data() : nullptr;
    for (int i = 0; i < count; ++i) {
      auto status = cfg_sample_and_embed(args, nullptr);
      if (!status.ok()) {
        ADD_FAILURE() << status.error().to_string();
        return {};
      }
    }
    if (!synchronize_device().ok()) {
      ADD_FAILURE() << "kernel failed";
      return {};
    }
    auto all_tokens = tokens->download();
    auto final_step = step_device->download();
    EXPECT_EQ(final_step.value()[0], first_step + count) << "the step counter must advance once per launch";
    if (combined) *combined = combined_device->download().value();
    return std::vector<int>(all_tokens.value().begin() + first_step, all_tokens.value().end());
  }
};

TEST_F(SamplingTest, CfgCombineIsBitExactAndGreedyPicksTheFirstMaximum) {
  Setup setup;
  auto logits = random_floats(std::size_t(2) * setup.stride, 41u, -8.0f, 8.0f);
  for (int step : {0, 1, 511, 1023}) {
    std::vector<float> combined;
    auto tokens = sample_steps(setup, logits, {}, step, 1, &combined);
    ASSERT_EQ(tokens.size(), 1u);
    const auto expected = cpu_combine(logits, 2, setup.vocab, setup.stride, setup.scale, setup.total_steps, step);
    ASSERT_EQ(combined, expected) << "step " << step;
    EXPECT_EQ(tokens[0], int(std::max_element(expected.begin(), expected.end()) - expected.begin()));
  }
  // A tie: the lower index wins, as torch.argmax.
  std::vector<float> tied(setup.stride * 2, 0.0f);
  tied[9000] = tied[12000] = 5.0f;
  tied[setup.stride + 9000] = tied[setup.stride + 12000] = 1.0f;
  EXPECT_EQ(sample_steps(setup, tied, {}, 3, 1), std::vector<int>{9000});
  // Special tokens past `vocab` are never chosen however large.
  tied[16385] = 100.0f;
  EXPECT_EQ(sample_steps(setup, tied, {}, 3, 1), std::vector<int>{9000});
}

TEST_F(SamplingTest, GreedyWithoutGuidanceAndSmallVocabularies) {
  for (int vocab : {1000, 5000, 16384}) {
    Setup setup{.rows = 1, .vocab = vocab, .stride = vocab + 3};
    auto logits = random_floats(setup.stride, 42u + vocab);
    auto tokens = sample_steps(setup, logits, {}, 0, 1);
    ASSERT_EQ(tokens.size(), 1u);
    EXPECT_EQ(tokens[0], int(std::max_element(logits.begin(), logits.begin() + vocab) - logits.begin()));
  }
}

TEST_F(SamplingTest, SampledTokensMatchTheCpuInverseCdf) {
  struct Mode {
    int vocab;
    SamplingOptions options;
  };
  const Mode modes[] = {
      {16384, {.greedy = false, .temperature = 0.8f, .seed = 7}},
      {16384, {.greedy = false, .temperature = 1.0f, .top_k = 40, .seed = 8}},
      {5000, {.greedy = false, .temperature = 1.0f, .top_p = 0.9f, .seed = 9}},
      {3000, {.greedy = false, .temperature = 0.7f, .top_k = 100, .top_p = 0.5f, .seed = 10}},
      {1000, {.greedy = false, .temperature = 2.0f, .top_k = 1, .seed = 11}},
      {2000, {.greedy = false, .temperature = 1.5f, .top_p = 0.05f, .seed = 12}},
  };
  for (const Mode& mode : modes) {
    SCOPED_TRACE("vocab " + std::to_string(mode.vocab) + " T " + std::to_string(mode.options.temperature) + " k " +
                 std::to_string(mode.options.top_k) + " p " + std::to_string(mode.options.top_p));
    Setup setup{.rows = 2, .vocab = mode.vocab, .stride = mode.vocab + 3, .total_steps = 64};
    auto logits = random_floats(std::size_t(2) * setup.stride, 43u + mode.vocab, -4.0f, 4.0f);
    const int steps = 64;
    auto tokens = sample_steps(setup, logits, mode.options, 0, steps);
    ASSERT_EQ(int(tokens.size()), steps);
    int compared = 0;
    for (int step = 0; step < steps; ++step) {
      const auto combined = cpu_combine(logits, 2, setup.vocab, setup.stride, setup.scale, setup.total_steps, step);
      const CpuChoice expected = cpu_choose(combined, mode.options, step);
      ASSERT_GE(tokens[step], 0);
      ASSERT_LT(tokens[step], setup.vocab);
      EXPECT_TRUE(expected.allowed[tokens[step]]) << "step " << step << ": token " << tokens[step] << " outside the support";
      if (!expected.ambiguous) {
        // The project's CPU sampler agrees on the support.
        const auto cpu_support = TokenSampler(mode.options).support(combined);
        std::vector<int> gpu_support;
        for (int i = 0; i < setup.vocab; ++i)
          if (expected.allowed[i]) gpu_support.push_back(i);
        EXPECT_EQ(gpu_support, cpu_support) << "step " << step;
        EXPECT_EQ(tokens[step], expected.token) << "step " << step;
        ++compared;
      }
    }
    EXPECT_GE(compared, steps * 9 / 10) << "too many draws near a boundary to check exactness";
  }
}

TEST_F(SamplingTest, FrequenciesFollowTheSoftmax) {
#ifdef CUBEFORGE_CUDA_EMULATED
  GTEST_SKIP() << "8000 sampling launches: too slow for the CPU emulator";
#endif
  const std::vector<float> logits = {0.0f, 1.0f, 2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.5f};
  Setup setup{.rows = 1, .vocab = 8, .stride = 8, .total_steps = 1};
  const int draws = 4000;
  auto tokens = sample_steps(setup, logits, {.greedy = false, .temperature = 1.0f, .seed = 1234}, 0, draws);
  ASSERT_EQ(int(tokens.size()), draws);
  std::vector<int> counts(8, 0);
  for (int token : tokens) ++counts.at(token);
  double total = 0.0;
  for (float l : logits) total += std::exp(l);
  for (int i = 0; i < 8; ++i) {
    const double p = std::exp(logits[i]) / total;
    const double sigma = std::sqrt(draws * p * (1 - p));
    EXPECT_NEAR(counts[i], draws * p, 5 * sigma + 1) << "token " << i;
  }
  // Top-k 2 keeps tokens 5 and 2 only, in ratio e^3 : e^2.
  tokens = sample_steps(setup, logits, {.greedy = false, .temperature = 1.0f, .top_k = 2, .seed = 99}, 0, draws);
  std::fill(counts.begin(), counts.end(), 0);
  for (int token : tokens) ++counts.at(token);
  EXPECT_EQ(counts[2] + counts[5], draws);
  const double p5 = std::exp(3.0) / (std::exp(3.0) + std::exp(2.0));
  EXPECT_NEAR(counts[5], draws * p5, 5 * std::sqrt(draws * p5 * (1 - p5)));
}

TEST_F(SamplingTest, SameSeedSameTokensAcrossRuns) {
  Setup setup{.rows = 2, .vocab = 16384, .stride = 16387, .total_steps = 32};
  auto logits = random_floats(std::size_t(2) * setup.stride, 44u, -3.0f, 3.0f);
  const SamplingOptions options{.greedy = false, .temperature = 1.0f, .top_k = 200, .top_p = 0.95f, .seed = 2024};
  EXPECT_EQ(sample_steps(setup, logits, options, 0, 32), sample_steps(setup, logits, options, 0, 32));
}

TEST_F(SamplingTest, EmbeddingRowsTokenRingAndStepCounter) {
  const int vocab = 1000, stride = 1003, rows = 2, dim = kEmbeddingDim, ring_capacity = 4, steps = 10;
  auto logits = random_floats(std::size_t(rows) * stride, 45u);
  auto embedding = bf16_exact(random_floats(std::size_t(stride) * dim, 46u));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto logits_device, upload(logits, "logits"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto embedding_device, upload(to_bf16(embedding), "wte"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto step, upload(std::vector<int>{0}, "step"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto next_input, DeviceBuffer<float>::allocate(std::size_t(rows) * (dim + 8), "x"));
  CUBEFORGE_ASSERT_OK(next_input.fill_bytes(0xff));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto ring, PinnedHostBuffer<int>::allocate(ring_capacity, "ring"));
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto ring_count, PinnedHostBuffer<int>::allocate(1, "ring count"));
  ring_count.host_data()[0] = 0;

  CfgSampleArgs args;
  args.logits = logits_device.data();
  args.logits_stride = stride;
  args.rows = rows;
  args.vocab = vocab;
  args.total_steps = steps;
  args.step = step.data();
  args.host_ring = ring.device_data();
  args.host_ring_capacity = ring_capacity;
  args.host_ring_count = ring_count.device_data();
  args.embedding_type = DType::kBF16;
  args.embedding = embedding_device.data();
  args.embedding_dim = dim;
  args.next_input = next_input.data();
  args.next_input_stride = dim + 8;
  args.next_input_rows = rows;
  std::vector<int> expected_tokens;
  for (int i = 0; i < steps; ++i) {
    CUBEFORGE_ASSERT_OK(cfg_sample_and_embed(args, nullptr));
    const auto combined = cpu_combine(logits, rows, vocab, stride, 3.0f, steps, i);
    expected_tokens.push_back(int(std::max_element(combined.begin(), combined.end()) - combined.begin()));
  }
  CUBEFORGE_ASSERT_OK(synchronize_device());
  EXPECT_EQ(static_cast<volatile int*>(ring_count.host_data())[0], steps);
  for (int i = steps - ring_capacity; i < steps; ++i)
    EXPECT_EQ(static_cast<volatile int*>(ring.host_data())[i % ring_capacity], expected_tokens[i]) << "step " << i;
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto x, next_input.download());
  const int last = expected_tokens.back();
  for (int r = 0; r < rows; ++r) {
    for (int d = 0; d < dim + 8; ++d) {
      const float value = x[std::size_t(r) * (dim + 8) + d];
      if (d < dim) EXPECT_EQ(value, embedding[std::size_t(last) * dim + d]) << "row " << r << " dim " << d;
      else EXPECT_TRUE(std::isnan(value)) << "padding written at row " << r << " dim " << d;
    }
  }
  CUBEFORGE_ASSERT_OK_AND_ASSIGN(auto final_step, step.download());
  EXPECT_EQ(final_step[0], steps);
}

TEST(SamplingArguments, UniformNumbersAreStableAndSpread) {
  EXPECT_EQ(sampling_uniform(1, 0), sampling_uniform(1, 0));
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(1, 1));
  EXPECT_NE(sampling_uniform(1, 0), sampling_uniform(2, 0));
  double sum = 0.0;
  for (int i = 0; i < 10000; ++i) {
    const float u = sampling_uniform(77, i);
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

TEST(SamplingArguments, RejectsVocabulariesPastOneBlock) {
  static int step = 0;
  static float logits[4];
  CfgSampleArgs args;
  args.logits = logits;
  args.step = &step;
  args.vocab = kMaxSamplingVocab + 1;
  auto status = cfg_sample_and_embed(args, nullptr);
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.error().code, ErrorCode::kUnsupported);
}

}  // namespace
}  // namespace cubeforge::cuda::testing
