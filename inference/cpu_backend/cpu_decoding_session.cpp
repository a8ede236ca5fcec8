// The CPU backend's decoding session: positions evaluated by the CPU
// GptSession (GptSession::evaluate), whose rows are bit for bit the
// one-token step's.
#include "inference/cpu_backend/cpu_decoding_session.h"

#include <algorithm>

namespace cubeforge {

namespace {

std::vector<float> stacked(std::span<const float> cond, std::span<const float> uncond) {
  std::vector<float> rows(cond.begin(), cond.end());
  rows.insert(rows.end(), uncond.begin(), uncond.end());
  return rows;
}

}  // namespace

CpuDecodingSession::CpuDecodingSession(const DualStreamGpt& model, std::span<const float> cond,
                                       std::span<const float> uncond, int positions, AttentionMode mode)
    : model_(model),
      condition_rows_(stacked(cond, uncond)),
      session_(model, uncond.empty() ? 1 : 2, int(cond.size() / size_t(model.config().width)), positions, mode) {}

std::vector<float> CpuDecodingSession::embeddings(std::span<const int> tokens) const {
  const size_t d = size_t(model_.config().width);
  const int rows = session_.batch();
  std::vector<float> out(size_t(rows) * tokens.size() * d);
  for (int r = 0; r < rows; ++r)
    for (size_t i = 0; i < tokens.size(); ++i) {
      auto row = model_.token_embedding(tokens[i]);
      std::copy(row.begin(), row.end(), out.begin() + ptrdiff_t((size_t(r) * tokens.size() + i) * d));
    }
  return out;
}

Status CpuDecodingSession::prefill(std::span<const int> tokens, std::span<float> last_logits) {
  const int vocabulary = model_.config().vocab_size();
  for (int token : tokens)
    if (token < 0 || token >= vocabulary)
      return make_error(ErrorCode::kInvalidArgument, "token " + std::to_string(token) + " is outside the vocabulary");
  return session_.prefill(condition_rows_, embeddings(tokens), int(tokens.size()), last_logits);
}

Status CpuDecodingSession::evaluate(int first, std::span<const int> tokens, std::span<const int> visible_end,
                                    std::span<float> logits) {
  const int vocabulary = model_.config().vocab_size();
  for (int token : tokens)
    if (token < 0 || token >= vocabulary)
      return make_error(ErrorCode::kInvalidArgument, "token " + std::to_string(token) + " is outside the vocabulary");
  return session_.evaluate(embeddings(tokens), first, int(tokens.size()), visible_end, logits);
}

}  // namespace cubeforge
