// The one way a cubeforge-lab command writes its JSON (--json): one line,
//   {"command": NAME, "machine": {...}, "results": {...}}
// where "machine" is what the figures were measured on (CPU threads, the
// kernels and the BLAS core that ran) and "results" is the command's own
// figures. Strings from outside (paths, captions, tensor names) are escaped
// by the commands; the line is valid JSON whatever bytes remain.
#pragma once

#include <iostream>
#include <nlohmann/json.hpp>
#include <string>

#include "app/cli/model_option.h"
#include "inference/cpu/blas_kernels.h"
#include "inference/cpu/ops.h"

namespace cubeforge::cli {

// The machine a lab command measured on.
inline nlohmann::json machine_json() {
  const char* blas_core = cpu::blas_core_name();
  return {{"threads", cpu::thread_count()},
          {"kernel_isa", cpu::kernel_isa()},
          {"blas_core", blas_core ? blas_core : "unknown"}};
}

inline nlohmann::json lab_report(const std::string& command, nlohmann::json results) {
  return {{"command", command}, {"machine", machine_json()}, {"results", std::move(results)}};
}

// Prints `results` of `command` in the envelope, on one line.
inline void print_lab_report(const std::string& command, nlohmann::json results) {
  std::cout << json_line(lab_report(command, std::move(results))) << std::endl;
}

}  // namespace cubeforge::cli
