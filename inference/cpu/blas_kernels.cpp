// OpenBLAS kernel check and the re-execution with OPENBLAS_CORETYPE.
#include "inference/cpu/blas_kernels.h"

#include <cblas.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <new>
#include <strings.h>
#include <vector>

// OpenBLAS's buffer allocator (exported by libopenblas, not declared in cblas.h).
extern "C" void* blas_memory_alloc(int procpos);
extern "C" void blas_memory_free(void* buffer);

#include "inference/cpu/kernels.h"

namespace cubeforge::cpu {

namespace {

// OpenBLAS's BUFFER_SIZE on x86-64, plus room for the allocator's own rounding.
constexpr size_t kBlasBufferBytes = (size_t(128) << 20) + (size_t(64) << 10);

std::atomic<int> g_reserved_buffers{0};
std::mutex g_reserve_mutex;

// Whether a mapping the size of one buffer fits in the address space now.
bool room_for_blas_buffer() {
  void* probe = ::mmap(nullptr, kBlasBufferBytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (probe == MAP_FAILED) return false;
  ::munmap(probe, kBlasBufferBytes);
  return true;
}

bool address_space_limited() {
  rlimit limit{};
  return ::getrlimit(RLIMIT_AS, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY;
}

}  // namespace

void reserve_blas_buffers(int threads) {
  if (threads <= g_reserved_buffers.load(std::memory_order_acquire)) return;
  std::lock_guard<std::mutex> lock(g_reserve_mutex);
  const int reserved = g_reserved_buffers.load(std::memory_order_relaxed);
  if (threads <= reserved) return;
  // Holding `threads` buffers at once makes OpenBLAS keep that many; the ones
  // beyond those it already has are new mappings, each checked first.
  std::vector<void*> held;
  auto release = [&] {
    for (void* buffer : held) blas_memory_free(buffer);
  };
  for (int i = 0; i < threads; ++i) {
    if (i >= reserved && !room_for_blas_buffer()) {
      release();
      throw std::bad_alloc();
    }
    held.push_back(blas_memory_alloc(1));
  }
  release();
  g_reserved_buffers.store(threads, std::memory_order_release);
}

const char* blas_core_name() { return openblas_get_corename(); }

void reexec_with_matching_blas_kernels(char** argv) {
  if (std::getenv("CUBEFORGE_KEEP_BLAS")) return;
  const char* wanted = nullptr;
  const char* core = openblas_get_corename();
  if (!std::getenv("OPENBLAS_CORETYPE") && core && strcasecmp(core, "prescott") == 0) {
    if (supports_avx512_kernels())
      wanted = "SkylakeX";
    else if (supports_avx2_kernels())
      wanted = "Haswell";
  }
  const bool threads_unset = !std::getenv("OPENBLAS_NUM_THREADS") && !std::getenv("OMP_NUM_THREADS");
  const bool one_thread = threads_unset && (wanted || address_space_limited());
  if (!wanted && !one_thread) return;
  if (wanted) setenv("OPENBLAS_CORETYPE", wanted, 1);
  if (one_thread) setenv("OPENBLAS_NUM_THREADS", "1", 1);  // products run on cubeforge's own threads
  setenv("CUBEFORGE_KEEP_BLAS", "1", 1);  // never loop
  execv("/proc/self/exe", argv);
  // Still here: carry on with the kernels we have.
}

}  // namespace cubeforge::cpu
