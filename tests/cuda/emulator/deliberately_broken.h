// Launchers of deliberately_broken.cu's kernels.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>

namespace broken {
void vector_load(const float* data, int offset, float* out);    // a float4 load at data + offset
void launch_threads(int threads, std::size_t shared_bytes, int* out);
void publish(int* out, int blocks, int threads, bool barrier);  // out[b·threads + t] = b + 1 when right
void divergent_barrier(int* out);                               // __syncthreads from two places
void divergent_shuffle(int* out);                               // a shuffle from two places
void add_one(int* data, int count, cudaStream_t stream);        // data[i] += 1 for i < count
void bounded(int* out, int threads);                            // __launch_bounds__(64), out[t] = 1
}  // namespace broken
