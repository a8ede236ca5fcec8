// The CPU emulator's runtime (see include/cuda_runtime.h): fibers for CUDA
// threads, barriers for __syncthreads and shuffles, plain host memory for
// device and pinned memory, and stream capture as a recorded list of launches.
//
// Fibers start through makecontext/swapcontext once and then switch with
// _setjmp/_longjmp, which skip the signal-mask system calls that make
// swapcontext slow; a finished fiber jumps back to the scheduler and its stack
// is reused by the next block. A block whose fibers stop making progress (a
// barrier some thread can never reach) aborts with a message instead of
// hanging.
#include <setjmp.h>
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>

#include "cuda_runtime.h"

namespace emulator {
namespace {

struct Fiber {
  ucontext_t start_context;
  jmp_buf resume;
  char* stack = nullptr;
  Thread thread;
  bool started = false;
  bool done = false;
};

struct Warp {
  unsigned slots[32];
  int arrived = 0;
  int alive = 0;
  unsigned long long generation = 0;
};

constexpr std::size_t kStackBytes = 256 * 1024;
ucontext_t scheduler_context;
jmp_buf scheduler_resume;
std::vector<Fiber> fibers;
Fiber* running = nullptr;
dim3 block_index_value, block_dim_value, grid_dim_value;
const std::function<void()>* kernel_body = nullptr;
int block_arrived = 0, block_alive = 0;
unsigned long long block_generation = 0;
std::vector<Warp> warps;
bool progressed = false;

void yield() {
  if (_setjmp(running->resume) == 0) _longjmp(scheduler_resume, 1);
}

void release_waiters() {
  if (block_arrived > 0 && block_arrived == block_alive) block_arrived = 0, ++block_generation;
}

void fiber_main() {
  (*kernel_body)();
  running->done = true;
  progressed = true;
  --block_alive;
  Warp& warp = warps[running->thread.thread_index.x / 32];
  --warp.alive;
  if (warp.arrived > 0 && warp.arrived == warp.alive) warp.arrived = 0, ++warp.generation;
  release_waiters();
  _longjmp(scheduler_resume, 1);
}

void warp_barrier(Warp& warp) {
  const unsigned long long generation = warp.generation;
  if (++warp.arrived == warp.alive) {
    warp.arrived = 0;
    ++warp.generation;
    progressed = true;
    return;
  }
  while (warp.generation == generation) yield();
}

void run_block(dim3 block) {
  if (block.y != 1 || block.z != 1) {
    std::fprintf(stderr, "CUDA emulator: only one-dimensional blocks are supported\n");
    std::abort();
  }
  const int count = int(block.x);
  if (int(fibers.size()) < count) fibers.resize(count);
  warps.assign((count + 31) / 32, Warp{});
  for (int i = 0; i < count; ++i) warps[i / 32].alive++;
  block_alive = count;
  block_arrived = 0;
  for (int i = 0; i < count; ++i) {
    Fiber& fiber = fibers[i];
    if (!fiber.stack) fiber.stack = static_cast<char*>(std::malloc(kStackBytes));
    fiber.thread.thread_index = dim3(unsigned(i), 0, 0);
    fiber.started = false;
    fiber.done = false;
  }
  int remaining = count;
  int idle_rounds = 0;
  while (remaining > 0) {
    progressed = false;
    for (int i = 0; i < count; ++i) {
      Fiber& fiber = fibers[i];
      if (fiber.done) continue;
      running = &fiber;
      if (_setjmp(scheduler_resume) == 0) {
        if (!fiber.started) {
          fiber.started = true;
          progressed = true;
          getcontext(&fiber.start_context);
          fiber.start_context.uc_stack.ss_sp = fiber.stack;
          fiber.start_context.uc_stack.ss_size = kStackBytes;
          fiber.start_context.uc_link = nullptr;
          makecontext(&fiber.start_context, fiber_main, 0);
          swapcontext(&scheduler_context, &fiber.start_context);
        } else {
          _longjmp(fiber.resume, 1);
        }
      }
      if (fiber.done) --remaining;
    }
    // A barrier releases waiters one round later, so allow one idle round.
    idle_rounds = progressed ? 0 : idle_rounds + 1;
    if (idle_rounds > 2) {
      std::fprintf(stderr, "CUDA emulator: block (%u,%u,%u) deadlocked at a barrier (%d threads left)\n",
                   block_index_value.x, block_index_value.y, block_index_value.z, remaining);
      std::abort();
    }
  }
  running = nullptr;
}

bool capturing = false;
std::vector<std::function<void()>>* captured = nullptr;

void execute(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  kernel_body = &kernel;
  grid_dim_value = grid;
  block_dim_value = block;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) {
        block_index_value = dim3(x, y, z);
        run_block(block);
      }
}

using Steps = std::vector<std::function<void()>>;

}  // namespace

Thread* current() { return &running->thread; }
const dim3& block_index() { return block_index_value; }
const dim3& block_dim() { return block_dim_value; }
const dim3& grid_dim() { return grid_dim_value; }

void sync_block() {
  const unsigned long long generation = block_generation;
  if (++block_arrived == block_alive) {
    block_arrived = 0;
    ++block_generation;
    progressed = true;
    return;
  }
  while (block_generation == generation) yield();
}

unsigned exchange(unsigned value, int source_lane, int) {
  const int lane = int(running->thread.thread_index.x % 32);
  Warp& warp = warps[running->thread.thread_index.x / 32];
  warp.slots[lane] = value;
  warp_barrier(warp);
  const unsigned result = warp.slots[source_lane];
  warp_barrier(warp);
  return result;
}

void launch_impl(dim3 grid, dim3 block, cudaStream_t, std::function<void()> kernel) {
  if (capturing) {
    captured->push_back([grid, block, kernel] { execute(grid, block, kernel); });
    return;
  }
  execute(grid, block, kernel);
}

void begin_capture() {
  capturing = true;
  captured = new Steps();
}

void* end_capture() {
  capturing = false;
  return std::exchange(captured, nullptr);
}

}  // namespace emulator

using Steps = std::vector<std::function<void()>>;

const char* cudaGetErrorName(cudaError_t e) { return e == cudaSuccess ? "cudaSuccess" : "cudaErrorEmulated"; }
const char* cudaGetErrorString(cudaError_t e) { return e == cudaSuccess ? "no error" : "error in the CUDA emulator"; }
cudaError_t cudaGetLastError() { return cudaSuccess; }
cudaError_t cudaMalloc(void** p, size_t n) {
  *p = std::aligned_alloc(256, (n + 255) / 256 * 256);
  return *p ? cudaSuccess : cudaErrorMemoryAllocation;
}
cudaError_t cudaFree(void* p) { std::free(p); return cudaSuccess; }
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind) { std::memcpy(d, s, n); return cudaSuccess; }
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind, cudaStream_t) {
  std::memcpy(d, s, n);
  return cudaSuccess;
}
cudaError_t cudaMemset(void* d, int v, size_t n) { std::memset(d, v, n); return cudaSuccess; }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) { return cudaMalloc(p, n); }
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) { *d = h; return cudaSuccess; }
cudaError_t cudaFreeHost(void* p) { std::free(p); return cudaSuccess; }
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = 132; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::snprintf(p->name, sizeof p->name, "CPU fiber emulator");
  p->major = 9, p->minor = 0, p->multiProcessorCount = 132, p->totalGlobalMem = std::size_t(1) << 34;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
cudaError_t cudaStreamCreate(cudaStream_t* s) { *s = reinterpret_cast<cudaStream_t>(new int(0)); return cudaSuccess; }
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete reinterpret_cast<int*>(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s) return cudaErrorInvalidValue;  // as on a GPU: the legacy stream cannot be captured
  emulator::begin_capture();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t, cudaGraph_t* g) {
  *g = reinterpret_cast<cudaGraph_t>(emulator::end_capture());
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = reinterpret_cast<cudaGraphExec_t>(new Steps(*reinterpret_cast<Steps*>(g)));
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete reinterpret_cast<Steps*>(g); return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete reinterpret_cast<Steps*>(e); return cudaSuccess; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t) {
  for (auto& step : *reinterpret_cast<Steps*>(e)) step();
  return cudaSuccess;
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = reinterpret_cast<cudaEvent_t>(new int(0)); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete reinterpret_cast<int*>(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t) { return cudaSuccess; }
cudaError_t cudaEventSynchronize(cudaEvent_t) { return cudaSuccess; }
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 1.0f; return cudaSuccess; }
