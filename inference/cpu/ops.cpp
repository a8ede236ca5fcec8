// CPU backend ops: threading, BLAS for large products, the small
// elementwise/normalisation ops, and the entry points of the kernels chosen
// at run time (kernels.h).
#include "inference/cpu/ops.h"

#include <cblas.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "inference/core/result.h"
#include "inference/core/thread_pool.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/kernels.h"
#include "inference/cpu/quantize.h"

namespace cubeforge::cpu {

namespace {

int g_threads = 0;

// Work smaller than this many values (1 MB of float32) stays on the calling thread.
constexpr int64_t kMinParallelValues = int64_t(1) << 18;
// Decode-sized products (a couple of rows) stream weights; beyond this many
// rows BLAS's blocked GEMM wins.
constexpr int64_t kMaxMatvecRows = 4;
// Half-precision weights are widened to float32 in blocks of about this many
// values before BLAS sees them: large enough that each GEMM call is efficient,
// small enough to stay in the last-level cache.
constexpr int64_t kWidenBlockValues = int64_t(4) << 20;

void run_matvec(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y, bool accumulate) {
  const MatvecKernel kernel = kernels().matvec;
  const int64_t N = w.rows;
  const int64_t block = 32;
  const int64_t blocks = (N + block - 1) / block;
  for (int64_t row = 0; row < m; row += 2) {
    const int batch = int(std::min<int64_t>(2, m - row));
    const float* xr = x + row * w.cols;
    float* yr = y + row * N;
    // Threads only pay off once a call streams about a megabyte of weights:
    // below that, waking the other threads costs more than the product (a
    // built-in-model decode step, 128 wide, ran at half speed on two threads).
    const int64_t grain = N * w.cols >= kMinParallelValues ? 1 : blocks;
    parallel_for(blocks, grain, [&](int64_t b0, int64_t b1) {
      kernel(w, b0 * block, std::min(N, b1 * block), xr, batch, bias, yr, accumulate);
    });
  }
}

void run_gemm(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y, bool accumulate) {
  const int64_t N = w.rows, K = w.cols;
  // The bias goes into y first and the product is added to it (beta = 1): with
  // beta = 0 OpenBLAS clears y itself and a second pass added the bias, two
  // sweeps over an output that is as large as the input at the occupancy decoder.
  if (bias) {
    parallel_for(m, std::max<int64_t>(1, 65536 / N), [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; ++i) {
        float* row = y + i * N;
        if (accumulate)
          for (int64_t n = 0; n < N; ++n) row[n] += bias[n];
        else
          std::copy_n(bias, N, row);
      }
    });
  }
  const float beta = accumulate || bias ? 1.f : 0.f;
  if (w.dtype == DType::kF32 && w.quantization == Quantization::kNone) {
    sgemm(true, m, N, K, 1.f, x, K, static_cast<const float*>(w.data), K, beta, y, N);
  } else {
    const int64_t block_rows = std::max<int64_t>(1, std::min(N, kWidenBlockValues / std::max<int64_t>(1, K)));
    std::vector<float> widened(static_cast<size_t>(block_rows * K));
    for (int64_t n0 = 0; n0 < N; n0 += block_rows) {
      const int64_t rows = std::min(block_rows, N - n0);
      widen_rows(w, n0, n0 + rows, widened.data());
      sgemm(true, m, rows, K, 1.f, x, K, widened.data(), K, beta, y + n0, N);
    }
  }
}

}  // namespace

void set_thread_count(int threads) {
  g_threads = threads;
  ThreadPool::set_global_threads(threads);
}

int thread_count() { return ThreadPool::global().size(); }

void sgemm(bool transpose_b, int64_t M, int64_t N, int64_t K, float alpha, const float* a, int64_t lda,
           const float* b, int64_t ldb, float beta, float* c, int64_t ldc) {
  static const bool single_threaded = [] {
    openblas_set_num_threads(1);
    return true;
  }();
  (void)single_threaded;
  if (M <= 0 || N <= 0) return;
  reserve_blas_buffers(thread_count());  // throws std::bad_alloc rather than let OpenBLAS spin
  auto product = [&](int64_t m0, int64_t m1, int64_t n0, int64_t n1) {
    const float* b_part = transpose_b ? b + n0 * ldb : b + n0;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose_b ? CblasTrans : CblasNoTrans, int(m1 - m0), int(n1 - n0),
                int(K), alpha, a + m0 * lda, int(lda), b_part, int(ldb), beta, c + m0 * ldc + n0, int(ldc));
  };
  // Parts are whole multiples of 16 rows or columns (BLAS kernels' tile widths);
  // a product under about a million multiply-adds is not worth waking a thread.
  const int64_t threads = thread_count();
  const bool split_columns = N >= M;
  const int64_t units = ((split_columns ? N : M) + 15) / 16;
  const int64_t parts = std::min(threads, units);
  if (parts <= 1 || M * N * K < (int64_t(1) << 20)) {
    product(0, M, 0, N);
    return;
  }
  parallel_for(parts, 1, [&](int64_t p0, int64_t p1) {
    for (int64_t p = p0; p < p1; ++p) {
      const int64_t begin = std::min(units * p / parts * 16, split_columns ? N : M);
      const int64_t end = std::min(units * (p + 1) / parts * 16, split_columns ? N : M);
      if (begin >= end) continue;
      if (split_columns)
        product(0, M, begin, end);
      else
        product(begin, end, 0, N);
    }
  });
}

const char* kernel_isa() { return kernels().isa; }

void matvec_generic(const WeightMatrix& w, int64_t n_begin, int64_t n_end, const float* x, int batch,
                    const float* bias, float* y, bool accumulate) {
  const int64_t K = w.cols, N = w.rows;
  std::vector<float> row(static_cast<size_t>(K));
  for (int64_t n = n_begin; n < n_end; ++n) {
    widen_rows(w, n, n + 1, row.data());
    for (int b = 0; b < batch; ++b) {
      float acc = 0.f;
      for (int64_t k = 0; k < K; ++k) acc += row[size_t(k)] * x[b * K + k];
      acc += bias ? bias[n] : 0.f;
      float& out = y[b * N + n];
      out = accumulate ? out + acc : acc;
    }
  }
}

void widen_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out) {
  if (w.quantization != Quantization::kNone) {
    const int64_t rows = row_end - row_begin;
    const int64_t grain = std::max<int64_t>(1, (int64_t(1) << 14) / std::max<int64_t>(1, w.cols));
    if (rows * w.cols >= (int64_t(1) << 16))
      parallel_for(rows, grain, [&](int64_t r0, int64_t r1) {
        dequantize_rows(w, row_begin + r0, row_begin + r1, out + r0 * w.cols);
      });
    else
      dequantize_rows(w, row_begin, row_end, out);
    return;
  }
  const size_t count = size_t(row_end - row_begin) * size_t(w.cols);
  const size_t element = dtype_size(w.dtype);
  const auto* src = static_cast<const std::byte*>(w.data) + size_t(row_begin) * size_t(w.cols) * element;
  if (count >= (1u << 16)) {
    const size_t chunk = 1u << 14;
    const int64_t chunks = int64_t((count + chunk - 1) / chunk);
    parallel_for(chunks, 1, [&](int64_t c0, int64_t c1) {
      const size_t begin = size_t(c0) * chunk;
      const size_t end = std::min(count, size_t(c1) * chunk);
      convert_to_f32(w.dtype, src + begin * element, out + begin, end - begin);
    });
  } else {
    convert_to_f32(w.dtype, src, out, count);
  }
}

void linear(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) {
  if (m <= 0) return;
  if (m <= kMaxMatvecRows)
    run_matvec(x, m, w, bias, y, false);
  else
    run_gemm(x, m, w, bias, y, false);
}

void linear_accumulate(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) {
  if (m <= 0) return;
  if (m <= kMaxMatvecRows)
    run_matvec(x, m, w, bias, y, true);
  else
    run_gemm(x, m, w, bias, y, true);
}

void linear_rows(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) {
  if (m > 0) run_matvec(x, m, w, bias, y, false);
}

void linear_rows_accumulate(const float* x, int64_t m, const WeightMatrix& w, const float* bias, float* y) {
  if (m > 0) run_matvec(x, m, w, bias, y, true);
}

void layer_norm(const float* x, int64_t m, int64_t n, float eps, const float* weight, const float* bias, float* y) {
  parallel_for(m, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n)), [&](int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float* xi = x + i * n;
    float* yi = y + i * n;
    double sum = 0.0;
    for (int64_t j = 0; j < n; ++j) sum += xi[j];
    const float mean = float(sum / double(n));
    double sq = 0.0;
    for (int64_t j = 0; j < n; ++j) {
      const double d = double(xi[j]) - mean;
      sq += d * d;
    }
    const float inv = 1.0f / std::sqrt(float(sq / double(n)) + eps);
    for (int64_t j = 0; j < n; ++j) {
      float v = (xi[j] - mean) * inv;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      yi[j] = v;
    }
  }
  });
}

void rms_norm(const float* x, int64_t m, int64_t n, float eps, const float* weight, float* y) {
  auto rows = [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i) {
      const float* xi = x + i * n;
      float* yi = y + i * n;
      double sq = 0.0;
      for (int64_t j = 0; j < n; ++j) sq += double(xi[j]) * xi[j];
      const float inv = 1.0f / std::sqrt(float(sq / double(n)) + eps);
      for (int64_t j = 0; j < n; ++j) yi[j] = xi[j] * inv * (weight ? weight[j] : 1.f);
    }
  };
  if (m * n > 32768)
    parallel_for(m, std::max<int64_t>(1, 32768 / std::max<int64_t>(1, n)), rows);
  else
    rows(0, m);
}

void rms_norm_heads(float* x, int64_t m, int64_t heads, int64_t head_dim, int64_t row_stride, float eps,
                    const float* weight) {
  auto rows = [=](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; ++i)
      for (int64_t h = 0; h < heads; ++h) {
        float* v = x + i * row_stride + h * head_dim;
        rms_norm(v, 1, head_dim, eps, weight, v);
      }
  };
  if (m * heads * head_dim > 32768)
    parallel_for(m, 1, rows);
  else
    rows(0, m);
}

void rope_interleaved(float* x, int64_t m, int64_t heads, int64_t head_dim, int64_t row_stride,
                      const int32_t* positions, float theta) {
  const int64_t pairs = head_dim / 2;
  std::vector<float> inverse_frequency(static_cast<size_t>(pairs));
  for (int64_t j = 0; j < pairs; ++j)
    inverse_frequency[size_t(j)] = 1.0f / std::pow(theta, float(2 * j) / float(head_dim));
  auto rows = [&](int64_t i0, int64_t i1) {
  for (int64_t i = i0; i < i1; ++i) {
    const float position = float(positions[i]);
    for (int64_t j = 0; j < pairs; ++j) {
      const float angle = position * inverse_frequency[size_t(j)];
      const float c = std::cos(angle), s = std::sin(angle);
      for (int64_t h = 0; h < heads; ++h) {
        float* p = x + i * row_stride + h * head_dim + 2 * j;
        const float re = p[0], im = p[1];
        p[0] = re * c - im * s;
        p[1] = re * s + im * c;
      }
    }
  }
  };
  if (m * heads * head_dim > 32768)
    parallel_for(m, 1, rows);
  else
    rows(0, m);
}

namespace {

int64_t visible_keys(int64_t i, int64_t kv_len, int64_t causal_base) {
  if (causal_base < 0) return kv_len;
  return std::min(kv_len, causal_base + i + 1);
}

void softmax_row(float* scores, int64_t n) {
  float max_score = -std::numeric_limits<float>::infinity();
  for (int64_t j = 0; j < n; ++j) max_score = std::max(max_score, scores[j]);
  double sum = 0.0;
  for (int64_t j = 0; j < n; ++j) {
    scores[j] = std::exp(scores[j] - max_score);
    sum += scores[j];
  }
  const float inv = float(1.0 / sum);
  for (int64_t j = 0; j < n; ++j) scores[j] *= inv;
}

// Direct loops: decode (one or two queries) and small problems.
void attention_direct(const float* q, int64_t q_len, int64_t q_stride, const float* k, const float* v,
                      int64_t kv_len, int64_t kv_stride, int64_t heads, int64_t head_dim, int64_t causal_base,
                      float* out, int64_t out_stride) {
  const float scale = 1.0f / std::sqrt(float(head_dim));
  auto work = [&](int64_t w0, int64_t w1) {
    std::vector<float> scores(static_cast<size_t>(kv_len));
    std::vector<float> accum(static_cast<size_t>(head_dim));
    for (int64_t item = w0; item < w1; ++item) {
      const int64_t i = item / heads, h = item % heads;
      const int64_t visible = visible_keys(i, kv_len, causal_base);
      const float* qi = q + i * q_stride + h * head_dim;
      float* oi = out + i * out_stride + h * head_dim;
      if (visible <= 0) {
        std::fill(oi, oi + head_dim, 0.f);
        continue;
      }
      for (int64_t j = 0; j < visible; ++j) {
        const float* kj = k + j * kv_stride + h * head_dim;
        float dot = 0.f;
#pragma omp simd reduction(+ : dot)
        for (int64_t d = 0; d < head_dim; ++d) dot += qi[d] * kj[d];
        scores[size_t(j)] = dot * scale;
      }
      softmax_row(scores.data(), visible);
      std::fill(accum.begin(), accum.end(), 0.f);
      for (int64_t j = 0; j < visible; ++j) {
        const float* vj = v + j * kv_stride + h * head_dim;
        const float p = scores[size_t(j)];
#pragma omp simd
        for (int64_t d = 0; d < head_dim; ++d) accum[size_t(d)] += p * vj[d];
      }
      std::copy(accum.begin(), accum.end(), oi);
    }
  };
  const int64_t items = q_len * heads;
  if (items * kv_len * head_dim > 65536)
    parallel_for(items, 1, work);
  else
    work(0, items);
}

// Per-head GEMMs through BLAS: prefill and occupancy queries.
void attention_blocked(const float* q, int64_t q_len, int64_t q_stride, const float* k, const float* v,
                       int64_t kv_len, int64_t kv_stride, int64_t heads, int64_t head_dim, int64_t causal_base,
                       float* out, int64_t out_stride) {
  const float scale = 1.0f / std::sqrt(float(head_dim));
  const int64_t block = std::max<int64_t>(1, std::min<int64_t>(q_len, (int64_t(1) << 22) / std::max<int64_t>(1, kv_len)));
  std::vector<float> scores(size_t(block * kv_len));
  for (int64_t h = 0; h < heads; ++h) {
    for (int64_t i0 = 0; i0 < q_len; i0 += block) {
      const int64_t rows = std::min(block, q_len - i0);
      sgemm(true, rows, kv_len, head_dim, scale, q + i0 * q_stride + h * head_dim, q_stride, k + h * head_dim,
            kv_stride, 0.f, scores.data(), kv_len);
      parallel_for(rows, std::max<int64_t>(1, 16384 / kv_len), [&](int64_t r0, int64_t r1) {
        for (int64_t r = r0; r < r1; ++r) {
          float* row = scores.data() + r * kv_len;
          const int64_t visible = visible_keys(i0 + r, kv_len, causal_base);
          softmax_row(row, std::max<int64_t>(visible, 1));
          std::fill(row + std::max<int64_t>(visible, 1), row + kv_len, 0.f);
        }
      });
      sgemm(false, rows, head_dim, kv_len, 1.f, scores.data(), kv_len, v + h * head_dim, kv_stride, 0.f,
            out + i0 * out_stride + h * head_dim, out_stride);
    }
  }
}

// One query row (decode) over a long cache: keys are walked in order with all
// heads of a cached row together, so every thread streams whole contiguous
// rows (a head-at-a-time walk strides through the cache and defeats the
// prefetchers). Threads take key ranges and merge their partial softmaxes.
void attention_single_query(const float* q, const float* k, const float* v, int64_t visible, int64_t kv_stride,
                            int64_t heads, int64_t head_dim, float* out) {
  const float scale = 1.0f / std::sqrt(float(head_dim));
  // Key ranges per thread only once the cache is large enough to pay for the hand-over.
  const int shares = visible * heads * head_dim < kMinParallelValues
                         ? 1
                         : int(std::min<int64_t>(ThreadPool::global().size(), std::max<int64_t>(1, visible / 64)));
  struct Partial {
    std::vector<float> max, sum, accum;  // [H], [H], [H, D]
  };
  std::vector<Partial> partials(static_cast<size_t>(shares));
  parallel_for(shares, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t share = s0; share < s1; ++share) {
      const int64_t begin = visible * share / shares, end = visible * (share + 1) / shares;
      Partial& p = partials[size_t(share)];
      p.max.assign(size_t(heads), -std::numeric_limits<float>::infinity());
      p.sum.assign(size_t(heads), 0.f);
      p.accum.assign(size_t(heads * head_dim), 0.f);
      std::vector<float> scores(static_cast<size_t>((end - begin) * heads));
      for (int64_t j = begin; j < end; ++j) {
        const float* row = k + j * kv_stride;
        for (int64_t h = 0; h < heads; ++h) {
          const float* qh = q + h * head_dim;
          const float* kh = row + h * head_dim;
          float dot = 0.f;
#pragma omp simd reduction(+ : dot)
          for (int64_t d = 0; d < head_dim; ++d) dot += qh[d] * kh[d];
          const float score = dot * scale;
          scores[size_t((j - begin) * heads + h)] = score;
          p.max[size_t(h)] = std::max(p.max[size_t(h)], score);
        }
      }
      for (int64_t j = begin; j < end; ++j) {
        const float* row = v + j * kv_stride;
        for (int64_t h = 0; h < heads; ++h) {
          const float weight = std::exp(scores[size_t((j - begin) * heads + h)] - p.max[size_t(h)]);
          p.sum[size_t(h)] += weight;
          float* acc = p.accum.data() + h * head_dim;
          const float* vh = row + h * head_dim;
#pragma omp simd
          for (int64_t d = 0; d < head_dim; ++d) acc[d] += weight * vh[d];
        }
      }
    }
  });
  for (int64_t h = 0; h < heads; ++h) {
    float overall = -std::numeric_limits<float>::infinity();
    for (const Partial& p : partials) overall = std::max(overall, p.max[size_t(h)]);
    double total = 0.0;
    float* o = out + h * head_dim;
    std::fill(o, o + head_dim, 0.f);
    for (const Partial& p : partials) {
      if (p.sum[size_t(h)] == 0.f) continue;
      const float rescale = std::exp(p.max[size_t(h)] - overall);
      total += double(p.sum[size_t(h)]) * rescale;
      const float* acc = p.accum.data() + h * head_dim;
      for (int64_t d = 0; d < head_dim; ++d) o[d] += acc[d] * rescale;
    }
    const float inverse = float(1.0 / total);
    for (int64_t d = 0; d < head_dim; ++d) o[d] *= inverse;
  }
}

}  // namespace

void attention(const float* q, int64_t q_len, int64_t q_stride, const float* k, const float* v, int64_t kv_len,
               int64_t kv_stride, int64_t heads, int64_t head_dim, int64_t causal_base, float* out,
               int64_t out_stride) {
  if (q_len == 1 && kv_len >= 256) {
    const int64_t visible = visible_keys(0, kv_len, causal_base);
    if (visible <= 0) {
      std::fill(out, out + heads * head_dim, 0.f);
      return;
    }
    attention_single_query(q, k, v, visible, kv_stride, heads, head_dim, out);
    return;
  }
  if (q_len >= 16 && kv_len >= 16)
    attention_blocked(q, q_len, q_stride, k, v, kv_len, kv_stride, heads, head_dim, causal_base, out, out_stride);
  else
    attention_direct(q, q_len, q_stride, k, v, kv_len, kv_stride, heads, head_dim, causal_base, out, out_stride);
}

namespace {
// Elementwise loops split across threads only when they are long.
template <class Body>
void elementwise(int64_t n, Body body) {
  if (n > 65536)
    parallel_for(n, 16384, body);
  else
    body(0, n);
}
}  // namespace

void gelu_erf_inplace(float* x, int64_t n) {
  elementwise(n, [=](int64_t i0, int64_t i1) {
    // erfc(-x/√2) rather than 1 + erf(x/√2): no cancellation for negative x.
    for (int64_t i = i0; i < i1; ++i) x[i] = 0.5f * x[i] * std::erfc(-x[i] * 0.70710678118654752f);
  });
}

void quick_gelu_inplace(float* x, int64_t n) {
  elementwise(n, [=](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) x[i] = x[i] / (1.0f + std::exp(-1.702f * x[i]));
  });
}

void swiglu_inplace(float* gate, const float* up, int64_t n) {
  elementwise(n, [=](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) gate[i] = gate[i] / (1.0f + std::exp(-gate[i])) * up[i];
  });
}

void add_inplace(float* y, const float* x, int64_t n) {
  elementwise(n, [=](int64_t i0, int64_t i1) {
#pragma omp simd
    for (int64_t i = i0; i < i1; ++i) y[i] += x[i];
  });
}

void layer_norm_lanes(const float* x, int64_t rows, int64_t n, float eps, const float* weight, const float* bias,
                      float* y) {
  if (rows <= 0 || n <= 0) return;
  kernels().layer_norm_lanes(x, rows, n, eps, weight, bias, y);
}

void gelu_erf_lanes(float* x, int64_t n) {
  if (n <= 0) return;
  kernels().gelu_erf_lanes(x, n);
}

void silu_lanes(float* x, int64_t n) {
  if (n <= 0) return;
  kernels().silu_lanes(x, n);
}

void softmax_rows(float* scores, int64_t rows, int64_t n, float scale) {
  if (rows <= 0 || n <= 0) return;
  kernels().softmax_rows(scores, rows, n, scale);
}

void attention_over_rows(const float* q, int64_t rows, const float* keys, const float* values, const int32_t* key_rows,
                         int64_t count, int64_t heads, int64_t head_dim, float* out, float* mass) {
  if (rows <= 0) return;
  CUBEFORGE_CHECK(count > 0 && heads > 0 && head_dim > 0, "attention over no rows, heads or channels");
  kernels().attention_over_rows(q, rows, keys, values, key_rows, count, heads, head_dim, out, mass);
}

void attention_over_rows_generic(const float* q, int64_t rows, const float* keys, const float* values,
                                 const int32_t* key_rows, int64_t count, int64_t heads, int64_t head_dim, float* out,
                                 float* mass) {
  const int64_t H = heads, D = head_dim, W = H * D;
  const float scale = 1.0f / std::sqrt(float(D));
  thread_local std::vector<float> weights;  // [rows, H, count]
  weights.resize(size_t(rows * H * count));
  for (int64_t j = 0; j < count; ++j) {
    const float* key = keys + int64_t(key_rows[j]) * W;
    for (int64_t r = 0; r < rows; ++r)
      for (int64_t h = 0; h < H; ++h) {
        float dot = 0.f;
        for (int64_t d = 0; d < D; ++d) dot += q[r * W + h * D + d] * key[h * D + d];
        weights[size_t((r * H + h) * count + j)] = dot * scale;
      }
  }
  softmax_rows(weights.data(), rows * H, count, 1.f);
  for (int64_t r = 0; r < rows; ++r) {
    if (mass)
      for (int64_t j = 0; j < count; ++j) {
        float sum = 0.f;
        for (int64_t h = 0; h < H; ++h) sum += weights[size_t((r * H + h) * count + j)];
        mass[r * count + j] = sum;
      }
    std::fill(out + r * W, out + (r + 1) * W, 0.f);
    for (int64_t j = 0; j < count; ++j) {
      const float* value = values + int64_t(key_rows[j]) * W;
      for (int64_t h = 0; h < H; ++h) {
        const float p = weights[size_t((r * H + h) * count + j)];
        for (int64_t d = 0; d < D; ++d) out[r * W + h * D + d] += p * value[h * D + d];
      }
    }
  }
}

void fourier_embed(const float* weight, const float* carrier, int64_t num_freqs, const float* points, int64_t count,
                   float* out) {
  if (count <= 0) return;
  kernels().fourier_embed(weight, carrier, num_freqs, points, count, out);
}

}  // namespace cubeforge::cpu
