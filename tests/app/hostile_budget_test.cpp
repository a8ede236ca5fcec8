// cubeforge-cli against hostile inputs by class (tests/support/hostile_input_cases.h):
// files made to crash a parser, to cost gigabytes or minutes from a small or
// sparse file, to cost time in a header, or to slip a field past a check.
// Each case must end as a correct run does (exit code and message), within a
// bound on peak resident memory and on bytes read: measures of work, not of
// the machine's speed. The wall-clock cap only guards against a hang.
#include <gtest/gtest.h>

#include "tests/support/programs.h"
#include "tests/support/hostile_input_cases.h"
#include "tests/support/measured_run.h"
#include "tests/support/sanitizer_build.h"

namespace cubeforge {
namespace {

using testing::HostileCase;

// The built-in model run whole at resolution 4 peaks near 30 MB and reads
// about 12 MB; a refusal must cost no more than such a run, whatever the
// file claims or however large it is.
constexpr uint64_t kPeakResidentBound = uint64_t(100) << 20;
constexpr uint64_t kBytesReadBound = uint64_t(64) << 20;

class HostileBudget : public ::testing::TestWithParam<HostileCase> {};

TEST_P(HostileBudget, EndsAsACorrectRunWithinItsBudget) {
  const HostileCase& c = GetParam();
  if (testing::kSanitizerBuild && c.stack_bytes)
    GTEST_SKIP() << "sanitizer builds need more stack than the case gives";
  testing::ScratchFolder folder("hostile-budget");
  std::vector<std::string> argv = c.build(folder.path());
  argv.insert(argv.begin(), testing::is_lab_command(argv.front()) ? CUBEFORGE_LAB_PATH : CUBEFORGE_CLI_PATH);
  testing::RunLimits limits;
  limits.wall_seconds = 60;
  limits.resident_bytes = uint64_t(testing::kSanitizerBuild ? 4 : 1) << 30;
  limits.stack_bytes = c.stack_bytes;
  std::function<bool(const std::string&, pid_t)> watch;
  if (c.during) watch = [&](const std::string& out, pid_t pid) { return c.during(out, pid, folder.path()); };
  const testing::MeasuredRun run = testing::run_measured(argv, limits, c.environment, watch);

  ASSERT_TRUE(run.exited()) << c.description << ": " << run.outcome() << "\n" << run.output;
  EXPECT_EQ(run.exit_code, c.expected_exit) << c.description << "\n" << run.output;
  EXPECT_NE(run.output.find(c.expected_output), std::string::npos)
      << c.description << ": expected \"" << c.expected_output << "\" in\n" << run.output;
  EXPECT_LE(run.bytes_read, kBytesReadBound) << c.description;
  // Sanitizers' shadow memory and quarantine make resident memory no measure there.
  if (!testing::kSanitizerBuild) {
    EXPECT_LE(run.peak_resident_bytes, kPeakResidentBound) << c.description;
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, HostileBudget, ::testing::ValuesIn(testing::hostile_input_cases()),
                         [](const ::testing::TestParamInfo<HostileCase>& info) { return info.param.name; });

}  // namespace
}  // namespace cubeforge
