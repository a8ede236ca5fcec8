// The pool under memory pressure: an exception thrown by a loop body (as
// std::bad_alloc is) reaches the caller after every share has finished,
// instead of terminating the program from a worker thread.
#include "inference/core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <new>

namespace cubeforge {
namespace {

TEST(ThreadPool, AnExceptionInAWorkerReachesTheCaller) {
  ThreadPool pool(4);
  for (int round = 0; round < 20; ++round) {
    std::atomic<int> finished{0};
    bool caught = false;
    try {
      pool.parallel_for(4, 1, [&](int64_t begin, int64_t) {
        if (begin == 3) throw std::bad_alloc();
        ++finished;
      });
    } catch (const std::bad_alloc&) {
      caught = true;
    }
    EXPECT_TRUE(caught);
    EXPECT_EQ(finished.load(), 3);  // the other shares ran to their end before the rethrow
  }
  // The pool is still usable afterwards.
  std::atomic<int64_t> sum{0};
  pool.parallel_for(1000, 1, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) sum += i;
  });
  EXPECT_EQ(sum.load(), 999 * 1000 / 2);
}

}  // namespace
}  // namespace cubeforge
