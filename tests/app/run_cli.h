// cubeforge-cli and cubeforge-lab run as a user would, for the tests of
// test_cli (whose CMakeLists names the binaries in CUBEFORGE_CLI_PATH and
// CUBEFORGE_LAB_PATH); a measuring command runs on cubeforge-lab.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "tests/support/programs.h"
#include "tests/support/run_command.h"

namespace cubeforge::testing {

inline CommandOutput run_cli(const std::string& arguments) { return run_command(program_for(arguments), arguments); }

// The results of a cubeforge-lab command's --json report, after checking the
// envelope every lab command writes (app/lab/lab_report.h): one object of
// "command" (its name), "machine" (threads, kernels, BLAS core) and "results".
inline nlohmann::json lab_results(const CommandOutput& r, std::string_view command) {
  const size_t start = r.out.find("{\"command\"");
  if (start == std::string::npos) {
    ADD_FAILURE() << "no lab report of " << command << " in: " << r.out;
    return nlohmann::json::object();
  }
  const auto report = nlohmann::json::parse(r.out.substr(start), nullptr, false);
  if (report.is_discarded() || !report.is_object()) {
    ADD_FAILURE() << "not one JSON object: " << r.out;
    return nlohmann::json::object();
  }
  EXPECT_EQ(report.size(), 3u) << report.dump();
  EXPECT_EQ(report.value("command", ""), command) << report.dump();
  const auto& machine = report.value("machine", nlohmann::json::object());
  EXPECT_GE(machine.value("threads", 0), 1) << report.dump();
  EXPECT_FALSE(machine.value("kernel_isa", "").empty()) << report.dump();
  EXPECT_FALSE(machine.value("blas_core", "").empty()) << report.dump();
  EXPECT_TRUE(report.contains("results") && report["results"].is_object()) << report.dump();
  return report.value("results", nlohmann::json::object());
}

// `path` in single quotes, for a command line. Appended: GCC 12 misreads
// `literal + string` here as overlapping copies.
inline std::string quoted(const std::filesystem::path& path) {
  std::string text = "'";
  text += path.string();
  text += '\'';
  return text;
}

// The arguments of a small, quick generation from the built-in model.
inline std::string quick_generate(const std::filesystem::path& out, const std::string& extra = "") {
  return "generate --prompt 'a tall chair' --resolution 4 --out " + quoted(out) + " " + extra;
}

}  // namespace cubeforge::testing
