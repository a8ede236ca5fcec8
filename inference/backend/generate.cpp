// The token generation loop over a TokenSession (see generate.h).
#include "inference/backend/generate.h"

#include <algorithm>
#include <chrono>

namespace cubeforge {

Result<std::vector<int>> generate_tokens(const TokenBackend& backend, std::span<const float> cond,
                                         std::span<const float> uncond, int tokens,
                                         const TokenGenerationOptions& options, const TokenCallback& on_token,
                                         TokenTrace* trace, std::span<const int> forced_tokens) {
  const GptConfig& c = backend.model().config();
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
  const int vocab = c.vocab_size();

  TokenSessionOptions session_options;
  static_cast<DecodeOptions&>(session_options) = options;
  session_options.tokens = tokens;
  session_options.cond_length = int(cond.size() / d);
  session_options.trace = options.trace;
  session_options.trace_decode_steps = options.trace_decode_steps;
  session_options.record_logits = trace != nullptr;
  session_options.forced_tokens.assign(forced_tokens.begin(), forced_tokens.end());
  CUBEFORGE_ASSIGN_OR_RETURN(std::unique_ptr<TokenSession> session, backend.open_session(session_options));

  std::vector<float> cond_rows(cond.begin(), cond.end());
  if (guided) cond_rows.insert(cond_rows.end(), uncond.begin(), uncond.end());
  if (trace) {
    trace->combined_logits.assign(size_t(tokens) * c.codes, 0.f);
    trace->raw_logits.assign(size_t(batch) * tokens * vocab, 0.f);
  }

  using Clock = std::chrono::steady_clock;
  auto since = Clock::now();
  CUBEFORGE_TRY(session->prefill(cond_rows));
  int enqueued = 1;
  const int ahead = std::min(kStepsInFlight, tokens) - 1;
  CUBEFORGE_TRY(session->enqueue_steps(ahead));
  enqueued += ahead;

  std::vector<int> out;
  out.reserve(size_t(tokens));
  std::vector<int> landed;
  while (int(out.size()) < tokens) {
    CUBEFORGE_TRY(session->wait_for_token());
    landed.clear();
    CUBEFORGE_TRY(session->read_tokens(landed));
    if (landed.empty()) return make_error(ErrorCode::kInternal, "the token session stalled with steps enqueued");
    const double landed_ms = std::chrono::duration<double, std::milli>(Clock::now() - since).count();
    for (size_t i = 0; i < landed.size(); ++i) {
      const int step = int(out.size());
      out.push_back(landed[i]);
      if (trace) {
        CUBEFORGE_ASSIGN_OR_RETURN(StepLogits logits, session->step_logits(step));
        std::copy(logits.combined.begin(), logits.combined.end(),
                  trace->combined_logits.begin() + ptrdiff_t(size_t(step) * c.codes));
        for (int b = 0; b < batch; ++b)
          std::copy(logits.raw.begin() + ptrdiff_t(size_t(b) * vocab), logits.raw.begin() + ptrdiff_t(size_t(b + 1) * vocab),
                    trace->raw_logits.begin() + ptrdiff_t((size_t(b) * tokens + step) * vocab));
      }
      if (enqueued < tokens) {
        CUBEFORGE_TRY(session->enqueue_steps(1));
        ++enqueued;
      }
      // Tokens that landed together share the wait's time.
      const double step_ms = landed_ms / double(landed.size());
      if (on_token && !on_token(TokenEvent{step, landed[i], step_ms, step}))
        return make_error(ErrorCode::kCancelled, "generation cancelled after " + std::to_string(step + 1) + " tokens");
    }
    since = Clock::now();
  }
  return out;
}

}  // namespace cubeforge
