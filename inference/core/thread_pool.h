// The CPU backend's worker threads.
//
// Decode runs a few hundred short parallel loops per token. OpenMP's default
// spinning barriers collapse when the cores are shared with other work (a
// descheduled spinner holds every other thread), so the pool spins only
// briefly and then sleeps on the job counter (std::atomic::wait, a futex).
// The calling thread always takes part, so a pool of one thread is free.
//
// Under memory limits the pool degrades instead of aborting: a worker thread
// the system refuses to start leaves a smaller pool, and an exception thrown
// by a loop body (std::bad_alloc) reaches the caller of parallel_for once every
// share has finished, as it would from a plain loop.
#pragma once

#include <atomic>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace cubeforge {

class ThreadPool {
 public:
  explicit ThreadPool(int threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return int(workers_.size()) + 1; }

  // Calls body(begin, end) over [0, count) split into contiguous ranges of at
  // least `grain` items, one range per thread; returns when all are done, and
  // rethrows the first exception a range threw.
  // Called from inside a body (a nested loop), it runs the whole range on the
  // calling thread: the outer loop already has every thread busy.
  void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

  // The process-wide pool; resized by set_thread_count.
  static ThreadPool& global();
  static void set_global_threads(int threads);

 private:
  void worker_loop(int index);
  void run_share(int share, int shares);

  std::vector<std::thread> workers_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
  // The job being run.
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t count_ = 0;
  int shares_ = 0;
  std::mutex failure_mutex_;
  std::exception_ptr failure_;  // the first exception of the job being run
};

// Calls body(i) for every i in [0, count) on the global pool; `parallel`
// false runs it on the calling thread.
template <class Body>
void parallel_for_each(int64_t count, bool parallel, Body&& body);

// Convenience over the global pool.
inline void parallel_for(int64_t count, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  ThreadPool::global().parallel_for(count, grain, body);
}

template <class Body>
void parallel_for_each(int64_t count, bool parallel, Body&& body) {
  if (!parallel) {
    for (int64_t i = 0; i < count; ++i) body(i);
    return;
  }
  parallel_for(count, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) body(i);
  });
}

}  // namespace cubeforge
