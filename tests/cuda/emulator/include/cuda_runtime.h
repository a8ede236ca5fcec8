// The CUDA runtime as the CPU emulator provides it: just the subset the
// kernels in inference/cuda/ and their tests use, enough to run the kernels'
// logic (indexing, reductions, shuffles, barriers, epilogues, graph capture
// and replay) on a machine without a GPU. It says nothing about speed, the
// memory model or races: the GPU run of the `cuda` label stays the judge.
//
// Each CUDA thread is a fiber; blocks run one after another, so a kernel's
// __shared__ variables become function statics; warp shuffles and
// __syncthreads are barriers among the live fibers of a warp or block.
// Kernel launches (`k<<<grid, block, shared, stream>>>(args)`) are rewritten
// into emulator::launch calls by transform_launches.py at build time.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <vector>
#include <algorithm>
#include <utility>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct uint4 { unsigned x, y, z, w; };
struct uint2 { unsigned x, y; };
struct float4 { float x, y, z, w; };
struct float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }

enum cudaError_t { cudaSuccess = 0, cudaErrorMemoryAllocation = 2, cudaErrorInvalidValue = 1, cudaErrorNoDevice = 100,
                   cudaErrorStreamCaptureInvalidated = 901 };
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaStreamCaptureMode { cudaStreamCaptureModeThreadLocal };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
constexpr unsigned cudaHostAllocMapped = 2;
struct CUstream_st;
struct CUevent_st;
struct CUgraph_st;
struct CUgraphExec_st;
typedef CUstream_st* cudaStream_t;
typedef CUevent_st* cudaEvent_t;
typedef CUgraph_st* cudaGraph_t;
typedef CUgraphExec_st* cudaGraphExec_t;
struct cudaDeviceProp { char name[256]; int major, minor, multiProcessorCount; size_t totalGlobalMem; };

const char* cudaGetErrorName(cudaError_t);
const char* cudaGetErrorString(cudaError_t);
cudaError_t cudaGetLastError();
cudaError_t cudaMalloc(void** p, size_t n);
template <class T> cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc(reinterpret_cast<void**>(p), n); }
cudaError_t cudaFree(void* p);
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind);
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t = nullptr);
cudaError_t cudaMemset(void* d, int v, size_t n);
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned);
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamDestroy(cudaStream_t s);
cudaError_t cudaStreamSynchronize(cudaStream_t s);
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode);
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g);
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long);
cudaError_t cudaGraphDestroy(cudaGraph_t g);
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e);
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t s);
cudaError_t cudaEventCreate(cudaEvent_t* e);
cudaError_t cudaEventDestroy(cudaEvent_t e);
cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = nullptr);
cudaError_t cudaEventSynchronize(cudaEvent_t e);
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t a, cudaEvent_t b);

namespace emulator {
struct Thread { dim3 thread_index; };
Thread* current();
const dim3& block_index();
const dim3& block_dim();
const dim3& grid_dim();
void sync_block();
unsigned exchange(unsigned value, int source_lane, int mode);  // mode 0: take source lane's value
void launch_impl(dim3 grid, dim3 block, cudaStream_t stream, std::function<void()> body);
void begin_capture();
void* end_capture();
template <class F> void launch(dim3 g, dim3 b, F f) { launch_impl(g, b, nullptr, std::function<void()>(f)); }
template <class F> void launch(dim3 g, dim3 b, size_t, cudaStream_t s, F f) { launch_impl(g, b, s, std::function<void()>(f)); }
}  // namespace emulator

#define threadIdx (::emulator::current()->thread_index)
#define blockIdx (::emulator::block_index())
#define blockDim (::emulator::block_dim())
#define gridDim (::emulator::grid_dim())

inline void __syncthreads() { emulator::sync_block(); }
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
template <class T> T shfl_value(T v, int lane_from) {
  static_assert(sizeof(T) == 4);
  unsigned bits; std::memcpy(&bits, &v, 4);
  unsigned got = emulator::exchange(bits, lane_from, 0);
  T r; std::memcpy(&r, &got, 4); return r;
}
template <class T> T __shfl_xor_sync(unsigned, T v, int offset) {
  return shfl_value(v, int((threadIdx.x % 32) ^ offset));
}
template <class T> T __shfl_up_sync(unsigned, T v, unsigned delta) {
  int lane = threadIdx.x % 32;
  int src = lane - int(delta);
  return shfl_value(v, src < 0 ? lane : src);
}
inline unsigned __reduce_xor_sync(unsigned, unsigned v) {
  unsigned r = v;
  for (int o = 16; o > 0; o >>= 1) r ^= __shfl_xor_sync(0xffffffffu, r, o);
  return r;
}
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
using std::min; using std::max; using std::isnan;
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
