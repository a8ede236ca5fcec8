// Kernels with the mistakes the emulator must catch, one each, next to a
// correct twin where there is one (emulator_test.cpp runs them). CUDA source
// like the families in inference/cuda/, rewritten for the emulator at build
// time; nvcc never builds it.
#include <cuda_runtime.h>

#include "deliberately_broken.h"

namespace broken {
namespace {

__global__ void vector_load_kernel(const float* data, int offset, float* out) {
  const float4 v = *reinterpret_cast<const float4*>(data + offset);
  if (threadIdx.x == 0) *out = v.x + v.y + v.z + v.w;
}

__global__ void empty_kernel(int* out) {
  if (out && threadIdx.x == 0) *out = 1;
}

// Thread 0 publishes a value the others read; `barrier` says whether they wait for it.
__global__ void publish_kernel(int* out, bool barrier) {
  __shared__ int published;
  if (threadIdx.x == 0) published = int(blockIdx.x) + 1;
  if (barrier) __syncthreads();
  out[blockIdx.x * blockDim.x + threadIdx.x] = published;
  if (barrier) __syncthreads();  // nobody overwrites `published` before everyone has read it
}

__global__ void divergent_barrier_kernel(int* out) {
  if (threadIdx.x % 2 == 0) {
    __syncthreads();
  } else {
    __syncthreads();
  }
  out[threadIdx.x] = 1;
}

__global__ void divergent_shuffle_kernel(int* out) {
  int value = int(threadIdx.x);
  if (threadIdx.x % 32 < 16) {
    value += __shfl_xor_sync(0xffffffffu, value, 1);
  } else {
    value -= __shfl_xor_sync(0xffffffffu, value, 1);
  }
  out[threadIdx.x] = value;
}

__global__ void add_one_kernel(int* data) { data[threadIdx.x] += 1; }

__global__ void __launch_bounds__(64) bounded_kernel(int* out) { out[threadIdx.x] = 1; }

}  // namespace

void vector_load(const float* data, int offset, float* out) { vector_load_kernel<<<1, 32>>>(data, offset, out); }
void launch_threads(int threads, std::size_t shared_bytes, int* out) {
  empty_kernel<<<1, threads, shared_bytes, nullptr>>>(out);
}
void publish(int* out, int blocks, int threads, bool barrier) { publish_kernel<<<blocks, threads>>>(out, barrier); }
void divergent_barrier(int* out) { divergent_barrier_kernel<<<1, 64>>>(out); }
void divergent_shuffle(int* out) { divergent_shuffle_kernel<<<1, 32>>>(out); }
void add_one(int* data, int count, cudaStream_t stream) { add_one_kernel<<<1, count, 0, stream>>>(data); }
void bounded(int* out, int threads) { bounded_kernel<<<1, threads>>>(out); }

}  // namespace broken
