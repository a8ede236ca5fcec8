// The CPU backend of the token seam: a GptSession for the model and the
// TokenSampler, one step computed whenever the caller waits for a token. The
// arithmetic is exactly the CPU generation loop's: prefill of the condition
// and BOS (or of the whole sequence every step without the KV cache), one
// decode per token, the guidance combine, then the sampler. Its decoding
// sessions (cpu_decoding_session.h) run every parallel strategy.
#include "inference/cpu_backend/cpu_token_backend.h"

#include <algorithm>
#include <optional>
#include <string>

#include "inference/core/system_info.h"
#include "inference/cpu/ops.h"
#include "inference/cpu_backend/cpu_decoding_session.h"
#include "inference/cpu_backend/gpt_session.h"

namespace cubeforge {

namespace {

class CpuTokenSession final : public TokenSession {
 public:
  CpuTokenSession(const DualStreamGpt& model, const TokenSessionOptions& options)
      : model_(model),
        options_(options),
        batch_(options.batch()),
        session_(model, batch_, options.cond_length, options.tokens + 1, options.attention, options.kv_cache),
        sampler_(options.sampling),
        logits_(size_t(batch_) * size_t(model.config().vocab_size())),
        combined_(size_t(model.config().codes)),
        fed_{model.config().bos_id()} {}

  Status prefill(std::span<const float> cond_rows) override {
    const size_t expected = size_t(batch_) * size_t(options_.cond_length) * size_t(model_.config().width);
    if (cond_rows.size() != expected)
      return make_error(ErrorCode::kInvalidArgument, "the condition rows have " + std::to_string(cond_rows.size()) +
                                                         " values, the session expects " + std::to_string(expected));
    if (requested_ > 0) return make_error(ErrorCode::kInvalidArgument, "prefill runs once per session");
    cond_rows_.assign(cond_rows.begin(), cond_rows.end());
    requested_ = 1;
    return ok_status();
  }

  Status enqueue_steps(int count) override {
    if (requested_ == 0) return make_error(ErrorCode::kInvalidArgument, "enqueue_steps before prefill");
    if (count < 0 || requested_ + count > options_.tokens)
      return make_error(ErrorCode::kInvalidArgument, "the session was opened for " + std::to_string(options_.tokens) +
                                                         " tokens");
    requested_ += count;
    return ok_status();
  }

  Status wait_for_token() override {
    if (landed_.size() > read_ || landed_.size() >= size_t(requested_)) return ok_status();
    return compute_step(int(landed_.size()));
  }

  Status read_tokens(std::vector<int>& tokens) override {
    tokens.insert(tokens.end(), landed_.begin() + ptrdiff_t(read_), landed_.end());
    read_ = landed_.size();
    return ok_status();
  }

  Result<StepLogits> step_logits(int step) override {
    if (!options_.record_logits) return make_error(ErrorCode::kInvalidArgument, "the session does not record logits");
    if (step < 0 || size_t(step) >= recorded_.size())
      return make_error(ErrorCode::kInvalidArgument, "step " + std::to_string(step) + " has not landed");
    return recorded_[size_t(step)];
  }

  TokenSessionStats stats() const override { return {}; }

 private:
  // Shape embeddings for `ids`, repeated for every batch row: [B, ids, d].
  std::vector<float> embeddings_for(std::span<const int> ids) const {
    const size_t d = size_t(model_.config().width);
    std::vector<float> e(size_t(batch_) * ids.size() * d);
    for (int b = 0; b < batch_; ++b)
      for (size_t i = 0; i < ids.size(); ++i) {
        auto row = model_.token_embedding(ids[i]);
        std::copy(row.begin(), row.end(), e.begin() + ptrdiff_t((size_t(b) * ids.size() + i) * d));
      }
    return e;
  }

  Status compute_step(int step) {
    const GptConfig& c = model_.config();
    const int vocab = c.vocab_size();
    std::optional<ScopedTraceSink> step_trace;
    if (options_.trace && step <= options_.trace_decode_steps)
      step_trace.emplace(*options_.trace, step == 0 ? std::string("prefill") : "decode." + std::to_string(step));
    session_.set_trace(step_trace ? &*step_trace : nullptr);
    if (step == 0 || !options_.use_kv_cache) {
      std::vector<float> shape = embeddings_for(fed_);
      CUBEFORGE_TRY(session_.prefill(cond_rows_, shape, int(fed_.size()), logits_));
    } else {
      std::vector<float> next = embeddings_for(std::span<const int>(&fed_.back(), 1));
      CUBEFORGE_TRY(session_.decode(next, logits_));
    }
    session_.set_trace(nullptr);
    std::span<const float> cond_logits(logits_.data(), size_t(c.codes));
    if (batch_ == 2) {
      combine_guidance(cond_logits, std::span<const float>(logits_.data() + vocab, size_t(c.codes)),
                       options_.guidance_scale, step, options_.tokens, combined_);
    } else {
      std::copy(cond_logits.begin(), cond_logits.end(), combined_.begin());
    }
    const int token = sampler_.sample(combined_);
    if (step_trace) {
      trace_tensor(&*step_trace, "guided_logits", combined_.data(), {c.codes});
      const int64_t chosen = token;
      const int64_t one = 1;
      step_trace->record("token", DType::kI64, std::span<const int64_t>(&one, 1), &chosen);
    }
    if (options_.record_logits) recorded_.push_back(StepLogits{combined_, logits_});
    landed_.push_back(token);
    fed_.push_back(options_.forced_tokens.empty() ? token : options_.forced_tokens[size_t(step)]);
    return ok_status();
  }

  const DualStreamGpt& model_;
  const TokenSessionOptions options_;
  const int batch_;
  GptSession session_;
  TokenSampler sampler_;
  std::vector<float> cond_rows_;  // [B, S, d]
  std::vector<float> logits_;     // [B, V + 3]
  std::vector<float> combined_;   // [V]
  std::vector<int> fed_;          // shape inputs so far: BOS, then each fed token
  std::vector<int> landed_;
  size_t read_ = 0;
  int requested_ = 0;
  std::vector<StepLogits> recorded_;
};

class CpuTokenBackend final : public TokenBackend {
 public:
  explicit CpuTokenBackend(const DualStreamGpt& model) : model_(model) {}

  BackendKind kind() const override { return BackendKind::kCpu; }
  std::string description() const override {
    return "CPU (" + std::string(cpu::kernel_isa()) + " kernels, " + std::to_string(cpu::thread_count()) + " threads)";
  }
  const DualStreamGpt& model() const override { return model_; }
  // The reference's backend: every decoding strategy, KV form, budget and
  // rank, and traces (what no backend runs is check_decode_options' to say).
  Status supports(const BackendRequest&) const override { return ok_status(); }

  Result<std::unique_ptr<TokenSession>> open_session(const TokenSessionOptions& options) const override {
    CUBEFORGE_TRY(check_token_session_options(model_, options));
    return std::unique_ptr<TokenSession>(std::make_unique<CpuTokenSession>(model_, options));
  }

  Result<std::unique_ptr<DecodingSession>> open_decoding_session(const DecodingSessionOptions& options,
                                                                 std::span<const float> cond,
                                                                 std::span<const float> uncond) const override {
    CUBEFORGE_TRY(check_decoding_session_options(model_, options, cond, uncond));
    return std::unique_ptr<DecodingSession>(
        std::make_unique<CpuDecodingSession>(model_, cond, uncond, options.positions, options.attention));
  }

  // In this process (a forked measurement is unsafe once threads exist).
  Result<BandwidthFigures> measure_bandwidth() const override {
    const MemoryBandwidth measured = measure_memory_bandwidth();
    return BandwidthFigures{measured.read_gbps, measured.copy_gbps};
  }

  double weight_bytes() const override { return double(model_.total_weight_bytes()); }

 private:
  const DualStreamGpt& model_;
};

}  // namespace

std::shared_ptr<TokenBackend> make_cpu_token_backend(const DualStreamGpt& model) {
  return std::make_shared<CpuTokenBackend>(model);
}

Result<std::vector<int>> generate_tokens(const DualStreamGpt& model, std::span<const float> cond,
                                         std::span<const float> uncond, int tokens,
                                         const TokenGenerationOptions& options, const TokenCallback& on_token,
                                         TokenTrace* trace, std::span<const int> forced_tokens) {
  return generate_tokens(*make_cpu_token_backend(model), cond, uncond, tokens, options, on_token, trace,
                         forced_tokens);
}

}  // namespace cubeforge
