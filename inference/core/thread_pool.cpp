// Spin-then-sleep worker pool (see thread_pool.h for why not OpenMP).
#include "inference/core/thread_pool.h"

#include <algorithm>
#include <memory>
#include <mutex>
#include <system_error>
#include <utility>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#define CUBEFORGE_PAUSE() _mm_pause()
#else
#define CUBEFORGE_PAUSE() ((void)0)
#endif

namespace cubeforge {

namespace {
// About 10-50 µs of spinning before a thread sleeps: long enough to catch
// back-to-back loops in decode, short enough not to starve other processes.
constexpr int kSpinIterations = 4000;

std::mutex g_pool_mutex;
std::unique_ptr<ThreadPool> g_pool;

// True while this thread runs a share of a parallel loop.
thread_local bool t_inside_parallel_body = false;
}  // namespace

ThreadPool::ThreadPool(int threads) {
  const int total = std::max(1, threads);
  for (int i = 1; i < total; ++i) {
    try {
      workers_.emplace_back([this, i] { worker_loop(i); });
    } catch (const std::system_error&) {
      break;  // no memory for another thread's stack: work with the threads there are
    }
  }
}

ThreadPool::~ThreadPool() {
  stop_.store(true);
  generation_.fetch_add(1);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::run_share(int share, int shares) {
  const int64_t per = (count_ + shares - 1) / shares;
  const int64_t begin = std::min(count_, per * share);
  const int64_t end = std::min(count_, begin + per);
  if (begin >= end) return;
  const bool was_inside = t_inside_parallel_body;
  t_inside_parallel_body = true;
  try {
    (*body_)(begin, end);
  } catch (...) {
    std::lock_guard<std::mutex> lock(failure_mutex_);
    if (!failure_) failure_ = std::current_exception();
  }
  t_inside_parallel_body = was_inside;
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t current = generation_.load(std::memory_order_acquire);
    for (int spin = 0; current == seen && spin < kSpinIterations; ++spin) {
      CUBEFORGE_PAUSE();
      current = generation_.load(std::memory_order_acquire);
    }
    while (current == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      current = generation_.load(std::memory_order_acquire);
    }
    seen = current;
    if (stop_.load()) return;
    if (index < shares_) run_share(index, shares_);
    if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) pending_.notify_one();
  }
}

void ThreadPool::parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (count <= 0) return;
  if (t_inside_parallel_body) {
    body(0, count);
    return;
  }
  const int64_t max_shares = std::max<int64_t>(1, count / std::max<int64_t>(1, grain));
  const int shares = int(std::min<int64_t>(size(), max_shares));
  if (shares <= 1) {
    body(0, count);
    return;
  }
  body_ = &body;
  count_ = count;
  shares_ = shares;
  pending_.store(int(workers_.size()), std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  run_share(0, shares);
  int left = pending_.load(std::memory_order_acquire);
  for (int spin = 0; left != 0 && spin < kSpinIterations; ++spin) {
    CUBEFORGE_PAUSE();
    left = pending_.load(std::memory_order_acquire);
  }
  while (left != 0) {
    pending_.wait(left, std::memory_order_acquire);
    left = pending_.load(std::memory_order_acquire);
  }
  if (failure_) {
    std::exception_ptr failure = std::exchange(failure_, nullptr);
    std::rethrow_exception(failure);
  }
}

ThreadPool& ThreadPool::global() {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  if (!g_pool) g_pool = std::make_unique<ThreadPool>(int(std::max(1u, std::thread::hardware_concurrency())));
  return *g_pool;
}

void ThreadPool::set_global_threads(int threads) {
  std::lock_guard<std::mutex> lock(g_pool_mutex);
  const int wanted = threads > 0 ? threads : int(std::max(1u, std::thread::hardware_concurrency()));
  if (g_pool && g_pool->size() == wanted) return;
  g_pool.reset();
  g_pool = std::make_unique<ThreadPool>(wanted);
}

}  // namespace cubeforge
