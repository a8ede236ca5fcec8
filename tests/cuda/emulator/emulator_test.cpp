// The emulator rejects what a GPU would reject, each shown on a deliberately
// broken kernel (deliberately_broken.cu) that the emulator used to run
// without complaint: misaligned 16-byte loads, blocks over 1024 threads or
// over the dynamic shared-memory limit or the kernel's launch bounds, illegal
// calls during stream capture, shuffles and barriers reached from different
// places, and a race that index order hides and the shuffled schedule
// exposes. It also gives what a GPU may give where the emulator used to be
// kinder: fresh memory that is not zero, and legacy-stream copies that a
// non-blocking stream does not wait for.
#include <gtest/gtest.h>

#include <cuda_runtime.h>

#include <cmath>
#include <vector>

#include "deliberately_broken.h"
#include "inference/cuda/decode_graph.h"
#include "inference/cuda/device_memory.h"

namespace {

using cubeforge::Status;
using cubeforge::cuda::CudaDecodeGraph;
using cubeforge::cuda::DeviceBuffer;
using cubeforge::cuda::Stream;

template <class T>
DeviceBuffer<T> device(std::size_t count) {
  auto buffer = DeviceBuffer<T>::allocate(count, "emulator test");
  EXPECT_TRUE(buffer.ok());
  return std::move(*buffer);
}

TEST(EmulatorChecks, MisalignedVectorLoadIsCaught) {
  auto data = device<float>(64);
  auto out = device<float>(1);
  ASSERT_TRUE(data.upload(std::vector<float>(64, 1.0f)).ok());
  broken::vector_load(data.data(), 4, out.data());  // 16-byte aligned
  EXPECT_EQ(*out.download(), std::vector<float>{4.0f});
  EXPECT_DEATH(broken::vector_load(data.data(), 1, out.data()), "misaligned address");
}

TEST(EmulatorChecks, OversizedBlocksDoNotLaunch) {
  auto out = device<int>(1);
  ASSERT_TRUE(out.upload({0}).ok());
  broken::launch_threads(1024, 48 * 1024, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaSuccess);
  EXPECT_EQ(*out.download(), std::vector<int>{1});
  ASSERT_TRUE(out.upload({0}).ok());
  broken::launch_threads(1025, 0, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  broken::launch_threads(32, 48 * 1024 + 1, out.data());
  EXPECT_EQ(cudaGetLastError(), cudaErrorInvalidConfiguration);
  EXPECT_EQ(cudaGetLastError(), cudaSuccess) << "the error is reported once";
  EXPECT_EQ(*out.download(), std::vector<int>{0}) << "neither kernel ran";
}

class CaptureTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), cudaSuccess); }
  void TearDown() override { cudaStreamDestroy(stream_); }
  cudaStream_t stream_ = nullptr;
};

TEST_F(CaptureTest, WorkOnTheCapturedStreamIsRecordedNotRun) {
  auto data = device<int>(4);
  ASSERT_TRUE(data.upload({1, 2, 3, 4}).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);  // the non-blocking stream does not wait for the upload
  std::vector<int> host = {10, 20, 30, 40};
  ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
  broken::add_one(data.data(), 4, stream_);
  ASSERT_EQ(cudaMemcpyAsync(host.data(), data.data(), 4 * sizeof(int), cudaMemcpyDeviceToHost, stream_), cudaSuccess);
  cudaGraph_t graph = nullptr;
  ASSERT_EQ(cudaStreamEndCapture(stream_, &graph), cudaSuccess);
  EXPECT_EQ(host, (std::vector<int>{10, 20, 30, 40})) << "nothing runs while capturing";
  cudaGraphExec_t executable = nullptr;
  ASSERT_EQ(cudaGraphInstantiate(&executable, graph, 0), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(executable, stream_), cudaSuccess);
  ASSERT_EQ(cudaGraphLaunch(executable, stream_), cudaSuccess);
  EXPECT_EQ(host, (std::vector<int>{3, 4, 5, 6}));
  cudaGraphExecDestroy(executable);
  cudaGraphDestroy(graph);
}

TEST_F(CaptureTest, IllegalCallsInvalidateTheCapture) {
  auto data = device<int>(4);
  std::vector<int> host(4);
  struct Violation {
    const char* name;
    std::function<cudaError_t()> call;
  };
  const Violation violations[] = {
      {"cudaMalloc", [] { void* p = nullptr; return cudaMalloc(&p, 64); }},
      {"cudaStreamSynchronize", [&] { return cudaStreamSynchronize(stream_); }},
      {"cudaDeviceSynchronize", [] { return cudaDeviceSynchronize(); }},
      {"synchronous cudaMemcpy",
       [&] { return cudaMemcpy(host.data(), data.data(), 16, cudaMemcpyDeviceToHost); }},
      {"cudaMemcpyAsync on the legacy stream",
       [&] { return cudaMemcpyAsync(host.data(), data.data(), 16, cudaMemcpyDeviceToHost, nullptr); }},
      {"a launch on the legacy stream",
       [&] {
         broken::add_one(data.data(), 4, nullptr);
         return cudaGetLastError();
       }},
  };
  for (const Violation& violation : violations) {
    SCOPED_TRACE(violation.name);
    ASSERT_EQ(cudaStreamBeginCapture(stream_, cudaStreamCaptureModeThreadLocal), cudaSuccess);
    broken::add_one(data.data(), 4, stream_);
    EXPECT_NE(violation.call(), cudaSuccess);
    cudaGraph_t graph = nullptr;
    EXPECT_EQ(cudaStreamEndCapture(stream_, &graph), cudaErrorStreamCaptureInvalidated);
    EXPECT_EQ(graph, nullptr);
    cudaGetLastError();
  }
}

TEST_F(CaptureTest, ADecodeGraphWhoseStepSynchronisesFailsWithTheReason) {
  auto data = device<int>(4);
  auto graph = CudaDecodeGraph::create(
      stream_,
      [&](Stream stream) -> Status {
        broken::add_one(data.data(), 4, stream);
        cudaStreamSynchronize(stream);  // illegal while the step is being recorded
        return cubeforge::ok_status();
      },
      CudaDecodeGraph::Mode::kGraph);
  ASSERT_TRUE(graph.ok());
  const Status launched = graph->launch();
  ASSERT_FALSE(launched.ok());
  EXPECT_NE(launched.error().message.find("capture"), std::string::npos) << launched.error().to_string();
}

TEST(EmulatorChecks, LaunchPastTheLaunchBoundsIsCaught) {
  auto out = device<int>(128);
  broken::bounded(out.data(), 64);
  EXPECT_EQ((*out.download())[63], 1);
  EXPECT_DEATH(broken::bounded(out.data(), 128), "bounded_kernel launched with 128 threads per block, past its "
                                                  "__launch_bounds__\\(64\\)");
}

TEST(EmulatorChecks, FreshMemoryIsNotZero) {
  const std::vector<float> floats = *device<float>(5).download();
  for (float value : floats) EXPECT_TRUE(std::isnan(value));
  EXPECT_EQ(*device<int>(3).download(), std::vector<int>(3, -1));
}

// data.upload() is cudaMemcpy on the legacy stream: a non-blocking stream's
// kernel does not wait for it, a blocking stream's does, and so does
// anything after a device synchronise.
TEST(EmulatorChecks, NonBlockingStreamsDoNotWaitForLegacyCopies) {
  cudaStream_t non_blocking = nullptr, blocking = nullptr;
  ASSERT_EQ(cudaStreamCreateWithFlags(&non_blocking, cudaStreamNonBlocking), cudaSuccess);
  ASSERT_EQ(cudaStreamCreate(&blocking), cudaSuccess);
  auto data = device<int>(2);
  ASSERT_TRUE(data.upload({10, 20}).ok());
  broken::add_one(data.data(), 2, non_blocking);
  EXPECT_EQ(*data.download(), (std::vector<int>{10, 20})) << "the copy landed after the kernel, over its result";

  ASSERT_TRUE(data.upload({10, 20}).ok());
  ASSERT_EQ(cudaDeviceSynchronize(), cudaSuccess);
  broken::add_one(data.data(), 2, non_blocking);
  EXPECT_EQ(*data.download(), (std::vector<int>{11, 21}));

  ASSERT_TRUE(data.upload({10, 20}).ok());
  broken::add_one(data.data(), 2, blocking);
  EXPECT_EQ(*data.download(), (std::vector<int>{11, 21}));

  ASSERT_TRUE(data.fill_bytes(0).ok());
  broken::add_one(data.data(), 2, non_blocking);
  EXPECT_EQ(*data.download(), (std::vector<int>{0, 0})) << "the memset landed after the kernel";
  cudaStreamDestroy(non_blocking);
  cudaStreamDestroy(blocking);
}

TEST(EmulatorChecks, BarrierReachedFromTwoPlacesIsCaught) {
  auto out = device<int>(64);
  EXPECT_DEATH(broken::divergent_barrier(out.data()), "__syncthreads reached from two places");
}

TEST(EmulatorChecks, ShuffleReachedFromTwoPlacesIsCaught) {
  auto out = device<int>(32);
  EXPECT_DEATH(broken::divergent_shuffle(out.data()), "shuffle reached from two places");
}

// Thread 0 writes a shared value the other threads read: without a barrier
// that is a race. Index order runs thread 0 first and hides it; the shuffled
// schedule shows it under some seed, and never flags the kernel with the barrier.
TEST(EmulatorChecks, ShuffledScheduleExposesARaceThatIndexOrderHides) {
  constexpr int kBlocks = 4, kThreads = 64;
  auto out = device<int>(kBlocks * kThreads);
  auto wrong_values = [&](bool barrier) {
    broken::publish(out.data(), kBlocks, kThreads, barrier);
    const std::vector<int> values = *out.download();
    int wrong = 0;
    for (int b = 0; b < kBlocks; ++b)
      for (int t = 0; t < kThreads; ++t) wrong += values[size_t(b * kThreads + t)] != b + 1;
    return wrong;
  };
  emulator::set_schedule(false, 0);
  EXPECT_EQ(wrong_values(false), 0) << "index order hides the race";
  int seeds_exposing = 0;
  for (unsigned long long seed = 1; seed <= 8; ++seed) {
    emulator::set_schedule(true, seed);
    seeds_exposing += wrong_values(false) > 0;
    EXPECT_EQ(wrong_values(true), 0) << "seed " << seed << ": the barrier makes it right";
  }
  emulator::reset_schedule();
  EXPECT_GT(seeds_exposing, 0);
}

}  // namespace
