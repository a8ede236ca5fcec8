// Named intermediates: the hook every model and backend calls at each named
// point of its forward pass, so that a trace of one run can be diffed layer by
// layer against another (a reference dump, the CPU against the GPU).
//
// A model holds a `TraceSink*` that is null unless someone asked for a trace;
// each named point is one call to trace_tensor(), which is a null check and
// nothing more when tracing is off: the name is only formatted, and the data
// only copied, when a sink is there. Data is host memory; a device backend
// copies a tensor to the host before it records it.
//
// ---- The name scheme
//
// A name is dot-separated: an optional scope (the run's step), a block and its
// index, a stream, and the point. Shapes are recorded with each tensor;
// B = batch rows (2 with classifier-free guidance: row 0 the prompt, row 1 the
// empty prompt), S = condition tokens, L = shape positions computed in the
// step (all of them in a prefill, 1 in a KV-cached decode step), d = GPT width,
// V = codes (vocabulary V + 3), T = text tokens or latents, C = CLIP width,
// W = shape tokenizer width, P = query points.
//
// Scopes of a whole generation (cubeforge-cli generate --trace):
//   prompt.<clip>          the CLIP text encoder on the prompt, then
//   prompt.condition       [S, d]   text_proj(last_hidden_state) (+ bbox token)
//   empty_prompt.<clip>    the same for the empty prompt (with guidance only)
//   empty_prompt.condition [S, d]
//   prefill.<gpt>          the prefill (BOS)
//   decode.<t>.<gpt>       the step that produces token t (t = 1, 2, ...)
//   prefill.guided_logits, decode.<t>.guided_logits
//                          [V]      the logits sampled from (after guidance)
//   prefill.token, decode.<t>.token  [1] I64  the token chosen
//   shape.<decoder>        the shape tokenizer on the generated tokens
//   shape.<occupancy>      the occupancy decoder on a few probe points
//
// The GPT (DualStreamGpt / GptSession), per prefill or decode step (without
// the KV cache every step is a prefill of the whole sequence):
//   condition                [B, S, d]  (prefill only)
//   shape_embeddings         [B, L, d]  the token embeddings fed in
//   dual.<i>.x.<point>       the shape stream of dual block i
//   dual.<i>.c.<point>       the condition stream of dual block i (prefill only)
//   single.<i>.<point>       single-stream block i
//   ln_f                     [B, d]     the final norm of each row's last position
//   logits                   [B, V + 3]
// with the points, in the order they are computed (streams: [B, L, d] or [B, S, d]):
//   ln_1 (x stream, single)  ln_2 (c stream)   the pre-attention LayerNorm
//   q, k                     after the per-head RMSNorm and the rotary embedding
//                            (no q in the last dual block's c stream; no q in a
//                            single block's decode with reference attention,
//                            which never reads it)
//   v
//   attn                     attention output, before c_proj
//   attn_residual            the stream after += c_proj(attn)
//   ln_3 (dual)  ln_2 (single)  the MLP's LayerNorm
//   mlp_hidden               [.., 4d]   silu(gate) * up
//   out                      the stream after += down(mlp_hidden): the block output
// The last dual block's c stream has no post-attention part (ln_2, k, v only).
//
// The CLIP text encoder (ClipTextEncoder::encode), B prompts:
//   clip.embeddings          [B, T, C]  token + position embeddings
//   clip.<i>.<point>         layer i: ln_1, q, k, v, attn, attn_residual, ln_2,
//                            mlp_hidden [B, T, intermediate] (after the activation), out
//   clip.last_hidden_state   [B, T, C]
//
// The shape tokenizer (ShapeTokenizer::decode_tokens, occupancy):
//   decoder.z_q              [T, W]  codebook rows after c_out
//   decoder.input            [T, W]  z_q + positional encodings
//   decoder.<i>.<point>      layer i: ln_1, q, k, v, attn, attn_residual, ln_2,
//                            mlp_hidden [T, 4W] (after GELU), out
//   decoder.latents          [T, W]
//   occupancy.points         [P, 3]
//   occupancy.k, occupancy.v [T, W]  the cross-attention's keys and values (from the latents)
//   occupancy.fourier        [P, 3(2F+1)]  the Fourier embedding
//   occupancy.query          [P, W]  after the query MLP
//   occupancy.<point>        ln_1, q, attn, attn_residual, ln_2, mlp_hidden [P, 4W], out
//   occupancy.ln_f           [P, W]
//   occupancy.logits         [P, out_dim]
// The occupancy trace follows the layer-at-a-time path over all P points at once.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

#include "inference/tensor/dtype.h"

namespace cubeforge {

// Receives named tensors. Implementations copy what they keep: `data` is only
// valid during the call. Calls come from one thread at a time per sink.
class TraceSink {
 public:
  virtual ~TraceSink() = default;
  // `data`: the elements of `shape` (row-major) in `dtype`, in host memory.
  virtual void record(std::string_view name, DType dtype, std::span<const int64_t> shape, const void* data) = 0;
};

// Where a point sits: "<block>.<layer>.<stream>.<point>", empty parts and a
// negative layer left out. Formatted only when tracing.
struct TracePrefix {
  std::string_view block;   // "dual", "single", "clip", "decoder", "occupancy"
  int layer = -1;           // the block's index, or -1
  std::string_view stream;  // "x" or "c" in the GPT's dual blocks, else empty

  std::string name(std::string_view point) const;
};

namespace detail {
void record_f32(TraceSink& sink, std::string_view name, const float* data, std::initializer_list<int64_t> shape);
void record_f32(TraceSink& sink, const TracePrefix& prefix, std::string_view point, const float* data,
                std::initializer_list<int64_t> shape);
void record_f32_rows(TraceSink& sink, const TracePrefix& prefix, std::string_view point, const float* data,
                     int64_t rows, int64_t columns, int64_t stride, std::initializer_list<int64_t> shape);
}  // namespace detail

// One named float32 point; `data` holds the elements of `shape`.
inline void trace_tensor(TraceSink* sink, std::string_view name, const float* data,
                         std::initializer_list<int64_t> shape) {
  if (sink) [[unlikely]] detail::record_f32(*sink, name, data, shape);
}
inline void trace_tensor(TraceSink* sink, const TracePrefix& prefix, std::string_view point, const float* data,
                         std::initializer_list<int64_t> shape) {
  if (sink) [[unlikely]] detail::record_f32(*sink, prefix, point, data, shape);
}
// `rows` rows of `columns` values, `stride` values apart (q or k inside a fused
// [rows, 2d] projection); recorded densely with `shape`.
inline void trace_rows(TraceSink* sink, const TracePrefix& prefix, std::string_view point, const float* data,
                       int64_t rows, int64_t columns, int64_t stride, std::initializer_list<int64_t> shape) {
  if (sink) [[unlikely]] detail::record_f32_rows(*sink, prefix, point, data, rows, columns, stride, shape);
}

// Forwards to another sink with "<scope>." before every name: one step or
// branch of a run ("prefill", "decode.3", "prompt").
class ScopedTraceSink final : public TraceSink {
 public:
  ScopedTraceSink(TraceSink& target, std::string scope) : target_(target), scope_(std::move(scope)) {}
  void record(std::string_view name, DType dtype, std::span<const int64_t> shape, const void* data) override;

 private:
  TraceSink& target_;
  std::string scope_;
};

}  // namespace cubeforge
