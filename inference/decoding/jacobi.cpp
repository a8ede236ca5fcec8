// Exact parallel decoding of an autoregressive model (Jacobi / lookahead
// style guess-and-verify), greedy only.
//
// Position P holds the last accepted token; its output is token P. An
// evaluation feeds [last accepted, g1 .. gm] at positions P .. P+m, causally,
// and gets outputs y0 .. ym. y0 is greedy decoding's next token; yi is too
// while every guess before it was right (gj == y(j-1) for j <= i). The
// accepted outputs are kept, the cache is cut back to the positions whose
// inputs were right, and the outputs past the first wrong guess become the
// next guesses (the Jacobi iteration). Each row's logits are the ones a
// one-token step would compute (GptSession::evaluate), so the tokens are
// sequential greedy decoding's, whatever the guesses.
//
// Guesses cost positions: the strategy makes them only while the acceptance
// seen so far pays for them (JacobiOptions::position_cost), else it decodes one
// token per evaluation and tries a single guess every probe_interval
// evaluations.
#include <algorithm>
#include <chrono>
#include <cmath>

#include "inference/decoding/choice.h"
#include "inference/decoding/decoding.h"

namespace cubeforge {

namespace {

// Guesses for the tokens after `tokens`: what followed the most recent earlier
// occurrence of its last `key_length` tokens in this generation.
std::vector<int> ngram_guesses(const std::vector<int>& tokens, int key_length, int wanted) {
  const int n = int(tokens.size());
  if (wanted < 1) return {};
  for (int end = n - 1; end >= key_length; --end) {  // an earlier key ends at end - 1
    bool match = true;
    for (int k = 1; k <= key_length && match; ++k) match = tokens[size_t(end - k)] == tokens[size_t(n - k)];
    if (match) return std::vector<int>(tokens.begin() + end, tokens.begin() + end + std::min(wanted, n - end));
  }
  return {};
}

// Acceptance of guesses, as the chance that a guess is right given that the
// ones before it were, from recent evaluations (older ones decay).
class AcceptanceEstimate {
 public:
  void add(int guesses, int leading_right) {
    right_ = kDecay * right_ + leading_right;
    tried_ = kDecay * tried_ + leading_right + (leading_right < guesses ? 1 : 0);
  }
  double rate() const { return (right_ + 1.0) / (tried_ + 2.0); }

  // The guess count in [0, limit] with the most tokens per unit of cost.
  int best_count(int limit, double position_cost) const {
    const double a = rate();
    int best = 0;
    double best_value = 1.0, expected = 1.0, power = 1.0;
    for (int m = 1; m <= limit; ++m) {
      power *= a;
      expected += power;
      const double value = expected / (1.0 + position_cost * m);
      if (value > best_value * (1.0 + 1e-9)) best = m, best_value = value;
    }
    return best;
  }

 private:
  static constexpr double kDecay = 0.9;
  // An even chance to start with: one right and one wrong.
  double right_ = 1.0, tried_ = 2.0;
};

}  // namespace

Result<DecodedTokens> decode_jacobi(DecodingSession& session, int count, float guidance_scale,
                                    const JacobiOptions& options, const TokenCallback& on_token) {
  const GptConfig& config = session.config();
  if (count < 1) return make_error(ErrorCode::kInvalidArgument, "the number of tokens to generate must be positive");
  if (session.capacity() < count)
    return make_error(ErrorCode::kInvalidArgument, "the session holds " + std::to_string(session.capacity()) +
                                                       " positions; " + std::to_string(count) + " tokens need " +
                                                       std::to_string(count));
  const int rows = session.rows();
  const size_t vocabulary = size_t(config.vocab_size());
  DecodedTokens out;
  out.stats.mode = DecodingMode::kJacobi;
  std::vector<float> logits(size_t(rows) * vocabulary), combined(size_t(config.codes));

  auto accept = [&](std::span<const int> tokens, double evaluation_ms) -> Status {
    const int step = out.stats.model_evaluations - 1;
    for (int token : tokens) {
      const int index = int(out.tokens.size());
      out.tokens.push_back(token);
      if (on_token && !on_token(TokenEvent{index, token, evaluation_ms / double(tokens.size()), step}))
        return make_error(ErrorCode::kCancelled, "generation cancelled after " + std::to_string(index + 1) + " tokens");
    }
    return ok_status();
  };

  // The first token as sequential decoding takes it: BOS through prefill.
  auto started = std::chrono::steady_clock::now();
  const int bos = config.bos_id();
  CUBEFORGE_TRY(session.prefill(std::span<const int>(&bos, 1), logits));
  choice_logits(logits, rows, 1, 0, config, guidance_scale, 0, count, combined);
  const int first = most_likely_code(combined).code;
  out.stats.model_evaluations = 1;
  out.stats.tokens_per_step.push_back(1);
  out.stats.positions_per_step.push_back(1);
  CUBEFORGE_TRY(accept(std::span<const int>(&first, 1), milliseconds_since(started)));

  AcceptanceEstimate acceptance;
  std::vector<int> trajectory;  // the last evaluation's outputs past its accepted ones
  int since_probe = 0;
  std::vector<int> feed, visible_end, outputs;
  while (int(out.tokens.size()) < count) {
    started = std::chrono::steady_clock::now();
    const int position = int(out.tokens.size());  // where the last accepted token goes
    const int room = std::min(options.max_guesses, count - position - 1);
    // A repeat of the last two tokens first, then the Jacobi trajectory, then a repeat of the last one.
    std::vector<int> guesses = ngram_guesses(out.tokens, 2, room);
    if (guesses.empty() && !trajectory.empty())
      guesses.assign(trajectory.begin(), trajectory.begin() + std::min(room, int(trajectory.size())));
    if (guesses.empty()) guesses = ngram_guesses(out.tokens, 1, room);
    int guess_count = acceptance.best_count(int(guesses.size()), options.position_cost);
    if (guess_count == 0 && !guesses.empty() && ++since_probe >= options.probe_interval) guess_count = 1;
    if (guess_count > 0) since_probe = 0;

    feed.assign(1, out.tokens.back());
    feed.insert(feed.end(), guesses.begin(), guesses.begin() + guess_count);
    const int n = int(feed.size());
    visible_end.resize(size_t(n));
    for (int i = 0; i < n; ++i) visible_end[size_t(i)] = position + i + 1;
    logits.resize(size_t(rows) * size_t(n) * vocabulary);
    CUBEFORGE_TRY(session.evaluate(position, feed, visible_end, logits));
    outputs.resize(size_t(n));
    for (int i = 0; i < n; ++i) {
      choice_logits(logits, rows, n, i, config, guidance_scale, position + i, count, combined);
      outputs[size_t(i)] = most_likely_code(combined).code;
    }
    int right = 0;
    while (right < guess_count && feed[size_t(right + 1)] == outputs[size_t(right)]) ++right;
    const int accepted = right + 1;
    CUBEFORGE_TRY(session.truncate(position + accepted));
    if (guess_count > 0) acceptance.add(guess_count, right);
    trajectory.assign(outputs.begin() + accepted, outputs.end());
    out.stats.model_evaluations += 1;
    out.stats.tokens_per_step.push_back(accepted);
    out.stats.positions_per_step.push_back(n);
    out.stats.guessed += guess_count;
    out.stats.guesses_accepted += right;
    CUBEFORGE_TRY(accept(std::span<const int>(outputs.data(), size_t(accepted)), milliseconds_since(started)));
  }
  return out;
}

}  // namespace cubeforge
