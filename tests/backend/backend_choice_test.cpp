// Choosing the backend that runs the GPT, on whatever machine runs the tests:
// `auto` takes CUDA exactly when cuda_availability() says it can, and
// otherwise runs on the CPU saying why; an explicit `cuda` that cannot run is
// an error naming the cause (a build with CUDA on a machine without a driver
// answers at run time, it does not crash); the command line says the same.
#include <gtest/gtest.h>

#include <optional>

#include "inference/planning/select_backend.h"
#include "inference/model/gpt.h"
#include "tests/support/oracle.h"
#include "tests/support/run_command.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;

std::optional<DualStreamGpt> fixture_gpt() {
  auto config = parse_model_config_yaml(oracle_dir() / "config.yaml");
  if (!config.ok()) return std::nullopt;
  auto gpt = DualStreamGpt::load(oracle_dir() / "shape_gpt.safetensors", &config->gpt);
  if (!gpt.ok()) return std::nullopt;
  return std::move(*gpt);
}

TEST(BackendChoice, AutoSaysWhatItChoseAndWhy) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto gpt = fixture_gpt();
  ASSERT_TRUE(gpt);
  const CudaAvailability cuda = cuda_availability();
  EXPECT_NE(cuda.available, cuda.why_not.size() > 0) << "either a device or a reason";
  auto automatic = select_token_backend(BackendChoice::kAuto, *gpt);
  ASSERT_TRUE(automatic.ok()) << automatic.error().to_string();
  EXPECT_EQ(&automatic->backend->model(), &*gpt);
  EXPECT_NE(automatic->reason.find("auto: "), std::string::npos) << automatic->reason;
  if (cuda.available) {
    EXPECT_EQ(automatic->backend->kind(), BackendKind::kCuda) << automatic->reason;
  } else {
    EXPECT_EQ(automatic->backend->kind(), BackendKind::kCpu);
    EXPECT_NE(automatic->reason.find(cuda.why_not), std::string::npos) << automatic->reason;
  }
  auto cpu = select_token_backend(BackendChoice::kCpu, *gpt);
  ASSERT_TRUE(cpu.ok());
  EXPECT_EQ(cpu->backend->kind(), BackendKind::kCpu);
}

TEST(BackendChoice, CudaWithoutAUsableDeviceIsAnErrorNamingTheCause) {
  CUBEFORGE_REQUIRE_ORACLE();
  const CudaAvailability cuda = cuda_availability();
  if (cuda.available) GTEST_SKIP() << "this machine has a usable CUDA device: " << cuda.device;
  auto gpt = fixture_gpt();
  ASSERT_TRUE(gpt);
  auto explicit_cuda = select_token_backend(BackendChoice::kCuda, *gpt);
  ASSERT_FALSE(explicit_cuda.ok());
  EXPECT_NE(explicit_cuda.error().message.find(cuda.why_not), std::string::npos) << explicit_cuda.error().message;
  auto r = testing::run_command(CUBEFORGE_CLI_PATH, "generate --model '" + oracle_dir().string() +
                                                        "' --prompt chair --backend cuda --out /tmp/never-written.glb");
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("the CUDA backend cannot run"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists("/tmp/never-written.glb"));
}

TEST(BackendChoice, NamesParseAndOthersAreRejected) {
  EXPECT_EQ(*parse_backend_choice("auto"), BackendChoice::kAuto);
  EXPECT_EQ(*parse_backend_choice("cpu"), BackendChoice::kCpu);
  EXPECT_EQ(*parse_backend_choice("cuda"), BackendChoice::kCuda);
  EXPECT_FALSE(parse_backend_choice("gpu").ok());
  for (BackendChoice choice : {BackendChoice::kAuto, BackendChoice::kCpu, BackendChoice::kCuda})
    EXPECT_EQ(*parse_backend_choice(backend_choice_name(choice)), choice);
}

}  // namespace
}  // namespace cubeforge
