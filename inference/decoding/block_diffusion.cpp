// Block diffusion decoding with Fast-dLLM's confidence-aware parallel
// acceptance and key-value caches.
//
// The model's rows are the autoregressive inputs: position 0 is BOS and
// position t + 1 holds token t once decided, the mask token before; row t's
// output predicts token t. Blocks of B positions decode in order; block k is
// positions kB .. kB+B-1 and decides tokens kB .. kB+B-1. Its first position
// holds a known token (BOS, or the previous block's last token), and its rows
// see each other and every earlier block, never a later one. Each evaluation
// proposes the most likely code for every undecided token of the block (of
// the sub-block, with the dual cache) and accepts those the rule lets through,
// at least one.
//
// Key-value cache modes (DiffusionOptions::cache): `none` evaluates every
// position up to the block's end each time; `prefix` evaluates the block
// alone, and at a block's first evaluation the previous block too, now with
// its final tokens, so the cache of finished blocks is what `none` computes
// (the same bits: each row's arithmetic does not depend on the rows beside
// it); `dual` decodes a block in sub-blocks, evaluates the whole block at each
// sub-block's first evaluation and only the sub-block after that, reading the
// rest of the block (the masked positions after it included) from the cache
// of that first evaluation.
#include <algorithm>
#include <chrono>
#include <numeric>

#include "inference/decoding/choice.h"
#include "inference/decoding/decoding.h"

namespace cubeforge {

namespace {

struct Candidate {
  int token_index = 0;
  CodeChoice choice;
};

// Which candidates an evaluation accepts: never none.
std::vector<Candidate> accepted_by_rule(std::vector<Candidate> candidates, const DiffusionOptions& options) {
  // Most confident first; equal confidences keep the earlier position first.
  std::stable_sort(candidates.begin(), candidates.end(),
                   [](const Candidate& a, const Candidate& b) { return a.choice.confidence > b.choice.confidence; });
  size_t keep = 1;
  if (options.factor > 0.f) {
    // Fast-dLLM's factor rule: the n-th most confident (1-based) goes in while
    // its confidence is at least 1 - f / (n + 1).
    while (keep < candidates.size() &&
           candidates[keep].choice.confidence >= 1.0 - double(options.factor) / double(keep + 2))
      ++keep;
  } else {
    while (keep < candidates.size() && candidates[keep].choice.confidence > double(options.threshold)) ++keep;
  }
  candidates.resize(keep);
  return candidates;
}

}  // namespace

Result<DecodedTokens> decode_block_diffusion(DecodingSession& session, int count, float guidance_scale,
                                             const DiffusionOptions& asked, const TokenCallback& on_token) {
  const GptConfig& config = session.config();
  const DiffusionOptions options = diffusion_options_for_model(asked, config);
  if (!config.block_diffusion())
    return make_error(ErrorCode::kInvalidArgument, "block diffusion needs a block-diffusion model");
  const int block = options.block_size > 0 ? options.block_size : config.diffusion_block_size;
  const int sub_block = options.cache != DiffusionCache::kDual ? block
                        : options.sub_block_size > 0       ? options.sub_block_size
                                                           : std::max(1, block / 2);
  if (count < 1 || count % block != 0)
    return make_error(ErrorCode::kInvalidArgument, std::to_string(count) + " tokens are not a whole number of blocks of " +
                                                       std::to_string(block));
  if (block % sub_block != 0)
    return make_error(ErrorCode::kInvalidArgument, "the sub-block size " + std::to_string(sub_block) +
                                                       " does not divide the block size " + std::to_string(block));
  if (session.capacity() < count)
    return make_error(ErrorCode::kInvalidArgument, "the session holds fewer positions than the tokens to generate");
  const int rows = session.rows();
  const size_t vocabulary = size_t(config.vocab_size());
  DecodedTokens out;
  out.stats.mode = DecodingMode::kDiffusion;
  std::vector<int> decided(size_t(count), -1);
  auto input = [&](int position) {
    if (position == 0) return config.bos_id();
    const int token = decided[size_t(position - 1)];
    return token >= 0 ? token : config.mask_token_id;
  };
  auto block_end_of = [&](int position) { return (position / block + 1) * block; };

  CUBEFORGE_TRY(session.prefill({}, {}));  // the condition alone
  std::vector<float> logits, combined(size_t(config.codes));
  std::vector<int> feed, visible_end;
  std::vector<Candidate> candidates;
  for (int block_begin = 0; block_begin < count; block_begin += block) {
    const int block_end = block_begin + block;
    // The previous block is evaluated once more with its final tokens at this block's first evaluation.
    const int committed_from = block_begin > 0 ? block_begin - block : 0;
    bool block_started = false;
    for (int sub_begin = block_begin; sub_begin < block_end; sub_begin += sub_block) {
      const int sub_end = sub_begin + sub_block;
      bool sub_started = false;
      while (std::any_of(decided.begin() + sub_begin, decided.begin() + sub_end, [](int t) { return t < 0; })) {
        const auto started = std::chrono::steady_clock::now();
        int first = block_begin, last = block_end;
        switch (options.cache) {
          case DiffusionCache::kNone: first = 0; break;
          case DiffusionCache::kPrefix: first = block_started ? block_begin : committed_from; break;
          case DiffusionCache::kDual:
            if (!sub_started)
              first = block_started ? block_begin : committed_from;
            else
              first = sub_begin, last = sub_end;
            break;
        }
        const int n = last - first;
        feed.resize(size_t(n));
        visible_end.resize(size_t(n));
        for (int i = 0; i < n; ++i) {
          feed[size_t(i)] = input(first + i);
          visible_end[size_t(i)] = block_end_of(first + i);
        }
        logits.resize(size_t(rows) * size_t(n) * vocabulary);
        CUBEFORGE_TRY(session.evaluate(first, feed, visible_end, logits));
        block_started = sub_started = true;

        candidates.clear();
        for (int t = sub_begin; t < sub_end; ++t) {
          if (decided[size_t(t)] >= 0) continue;
          choice_logits(logits, rows, n, t - first, config, guidance_scale, t, count, combined);
          candidates.push_back({t, most_likely_code(combined)});
        }
        const std::vector<Candidate> accepted = accepted_by_rule(candidates, options);
        const double evaluation_ms = milliseconds_since(started);
        const int step = out.stats.model_evaluations;
        out.stats.model_evaluations += 1;
        out.stats.tokens_per_step.push_back(int(accepted.size()));
        out.stats.positions_per_step.push_back(n);
        for (const Candidate& c : accepted) decided[size_t(c.token_index)] = c.choice.code;
        if (on_token)
          for (const Candidate& c : accepted)
            if (!on_token(TokenEvent{c.token_index, c.choice.code, evaluation_ms / double(accepted.size()), step}))
              return make_error(ErrorCode::kCancelled, "generation cancelled after " +
                                                           std::to_string(out.stats.tokens()) + " tokens");
      }
    }
  }
  out.tokens = std::move(decided);
  return out;
}

}  // namespace cubeforge
