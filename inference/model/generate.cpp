// The token generation loop over a GptSession.
#include "inference/model/generate.h"

#include <algorithm>
#include <chrono>
#include <optional>
#include <string>

#include "inference/tensor/trace.h"

namespace cubeforge {

Result<std::vector<int>> generate_tokens(const DualStreamGpt& model, std::span<const float> cond,
                                         std::span<const float> uncond, int tokens,
                                         const TokenGenerationOptions& options, const TokenCallback& on_token,
                                         TokenTrace* trace, std::span<const int> forced_tokens) {
  const GptConfig& c = model.config();
  const size_t d = size_t(c.width);
  const bool guided = options.guidance_scale > 0.f;
  const int batch = guided ? 2 : 1;
  if (tokens < 1) return make_error(ErrorCode::kInvalidArgument, "the number of tokens to generate must be positive");
  if (cond.empty() || cond.size() % d != 0)
    return make_error(ErrorCode::kInvalidArgument, "the condition is not a whole number of width-" + std::to_string(d) + " rows");
  if (guided && uncond.size() != cond.size())
    return make_error(ErrorCode::kInvalidArgument, "guidance needs an unconditional condition of the same size");
  if (!forced_tokens.empty() && forced_tokens.size() < size_t(tokens))
    return make_error(ErrorCode::kInvalidArgument, "teacher forcing needs one token per step");
  const int cond_length = int(cond.size() / d);
  const int vocab = c.vocab_size();

  std::vector<float> cond_rows(cond.begin(), cond.end());
  if (guided) cond_rows.insert(cond_rows.end(), uncond.begin(), uncond.end());

  GptSession session(model, batch, cond_length, tokens + 1, options.attention);
  TokenSampler sampler(options.sampling);
  std::vector<float> logits(size_t(batch) * vocab), combined(size_t(c.codes));
  // Shape embeddings fed so far, per row: BOS then each chosen token.
  std::vector<int> fed = {c.bos_id()};
  std::vector<int> out;
  out.reserve(size_t(tokens));
  if (trace) {
    trace->combined_logits.assign(size_t(tokens) * c.codes, 0.f);
    trace->raw_logits.assign(size_t(batch) * tokens * vocab, 0.f);
  }

  auto embeddings_for = [&](std::span<const int> ids) {
    std::vector<float> e(size_t(batch) * ids.size() * d);
    for (int b = 0; b < batch; ++b)
      for (size_t i = 0; i < ids.size(); ++i) {
        auto row = model.token_embedding(ids[i]);
        std::copy(row.begin(), row.end(), e.begin() + ptrdiff_t((size_t(b) * ids.size() + i) * d));
      }
    return e;
  };

  for (int step = 0; step < tokens; ++step) {
    const auto started = std::chrono::steady_clock::now();
    std::optional<ScopedTraceSink> step_trace;
    if (options.trace && step <= options.trace_decode_steps)
      step_trace.emplace(*options.trace, step == 0 ? std::string("prefill") : "decode." + std::to_string(step));
    session.set_trace(step_trace ? &*step_trace : nullptr);
    if (step == 0 || !options.use_kv_cache) {
      std::vector<float> shape = embeddings_for(fed);
      CUBEFORGE_TRY(session.prefill(cond_rows, shape, int(fed.size()), logits));
    } else {
      std::vector<float> next = embeddings_for(std::span<const int>(&fed.back(), 1));
      CUBEFORGE_TRY(session.decode(next, logits));
    }
    session.set_trace(nullptr);
    std::span<const float> cond_logits(logits.data(), size_t(c.codes));
    if (guided) {
      combine_guidance(cond_logits, std::span<const float>(logits.data() + vocab, size_t(c.codes)),
                       options.guidance_scale, step, tokens, combined);
    } else {
      std::copy(cond_logits.begin(), cond_logits.end(), combined.begin());
    }
    const int token = sampler.sample(combined);
    if (step_trace) {
      trace_tensor(&*step_trace, "guided_logits", combined.data(), {c.codes});
      const int64_t chosen = token;
      const int64_t one = 1;
      step_trace->record("token", DType::kI64, std::span<const int64_t>(&one, 1), &chosen);
    }
    const double step_ms =
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - started).count();
    if (trace) {
      std::copy(combined.begin(), combined.end(), trace->combined_logits.begin() + ptrdiff_t(size_t(step) * c.codes));
      for (int b = 0; b < batch; ++b)
        std::copy(logits.begin() + ptrdiff_t(size_t(b) * vocab), logits.begin() + ptrdiff_t(size_t(b + 1) * vocab),
                  trace->raw_logits.begin() + ptrdiff_t((size_t(b) * tokens + step) * vocab));
    }
    out.push_back(token);
    fed.push_back(forced_tokens.empty() ? token : forced_tokens[size_t(step)]);
    if (on_token && !on_token(TokenEvent{step, token, step_ms, step}))
      return make_error(ErrorCode::kCancelled, "generation cancelled after " + std::to_string(step + 1) + " tokens");
  }
  return out;
}

}  // namespace cubeforge
