// The CPU emulator's runtime (see include/cuda_runtime.h): fibers for CUDA
// threads, barriers for __syncthreads and shuffles, plain host memory for
// device and pinned memory, and stream capture as a recorded list of work.
//
// Scheduling. A block's threads are fibers on stacks that are created once
// (makecontext) and reused by every later block; switches are the compiler's
// __builtin_setjmp / __builtin_longjmp, which save only the stack and frame
// pointers (the compiler spills the other registers around the setjmp) and,
// unlike the C library's, neither touch the signal mask nor walk the thread's
// cancellation handlers on every jump. A fiber
// runs until it waits at a barrier or finishes; a barrier's last arrival
// releases the others, which run in the next round. Each round takes the
// runnable threads in an order shuffled under the schedule's seed (blocks
// too), so a kernel that is only right in index order fails here. A round
// with nothing runnable while threads wait is a deadlock: the emulator aborts
// naming the barrier. Every barrier also records where its first thread
// arrived; a thread arriving at another place in the code aborts the run,
// since on a GPU that is undefined (a hang, or values from the wrong shuffle).
//
// Shuffles use two slot arrays alternately, so one barrier per shuffle
// suffices: a lane can be at most one shuffle ahead of the slowest.
#include <ucontext.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>

#include "cuda_runtime.h"

namespace emulator {
namespace {

enum class State { kIdle, kReady, kWaiting, kDone };

// A __builtin_setjmp buffer: five words (frame pointer, resume address, stack
// pointer and room the target may use).
using JumpBuffer = void* [5];

// Never inlined: GCC does not allow __builtin_longjmp in a function that also
// calls __builtin_setjmp.
[[gnu::noinline, noreturn]] void jump_to(JumpBuffer& target) { __builtin_longjmp(target, 1); }

struct Fiber {
  JumpBuffer resume;       // where a waiting fiber continues
  JumpBuffer start_point;  // where an idle fiber starts its next thread
  char* stack = nullptr;
  Thread thread;
  State state = State::kIdle;
};

// One barrier: a warp's shuffle or the block's __syncthreads.
struct Barrier {
  int arrived = 0;
  unsigned long long generation = 0;
  std::source_location first_site;
  std::vector<int> waiting;  // fibers to release
};

struct Warp {
  unsigned slots[2][32];
  int alive = 0;
  Barrier barrier;
};

constexpr std::size_t kStackBytes = 256 * 1024;
constexpr int kMaxThreadsPerBlock = 1024;
constexpr std::size_t kMaxDynamicSharedBytes = 48 * 1024;  // without cudaFuncSetAttribute's opt-in

ucontext_t scheduler_context;
JumpBuffer scheduler_resume;
std::vector<Fiber> fibers;
Fiber* running = nullptr;
Thread idle_thread;
int running_index = -1;
const std::function<void()>* kernel_body = nullptr;
std::vector<Warp> warps;
Barrier block_barrier;
int block_alive = 0;
std::vector<int> ready, next_ready;

bool shuffled = true;
unsigned long long schedule_seed = 1;
bool schedule_read = false;

// splitmix64: the schedule's random numbers (cheap; quality is not the point).
struct ScheduleRandom {
  unsigned long long state = 1;
  void seed(unsigned long long value) { state = value; }
  unsigned long long next() {
    unsigned long long z = (state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
} schedule_random;

template <class T>
void shuffle(std::vector<T>& items) {
  for (size_t i = items.size(); i > 1; --i) std::swap(items[i - 1], items[schedule_random.next() % i]);
}

void read_schedule() {
  if (schedule_read) return;
  schedule_read = true;
  if (const char* text = std::getenv("CUBEFORGE_EMULATOR_SEED"); text && *text) {
    if (std::string(text) == "sequential") {
      shuffled = false;
    } else {
      schedule_seed = std::strtoull(text, nullptr, 10);
    }
  }
  schedule_random.seed(schedule_seed);
}

[[noreturn]] void fail(const std::string& message) {
  std::fprintf(stderr, "CUDA emulator: %s\n", message.c_str());
  std::fflush(stderr);
  std::abort();
}

std::string site_text(const std::source_location& site) {
  return std::string(site.file_name()) + ":" + std::to_string(site.line()) + ":" + std::to_string(site.column());
}

bool same_site(const std::source_location& a, const std::source_location& b) {
  return a.line() == b.line() && a.column() == b.column() &&
         (a.file_name() == b.file_name() || std::strcmp(a.file_name(), b.file_name()) == 0);
}

std::string where_in_grid() {
  return "block (" + std::to_string(current_block_index.x) + "," + std::to_string(current_block_index.y) + "," +
         std::to_string(current_block_index.z) + ") thread " + std::to_string(running->thread.thread_index.x);
}

void release(Barrier& barrier) {
  for (int index : barrier.waiting) {
    fibers[size_t(index)].state = State::kReady;
    next_ready.push_back(index);
  }
  barrier.waiting.clear();
  barrier.arrived = 0;
  ++barrier.generation;
}

// The calling fiber arrives; returns once every live member has arrived.
void arrive(Barrier& barrier, int members, const std::source_location& where, const char* kind) {
  if (barrier.arrived == 0) {
    barrier.first_site = where;
  } else if (!same_site(barrier.first_site, where)) {
    fail(std::string(kind) + " reached from two places: " + site_text(barrier.first_site) + " and, by " +
         where_in_grid() + ", " + site_text(where));
  }
  if (++barrier.arrived == members) {
    release(barrier);
    return;
  }
  barrier.waiting.push_back(running_index);
  running->state = State::kWaiting;
  if (__builtin_setjmp(running->resume) == 0) jump_to(scheduler_resume);
}

void finish_thread() {
  running->state = State::kDone;
  --block_alive;
  Warp& warp = warps[running->thread.thread_index.x / 32];
  --warp.alive;
  // A thread that exits no longer holds its warp or block back.
  if (warp.barrier.arrived > 0 && warp.barrier.arrived == warp.alive) release(warp.barrier);
  if (block_barrier.arrived > 0 && block_barrier.arrived == block_alive) release(block_barrier);
}

// A fiber's whole life: park, run one thread when started, park again. The
// globals (not locals) carry state across the jumps.
void fiber_entry() {
  for (;;) {
    if (__builtin_setjmp(running->start_point) == 0) jump_to(scheduler_resume);
    (*kernel_body)();
    finish_thread();
  }
}

void create_fiber(Fiber& fiber) {
  fiber.stack = static_cast<char*>(std::malloc(kStackBytes));
  ucontext_t start;
  getcontext(&start);
  start.uc_stack.ss_sp = fiber.stack;
  start.uc_stack.ss_size = kStackBytes;
  start.uc_link = nullptr;
  makecontext(&start, fiber_entry, 0);
  running = &fiber;
  if (__builtin_setjmp(scheduler_resume) == 0) swapcontext(&scheduler_context, &start);
  running = nullptr;
}

void run_block(dim3 block) {
  const int count = int(block.x);
  while (int(fibers.size()) < count) fibers.emplace_back();
  for (int i = 0; i < count; ++i)
    if (!fibers[size_t(i)].stack) create_fiber(fibers[size_t(i)]);
  warps.assign(size_t((count + 31) / 32), Warp{});
  for (int i = 0; i < count; ++i) warps[size_t(i / 32)].alive++;
  block_barrier = Barrier{};
  block_alive = count;
  ready.clear();
  next_ready.clear();
  for (int i = 0; i < count; ++i) {
    Fiber& fiber = fibers[size_t(i)];
    fiber.thread.thread_index = dim3(unsigned(i), 0, 0);
    fiber.state = State::kIdle;
    next_ready.push_back(i);
  }
  int finished = 0;
  while (finished < count) {
    std::swap(ready, next_ready);
    next_ready.clear();
    if (ready.empty()) {
      std::string waits;
      if (block_barrier.arrived > 0) waits = " (__syncthreads at " + site_text(block_barrier.first_site) + ")";
      for (const Warp& warp : warps)
        if (warp.barrier.arrived > 0) waits += " (a shuffle at " + site_text(warp.barrier.first_site) + ")";
      fail("block (" + std::to_string(current_block_index.x) + "," + std::to_string(current_block_index.y) + "," +
           std::to_string(current_block_index.z) + ") deadlocked at a barrier that some thread never reaches, " +
           std::to_string(count - finished) + " threads left" + waits);
    }
    if (shuffled) shuffle(ready);
    for (int index : ready) {
      Fiber& fiber = fibers[size_t(index)];
      running = &fiber;
      running_index = index;
      current_thread = &fiber.thread;
      const State state = fiber.state;
      fiber.state = State::kReady;
      if (__builtin_setjmp(scheduler_resume) == 0) jump_to(state == State::kIdle ? fiber.start_point : fiber.resume);
      if (fiber.state == State::kDone) {
        ++finished;
        fiber.state = State::kIdle;
      }
    }
  }
  running = nullptr;
  running_index = -1;
  current_thread = &idle_thread;
}

void execute(dim3 grid, dim3 block, const std::function<void()>& kernel) {
  read_schedule();
  kernel_body = &kernel;
  current_grid_dim = grid;
  current_block_dim = block;
  std::vector<dim3> blocks;
  for (unsigned z = 0; z < grid.z; ++z)
    for (unsigned y = 0; y < grid.y; ++y)
      for (unsigned x = 0; x < grid.x; ++x) blocks.emplace_back(x, y, z);
  if (shuffled) shuffle(blocks);
  for (const dim3& index : blocks) {
    current_block_index = index;
    run_block(block);
  }
}

// ---- Errors, streams and capture.

cudaError_t last_error = cudaSuccess;

cudaError_t record_error(cudaError_t error) {
  if (error != cudaSuccess && last_error == cudaSuccess) last_error = error;
  return error;
}

using Steps = std::vector<std::function<void()>>;
cudaStream_t capturing_stream = nullptr;
Steps* captured = nullptr;
std::string capture_violation;

bool capturing() { return captured != nullptr; }

// An API call that a capture forbids: it fails, and the capture is invalidated.
bool forbidden_in_capture(const char* call) {
  if (!capturing()) return false;
  if (capture_violation.empty()) capture_violation = call;
  return true;
}

// Streams. A stream handle points at its creation flags. A non-blocking
// stream (cudaStreamNonBlocking) does not wait for the legacy default stream,
// and on a GPU the legacy stream's copies and memsets may still be in flight
// when work on such a stream starts: cudaMemcpy from pageable host memory
// returns once the bytes are staged, cudaMemset and device-to-device copies
// return at once. So the emulator holds the legacy stream's copies and
// memsets back (the host bytes staged at the call) and does them only when
// something waits for them: a kernel or other work on the legacy stream or on
// a blocking stream, a copy to the host, cudaDeviceSynchronize,
// cudaStreamSynchronize of the legacy stream, cudaEventSynchronize, cudaFree.
// Work on a non-blocking stream runs at once, before them: code that uploads
// with the legacy calls and then computes on its own stream without
// synchronising reads what the allocation held (see cudaMalloc's fill).
struct StreamState {
  unsigned flags = 0;
};

Steps legacy_pending;

void drain_legacy_stream() {
  Steps pending = std::exchange(legacy_pending, {});
  for (const auto& work : pending) work();
}

bool non_blocking(cudaStream_t stream) {
  return stream && (reinterpret_cast<const StreamState*>(stream)->flags & cudaStreamNonBlocking);
}

// Work for `stream`: recorded while that stream is captured, else done now
// (after the legacy stream's held-back copies unless the stream is
// non-blocking). Work on the legacy stream during a capture invalidates it.
cudaError_t submit(cudaStream_t stream, std::function<void()> work, const char* call) {
  if (capturing()) {
    if (stream == capturing_stream) {
      captured->push_back(std::move(work));
      return cudaSuccess;
    }
    if (stream == nullptr) {
      if (capture_violation.empty()) capture_violation = std::string(call) + " on the legacy stream";
      return record_error(cudaErrorStreamCaptureImplicit);
    }
  }
  if (!non_blocking(stream)) drain_legacy_stream();
  work();
  return cudaSuccess;
}

// A copy or memset on the legacy stream: held back until something waits
// for it (see StreamState); on another stream, as submit().
cudaError_t submit_memory_work(cudaStream_t stream, std::function<void()> work, const char* call) {
  if (stream == nullptr && !capturing()) {
    legacy_pending.push_back(std::move(work));
    return cudaSuccess;
  }
  return submit(stream, std::move(work), call);
}

// What fresh device memory holds: not zeros (a GPU promises nothing, and
// reused memory holds old values), but 0xff bytes, a NaN in every f32 and
// bf16 element and -1 in every integer, so that a kernel reading what nobody
// wrote gives NaNs the tests see.
constexpr int kFreshMemoryByte = 0xff;

}  // namespace

void set_schedule(bool shuffle, unsigned long long seed) {
  schedule_read = true;
  shuffled = shuffle;
  schedule_seed = seed;
  schedule_random.seed(seed);
}

void reset_schedule() {
  shuffled = true;
  schedule_seed = 1;
  schedule_read = false;
}

Thread* current_thread = &idle_thread;
dim3 current_block_index, current_block_dim, current_grid_dim;

void sync_block(const std::source_location& where) { arrive(block_barrier, block_alive, where, "__syncthreads"); }

unsigned exchange(unsigned value, int source_lane, const std::source_location& where) {
  const int lane = int(running->thread.thread_index.x % 32);
  Warp& warp = warps[running->thread.thread_index.x / 32];
  const int buffer = int(warp.barrier.generation & 1);
  warp.slots[buffer][lane] = value;
  arrive(warp.barrier, warp.alive, where, "a warp shuffle");
  return warp.slots[buffer][source_lane];
}

cudaError_t submit_work(cudaStream_t stream, std::function<void()> work, const char* call) {
  return submit(stream, std::move(work), call);
}

void check_launch_bounds(unsigned max_threads, const char* kernel) {
  const unsigned threads = current_block_dim.x * current_block_dim.y * current_block_dim.z;
  if (threads > max_threads)
    fail(std::string(kernel) + " launched with " + std::to_string(threads) + " threads per block, past its __launch_bounds__(" +
         std::to_string(max_threads) + "): a GPU refuses the launch");
}

void launch_impl(dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream, std::function<void()> kernel) {
  const unsigned long long threads = 1ull * block.x * block.y * block.z;
  if (threads == 0 || threads > kMaxThreadsPerBlock || block.z > 64 || grid.x == 0 || grid.y == 0 || grid.z == 0 ||
      grid.y > 65535 || grid.z > 65535 || shared_bytes > kMaxDynamicSharedBytes) {
    record_error(cudaErrorInvalidConfiguration);
    return;
  }
  if (block.y != 1 || block.z != 1) fail("only one-dimensional blocks are emulated");
  submit(stream, [grid, block, kernel = std::move(kernel)] { execute(grid, block, kernel); }, "a kernel launch");
}

}  // namespace emulator

using emulator::forbidden_in_capture;
using emulator::record_error;
using Steps = std::vector<std::function<void()>>;

const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInsufficientDriver: return "cudaErrorInsufficientDriver";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorStreamCaptureUnsupported: return "cudaErrorStreamCaptureUnsupported";
    case cudaErrorStreamCaptureInvalidated: return "cudaErrorStreamCaptureInvalidated";
    case cudaErrorStreamCaptureImplicit: return "cudaErrorStreamCaptureImplicit";
  }
  return "cudaErrorUnknown";
}
const char* cudaGetErrorString(cudaError_t e) { return cudaGetErrorName(e); }
cudaError_t cudaGetLastError() { return std::exchange(emulator::last_error, cudaSuccess); }

cudaError_t cudaMalloc(void** p, size_t n) {
  if (forbidden_in_capture("cudaMalloc")) return record_error(cudaErrorStreamCaptureUnsupported);
  const size_t rounded = (n + 255) / 256 * 256;
  *p = std::aligned_alloc(256, rounded);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, emulator::kFreshMemoryByte, rounded);
  return cudaSuccess;
}
cudaError_t cudaFree(void* p) {
  if (forbidden_in_capture("cudaFree")) return record_error(cudaErrorStreamCaptureUnsupported);
  emulator::drain_legacy_stream();  // cudaFree waits for the device
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind kind) {
  if (forbidden_in_capture("cudaMemcpy")) return record_error(cudaErrorStreamCaptureUnsupported);
  if (kind == cudaMemcpyDeviceToHost) {
    // The host waits for the copy, which waits for the legacy stream's earlier work.
    emulator::drain_legacy_stream();
    std::memcpy(d, s, n);
    return cudaSuccess;
  }
  if (kind == cudaMemcpyHostToDevice) {
    // Staged: the caller may reuse its buffer as soon as this returns.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(s),
                                                               static_cast<const unsigned char*>(s) + n);
    return emulator::submit_memory_work(nullptr, [d, staged] { std::memcpy(d, staged->data(), staged->size()); },
                                        "cudaMemcpy");
  }
  return emulator::submit_memory_work(nullptr, [d, s, n] { std::memcpy(d, s, n); }, "cudaMemcpy");
}
cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind kind, cudaStream_t stream) {
  if (kind == cudaMemcpyDeviceToHost || emulator::capturing() || stream != nullptr)
    return emulator::submit(stream, [d, s, n] { std::memcpy(d, s, n); }, "cudaMemcpyAsync");
  if (kind == cudaMemcpyHostToDevice) {
    // Held back: staged now, as a copy from pageable memory is.
    auto staged = std::make_shared<std::vector<unsigned char>>(static_cast<const unsigned char*>(s),
                                                               static_cast<const unsigned char*>(s) + n);
    return emulator::submit_memory_work(nullptr, [d, staged] { std::memcpy(d, staged->data(), staged->size()); },
                                        "cudaMemcpyAsync");
  }
  return emulator::submit_memory_work(nullptr, [d, s, n] { std::memcpy(d, s, n); }, "cudaMemcpyAsync");
}
cudaError_t cudaMemset(void* d, int v, size_t n) {
  if (forbidden_in_capture("cudaMemset")) return record_error(cudaErrorStreamCaptureUnsupported);
  return emulator::submit_memory_work(nullptr, [d, v, n] { std::memset(d, v, n); }, "cudaMemset");
}
cudaError_t cudaMemsetAsync(void* d, int v, size_t n, cudaStream_t stream) {
  return emulator::submit_memory_work(stream, [d, v, n] { std::memset(d, v, n); }, "cudaMemsetAsync");
}
cudaError_t cudaMemGetInfo(size_t* free_bytes, size_t* total_bytes) {
  *free_bytes = std::size_t(15) << 30, *total_bytes = std::size_t(16) << 30;
  return cudaSuccess;
}
cudaError_t cudaDriverGetVersion(int* version) { *version = 13000; return cudaSuccess; }
cudaError_t cudaRuntimeGetVersion(int* version) { *version = 13000; return cudaSuccess; }
cudaError_t cudaHostAlloc(void** p, size_t n, unsigned) {
  if (forbidden_in_capture("cudaHostAlloc")) return record_error(cudaErrorStreamCaptureUnsupported);
  const size_t rounded = (n + 255) / 256 * 256;
  *p = std::aligned_alloc(256, rounded);
  if (!*p) return cudaErrorMemoryAllocation;
  std::memset(*p, emulator::kFreshMemoryByte, rounded);
  return cudaSuccess;
}
cudaError_t cudaHostGetDevicePointer(void** d, void* h, unsigned) { *d = h; return cudaSuccess; }
cudaError_t cudaFreeHost(void* p) {
  if (forbidden_in_capture("cudaFreeHost")) return record_error(cudaErrorStreamCaptureUnsupported);
  emulator::drain_legacy_stream();
  std::free(p);
  return cudaSuccess;
}
cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr, int) { *v = 132; return cudaSuccess; }
cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
  std::snprintf(p->name, sizeof p->name, "CPU fiber emulator");
  p->major = 9, p->minor = 0, p->multiProcessorCount = 132, p->totalGlobalMem = std::size_t(1) << 34;
  return cudaSuccess;
}
cudaError_t cudaDeviceSynchronize() {
  if (forbidden_in_capture("cudaDeviceSynchronize")) return record_error(cudaErrorStreamCaptureUnsupported);
  emulator::drain_legacy_stream();
  return cudaSuccess;
}
cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
  *s = reinterpret_cast<cudaStream_t>(new emulator::StreamState{flags});
  return cudaSuccess;
}
cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, 0); }
cudaError_t cudaStreamQuery(cudaStream_t) {
  if (forbidden_in_capture("cudaStreamQuery")) return record_error(cudaErrorStreamCaptureUnsupported);
  return cudaSuccess;
}
cudaError_t cudaStreamDestroy(cudaStream_t s) { delete reinterpret_cast<emulator::StreamState*>(s); return cudaSuccess; }
cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  if (forbidden_in_capture("cudaStreamSynchronize")) return record_error(cudaErrorStreamCaptureUnsupported);
  if (s == nullptr) emulator::drain_legacy_stream();  // a stream's own work is done when submitted
  return cudaSuccess;
}
cudaError_t cudaStreamBeginCapture(cudaStream_t s, cudaStreamCaptureMode) {
  if (!s) return cudaErrorStreamCaptureUnsupported;  // as on a GPU: the legacy stream cannot be captured
  if (emulator::capturing()) return cudaErrorInvalidValue;
  emulator::capturing_stream = s;
  emulator::captured = new Steps();
  emulator::capture_violation.clear();
  return cudaSuccess;
}
cudaError_t cudaStreamEndCapture(cudaStream_t s, cudaGraph_t* g) {
  if (!emulator::capturing() || s != emulator::capturing_stream) return cudaErrorInvalidValue;
  Steps* steps = std::exchange(emulator::captured, nullptr);
  emulator::capturing_stream = nullptr;
  if (!emulator::capture_violation.empty()) {
    std::fprintf(stderr, "CUDA emulator: capture invalidated by %s\n", emulator::capture_violation.c_str());
    delete steps;
    *g = nullptr;
    return cudaErrorStreamCaptureInvalidated;
  }
  *g = reinterpret_cast<cudaGraph_t>(steps);
  return cudaSuccess;
}
cudaError_t cudaGraphInstantiate(cudaGraphExec_t* e, cudaGraph_t g, unsigned long long) {
  *e = reinterpret_cast<cudaGraphExec_t>(new Steps(*reinterpret_cast<Steps*>(g)));
  return cudaSuccess;
}
cudaError_t cudaGraphDestroy(cudaGraph_t g) { delete reinterpret_cast<Steps*>(g); return cudaSuccess; }
cudaError_t cudaGraphExecDestroy(cudaGraphExec_t e) { delete reinterpret_cast<Steps*>(e); return cudaSuccess; }
cudaError_t cudaGraphLaunch(cudaGraphExec_t e, cudaStream_t stream) {
  const Steps* steps = reinterpret_cast<const Steps*>(e);
  return emulator::submit(stream, [steps] { for (const auto& step : *steps) step(); }, "cudaGraphLaunch");
}
cudaError_t cudaEventCreate(cudaEvent_t* e) { *e = reinterpret_cast<cudaEvent_t>(new int(0)); return cudaSuccess; }
cudaError_t cudaEventDestroy(cudaEvent_t e) { delete reinterpret_cast<int*>(e); return cudaSuccess; }
cudaError_t cudaEventRecord(cudaEvent_t, cudaStream_t stream) {
  return emulator::submit(stream, [] {}, "cudaEventRecord");
}
cudaError_t cudaEventSynchronize(cudaEvent_t) {
  if (forbidden_in_capture("cudaEventSynchronize")) return record_error(cudaErrorStreamCaptureUnsupported);
  emulator::drain_legacy_stream();  // the event may follow held-back legacy work (more than it must wait for)
  return cudaSuccess;
}
cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 1.0f; return cudaSuccess; }
