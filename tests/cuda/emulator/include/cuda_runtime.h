// The CUDA runtime as the CPU emulator provides it: the subset the kernels in
// inference/cuda/, the CUDA token backend and their tests use, enough to run
// the kernels' logic (indexing, reductions, shuffles, barriers, epilogues,
// graph capture and replay, the pinned token ring) on a machine without a
// GPU. It says nothing about speed: the GPU run of the `cuda` label stays the
// judge.
//
// Each CUDA thread is a fiber; blocks run one after another, so a kernel's
// __shared__ variables become function statics; warp shuffles and
// __syncthreads are barriers among the live fibers of a warp or block.
// Kernel launches (`k<<<grid, block, shared, stream>>>(args)`) are rewritten
// into emulator::launch calls by transform_launches.py at build time.
//
// What a GPU would reject, the emulator rejects too (see emulator.cpp):
//  - launches with more than 1024 threads per block, grids past the limits,
//    or more dynamic shared memory than a block may have without opting in
//    (cudaGetLastError reports them; static shared memory is checked by ptxas
//    when nvcc builds the same file);
//  - a launch with more threads per block than the kernel's
//    __launch_bounds__ (transform_launches.py puts the check in the kernel;
//    the emulator aborts, naming the kernel);
//  - reads of memory nobody wrote: fresh allocations hold 0xff bytes (NaN
//    in f32 and bf16), not zeros;
//  - copies and memsets on the legacy stream that work on a non-blocking
//    stream does not wait for: they are held back until something waits for
//    them (emulator.cpp, "Streams");
//  - misaligned vector loads: the vector types carry the device's alignment
//    and the emulator is built with -fsanitize=alignment;
//  - during stream capture, calls that are illegal there (allocation,
//    synchronisation, synchronous copies, work on the legacy stream): the
//    call fails and the capture ends invalidated, as on a GPU;
//  - a warp shuffle or __syncthreads that the threads reach from different
//    places in the code (the emulator aborts, naming both);
//  - races that a fixed thread order hides: threads and blocks run in an
//    order shuffled under a seed (CUBEFORGE_EMULATOR_SEED; "sequential" runs
//    them in index order).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <functional>
#include <source_location>
#include <utility>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __shared__ static
#define __align__(n) __attribute__((aligned(n)))

struct dim3 {
  unsigned x = 1, y = 1, z = 1;
  dim3(unsigned a = 1, unsigned b = 1, unsigned c = 1) : x(a), y(b), z(c) {}
};
struct alignas(16) uint4 { unsigned x, y, z, w; };
struct alignas(8) uint2 { unsigned x, y; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(8) float2 { float x, y; };
inline float2 make_float2(float a, float b) { return {a, b}; }
inline float4 make_float4(float a, float b, float c, float d) { return {a, b, c, d}; }

enum cudaError_t {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInsufficientDriver = 35,
  cudaErrorNoDevice = 100,
  cudaErrorNotReady = 600,
  cudaErrorStreamCaptureUnsupported = 900,
  cudaErrorStreamCaptureInvalidated = 901,
  cudaErrorStreamCaptureImplicit = 906,
};
enum cudaMemcpyKind { cudaMemcpyHostToDevice, cudaMemcpyDeviceToHost, cudaMemcpyDeviceToDevice };
enum cudaStreamCaptureMode { cudaStreamCaptureModeGlobal, cudaStreamCaptureModeThreadLocal };
enum cudaDeviceAttr { cudaDevAttrMultiProcessorCount };
constexpr unsigned cudaHostAllocMapped = 2;
constexpr unsigned cudaStreamNonBlocking = 1;
struct cudaFuncAttributes { int numRegs, maxThreadsPerBlock; size_t sharedSizeBytes, localSizeBytes; };
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
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t = nullptr);
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes);
cudaError_t cudaDriverGetVersion(int* version);
cudaError_t cudaRuntimeGetVersion(int* version);
template <class F> cudaError_t cudaFuncGetAttributes(cudaFuncAttributes* a, F*) {
  *a = cudaFuncAttributes{32, 1024, 0, 0};
  return cudaSuccess;
}
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned);
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned);
cudaError_t cudaFreeHost(void* p);
cudaError_t cudaGetDeviceCount(int* n);
cudaError_t cudaGetDevice(int* d);
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int);
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int);
cudaError_t cudaDeviceSynchronize();
cudaError_t cudaStreamCreate(cudaStream_t* s);
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags);
cudaError_t cudaStreamQuery(cudaStream_t s);
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
// The running thread and its block (set by the scheduler).
extern Thread* current_thread;
extern dim3 current_block_index, current_block_dim, current_grid_dim;
void sync_block(const std::source_location& where);
// Every live lane of the warp deposits `value`; returns source_lane's.
unsigned exchange(unsigned value, int source_lane, const std::source_location& where);
void launch_impl(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, std::function<void()> body);
// Work for `stream` other than a kernel (the emulated cuBLASLt's matmul):
// recorded while the stream is captured, else done in the stream's order.
cudaError_t submit_work(cudaStream_t stream, std::function<void()> work, const char* call);
// Aborts when the running block has more threads than `max_threads` (the
// kernel's __launch_bounds__), which a GPU refuses to launch.
void check_launch_bounds(unsigned max_threads, const char* kernel);
template <class F> void launch(dim3 g, dim3 b, F f) { launch_impl(g, b, 0, nullptr, std::function<void()>(f)); }
template <class F> void launch(dim3 g, dim3 b, size_t shared, cudaStream_t s, F f) {
  launch_impl(g, b, shared, s, std::function<void()>(f));
}

// The order threads and blocks run in: shuffled under `seed`, or index order.
// Defaults to CUBEFORGE_EMULATOR_SEED (a number, or "sequential"), else seed 1.
void set_schedule(bool shuffled, unsigned long long seed);
void reset_schedule();  // back to the default
}  // namespace emulator

#define threadIdx (::emulator::current_thread->thread_index)
#define blockIdx (static_cast<const dim3&>(::emulator::current_block_index))
#define blockDim (static_cast<const dim3&>(::emulator::current_block_dim))
#define gridDim (static_cast<const dim3&>(::emulator::current_grid_dim))

inline void __syncthreads(const std::source_location& where = std::source_location::current()) {
  emulator::sync_block(where);
}
inline float __uint_as_float(unsigned u) { float f; std::memcpy(&f, &u, 4); return f; }
inline unsigned __float_as_uint(float f) { unsigned u; std::memcpy(&u, &f, 4); return u; }
template <class T> T shfl_value(T v, int lane_from, const std::source_location& where) {
  static_assert(sizeof(T) == 4);
  unsigned bits; std::memcpy(&bits, &v, 4);
  unsigned got = emulator::exchange(bits, lane_from, where);
  T r; std::memcpy(&r, &got, 4); return r;
}
template <class T>
T __shfl_xor_sync(unsigned, T v, int offset, const std::source_location& where = std::source_location::current()) {
  return shfl_value(v, int((threadIdx.x % 32) ^ offset), where);
}
template <class T>
T __shfl_up_sync(unsigned, T v, unsigned delta, const std::source_location& where = std::source_location::current()) {
  int lane = threadIdx.x % 32;
  int src = lane - int(delta);
  return shfl_value(v, src < 0 ? lane : src, where);
}
inline unsigned __reduce_xor_sync(unsigned, unsigned v, const std::source_location& where = std::source_location::current()) {
  unsigned r = v;
  for (int o = 16; o > 0; o >>= 1) r ^= __shfl_xor_sync(0xffffffffu, r, o, where);
  return r;
}
template <class T> T __ldg(const T* p) { return *p; }
template <class T> T __ldcs(const T* p) { return *p; }
template <class T> T __ldcg(const T* p) { return *p; }
inline float __fmul_rn(float a, float b) { volatile float r = a * b; return r; }
inline float __fadd_rn(float a, float b) { volatile float r = a + b; return r; }
inline float __fsub_rn(float a, float b) { volatile float r = a - b; return r; }
inline float __fdiv_rn(float a, float b) { volatile float r = a / b; return r; }
// Blocks run one at a time on one host thread: fences order nothing more.
inline void __threadfence() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline void __threadfence_system() { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
inline int atomicAdd(int* p, int v) { int old = *p; *p = old + v; return old; }
inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned old = *p; *p = old + v; return old; }
inline unsigned atomicInc(unsigned* p, unsigned limit) { unsigned old = *p; *p = old >= limit ? 0 : old + 1; return old; }
using std::min; using std::max; using std::isnan;
inline int min(int a, int b) { return a < b ? a : b; }
inline int max(int a, int b) { return a > b ? a : b; }
inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
