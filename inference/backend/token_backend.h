// The seam between token generation and the backends that run the GPT.
//
// A backend is opened once per loaded model (the CUDA one uploads the weights
// then) and opens one session per generation. The seam works at the level of
// tokens, not logits: a GPU keeps the logits, the guidance combine, the
// sampling and the next step's embedding on the device, and the host only
// learns which tokens have landed. A session therefore takes work in steps:
//
//   prefill(cond rows)        the condition rows and BOS; produces token 0
//   enqueue_steps(n)          asks for n more tokens; a device runs ahead
//   wait_for_token()          blocks until a token lands that was not read yet
//   read_tokens(out)          appends the tokens that have landed, never blocks
//   step_logits(i)            tests only: step i's logits (record_logits)
//
// Parallel decoding (exact parallel, block diffusion) asks for a decoding
// session instead (decoding_session.h): several positions evaluated per pass
// and a cache cut back after rejected guesses. A backend that cannot opens
// none, refusing as its supports() refuses the strategy.
//
// Two implementations: the CPU backend (inference/cpu_backend/cpu_token_backend.h:
// GptSession and TokenSampler, which computes a step when the caller waits for
// it) and the CUDA backend
// (inference/cuda_backend/token_backend.h, graph-replayed steps writing tokens into a
// pinned ring). Which one runs is decided by select_token_backend()
// (select_backend.h); elsewhere only the CPU fallbacks (generate_tokens over
// a model, a front end with no backend opened) name one. Like ggml-backend's table
// of operations, each member below is one operation of a backend; none is
// optional.
#pragma once

#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inference/backend/decoding_session.h"
#include "inference/core/result.h"
#include "inference/model/gpt.h"
#include "inference/sampling/sampler.h"
#include "inference/tensor/dtype.h"
#include "inference/tensor/trace.h"

namespace cubeforge {

enum class BackendKind { kCpu, kCuda };
const char* backend_kind_name(BackendKind kind);  // "cpu", "cuda"

// A session: the decode options whole, and the sizes of this generation.
struct TokenSessionOptions : DecodeOptions {
  int tokens = 0;       // N: steps the session runs (the guidance schedule's N)
  int cond_length = 0;  // S: condition rows per branch
  // CPU only: named intermediates (inference/tensor/trace.h) of the prefill,
  // as "prefill.<name>", and of the first `trace_decode_steps` decode steps,
  // as "decode.<t>.<name>" for the step producing token t; null: off.
  TraceSink* trace = nullptr;
  int trace_decode_steps = 2;
  // Tests only: keep every step's logits for step_logits(), and feed these
  // tokens instead of the sampled ones (teacher forcing; one per step).
  bool record_logits = false;
  std::vector<int> forced_tokens;
};

// What a generation asks of the backend that runs its GPT, for supports().
struct BackendRequest {
  DecodeOptions decode;
  DecodingMode decoding = DecodingMode::kSequential;
  bool trace = false;  // named intermediates of the prefill and decode steps
};

// One step's logits: `combined` [V] after guidance (what the sampler sees),
// `raw` [B, V + 3] as the model produced them.
struct StepLogits {
  std::vector<float> combined;
  std::vector<float> raw;
};

// The memory bandwidth a backend's weights stream at (GB/s, 1 GB = 1e9 bytes):
// host memory for the CPU, device memory for a GPU. Benchmarks report their
// fraction of it.
struct BandwidthFigures {
  double read_gbps = 0;
  double copy_gbps = 0;  // bytes read plus bytes written
};

// Counters a session keeps for benchmarks; zero where a backend has none.
struct TokenSessionStats {
  int kernel_launches_per_step = 0;  // decode step, KV-cache mode
  bool graph_replay = false;         // decode steps replay a recorded graph
  double device_memory_bytes = 0;    // what the session holds on the device
};

class TokenSession {
 public:
  virtual ~TokenSession() = default;

  // cond_rows: [B, S, d], the conditional branch first. Runs (or enqueues)
  // the prefill of the condition and BOS, which produces token 0.
  virtual Status prefill(std::span<const float> cond_rows) = 0;
  // Asks for `count` more tokens; steps past the session's N are an error.
  virtual Status enqueue_steps(int count) = 0;
  // Waits until a token has landed that read_tokens() has not returned yet;
  // returns at once when one has, or when nothing more was enqueued.
  virtual Status wait_for_token() = 0;
  // Appends the tokens that have landed since the last call, in order; never blocks.
  virtual Status read_tokens(std::vector<int>& tokens) = 0;
  // Step `step`'s logits after its token has landed; needs record_logits.
  virtual Result<StepLogits> step_logits(int step) = 0;
  virtual TokenSessionStats stats() const = 0;
};

class TokenBackend {
 public:
  virtual ~TokenBackend() = default;
  virtual BackendKind kind() const = 0;
  // One line for logs and reports, e.g. "CUDA: NVIDIA H200, compute 9.0, ...".
  virtual std::string description() const = 0;
  // The model the backend was opened for; it must outlive the backend.
  virtual const DualStreamGpt& model() const = 0;
  // Whether this backend runs `request` on its model: ok, or a kUnsupported
  // error whose Error::option names the option at fault and whose message
  // says why. Backend choice, the command line and the app ask this;
  // open_session refuses what it refuses.
  virtual Status supports(const BackendRequest& request) const = 0;
  virtual Result<std::unique_ptr<TokenSession>> open_session(const TokenSessionOptions& options) const = 0;
  // A session for a parallel decoding strategy over cond, uncond ([S, d]
  // each; uncond empty for one row): refused, as supports() refuses the
  // strategy, by a backend that evaluates one position per step.
  virtual Result<std::unique_ptr<DecodingSession>> open_decoding_session(const DecodingSessionOptions& options,
                                                                         std::span<const float> cond,
                                                                         std::span<const float> uncond) const = 0;
  // Measures the memory the weights stream from (takes a second or so).
  virtual Result<BandwidthFigures> measure_bandwidth() const = 0;
  // Bytes of weights the backend holds for the model (device memory on a GPU).
  virtual double weight_bytes() const = 0;
};

// Checks options against the model: sizes, sampling values, forced tokens.
Status check_token_session_options(const DualStreamGpt& model, const TokenSessionOptions& options);

// Checks a decoding session's options and condition rows against the model:
// a parallel strategy, room for BOS and a token, whole width-d rows, an
// unconditional branch as long as the conditional one.
Status check_decoding_session_options(const DualStreamGpt& model, const DecodingSessionOptions& options,
                                      std::span<const float> cond, std::span<const float> uncond);

// What supports() is asked for a decoding session: its strategy over the
// exact KV cache, untraced.
BackendRequest decoding_session_request(const DecodingSessionOptions& options, bool guided);

}  // namespace cubeforge
