// `cubeforge-lab trace-diff A B`: compares two traces (generate --trace), or a
// trace and a reference dump whose tensors carry the same names, tensor by
// tensor in A's recording order: relative error ‖a − b‖ / ‖b‖, max |a − b|,
// the first values of each, and the first tensor over the tolerance. Exit
// status 0 when every shared tensor is within the tolerance, 1 when one is
// not, 2 when the files cannot be compared. Tensor names come from the files:
// the table shows them escaped and cut (untrusted_text.h), the JSON escaped
// whole.
#include <cmath>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "inference/core/untrusted_text.h"
#include "inference/tensor/trace_file.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kTraceDiffCommand = "trace-diff";

struct TraceDiffOptions {
  LabOptions lab;
  std::string a, b;
  double tolerance = 1e-4;
};

std::string values_text(const std::vector<float>& values) {
  std::string text;
  char number[32];
  for (float v : values) {
    std::snprintf(number, sizeof number, "%s%.6g", text.empty() ? "" : " ", double(v));
    text += number;
  }
  return text;
}

// NaN and infinity have no JSON spelling: null.
nlohmann::json number_json(double value) { return std::isfinite(value) ? nlohmann::json(value) : nlohmann::json(); }

void print_json(const TraceDiffOptions& o, const TraceComparison& c) {
  nlohmann::json tensors = nlohmann::json::array();
  for (const TensorComparison& t : c.tensors)
    tensors.push_back({{"name", escape_untrusted(t.name)},
                       {"shape_a", t.shape_a},
                       {"shape_b", t.shape_b},
                       {"comparable", t.comparable},
                       {"relative_error", number_json(t.relative_error)},
                       {"max_abs_difference", number_json(t.max_abs_difference)},
                       {"first_a", t.first_a},
                       {"first_b", t.first_b},
                       {"within_tolerance", t.within_tolerance}});
  auto escaped = [](const std::vector<std::string>& names) {
    nlohmann::json list = nlohmann::json::array();
    for (const std::string& name : names) list.push_back(escape_untrusted(name));
    return list;
  };
  print_lab_report(
      kTraceDiffCommand,
      {
          {"a", escape_untrusted(o.a)},
          {"b", escape_untrusted(o.b)},
          {"tolerance", c.tolerance},
          {"compared", c.tensors.size()},
          {"first_over_tolerance", c.first_over_tolerance
                                       ? nlohmann::json(escape_untrusted(c.tensors[*c.first_over_tolerance].name))
                                       : nlohmann::json()},
          {"tensors", tensors},
          {"only_in_a", escaped(c.only_in_a)},
          {"only_in_b", escaped(c.only_in_b)},
      });
}

void print_table(const TraceComparison& c) {
  std::printf("%-5s %-10s %-10s %s\n", "", "relative", "max |a-b|", "tensor [shape]: first values of a / b");
  for (const TensorComparison& t : c.tensors) {
    const char* status = !t.comparable ? "SIZE" : t.within_tolerance ? "ok" : "OVER";
    std::string shape = shape_to_string(t.shape_a);
    if (t.shape_b != t.shape_a) shape += " vs " + shape_to_string(t.shape_b);
    std::printf("%-5s %-10.3g %-10.3g %s %s: %s / %s\n", status, t.relative_error, t.max_abs_difference,
                readable_untrusted(t.name).c_str(), shape.c_str(), values_text(t.first_a).c_str(),
                values_text(t.first_b).c_str());
  }
  auto list = [](const char* label, const std::vector<std::string>& names) {
    if (names.empty()) return;
    std::printf("%zu tensors only in %s, first %s\n", names.size(), label, readable_untrusted(names.front()).c_str());
  };
  list("A", c.only_in_a);
  list("B", c.only_in_b);
  if (c.first_over_tolerance) {
    const TensorComparison& t = c.tensors[*c.first_over_tolerance];
    if (t.comparable)
      std::printf("first over the tolerance %g: %s (relative error %.3g, max |a-b| %.3g)\n", c.tolerance,
                  readable_untrusted(t.name).c_str(), t.relative_error, t.max_abs_difference);
    else
      std::printf("first over the tolerance %g: %s (sizes differ: %s vs %s)\n", c.tolerance,
                  readable_untrusted(t.name).c_str(), shape_to_string(t.shape_a).c_str(),
                  shape_to_string(t.shape_b).c_str());
  } else {
    std::printf("all %zu shared tensors within the tolerance %g\n", c.tensors.size(), c.tolerance);
  }
}

int run_trace_diff(const TraceDiffOptions& o) {
  auto a = SafetensorsFile::open(o.a);
  if (!a.ok()) {
    std::fprintf(stderr, "%s: %s\n", kTraceDiffCommand, a.error().to_string().c_str());
    return 2;
  }
  auto b = SafetensorsFile::open(o.b);
  if (!b.ok()) {
    std::fprintf(stderr, "%s: %s\n", kTraceDiffCommand, b.error().to_string().c_str());
    return 2;
  }
  auto comparison = compare_traces(*a, *b, o.tolerance);
  if (!comparison.ok()) {
    std::fprintf(stderr, "%s: %s\n", kTraceDiffCommand, comparison.error().to_string().c_str());
    return 2;
  }
  if (comparison->tensors.empty()) {
    std::fprintf(stderr,
                 "%s: '%s' and '%s' share no tensor names; compare two traces of the same model, or a "
                 "trace and a reference dump that names its tensors as the trace does\n",
                 kTraceDiffCommand, readable_untrusted(o.a).c_str(), readable_untrusted(o.b).c_str());
    return 2;
  }
  if (o.lab.json)
    print_json(o, *comparison);
  else
    print_table(*comparison);
  return comparison->first_over_tolerance ? 1 : 0;
}

}  // namespace

Action add_trace_diff_command(CLI::App& app) {
  auto o = std::make_shared<TraceDiffOptions>();
  CLI::App* cmd = app.add_subcommand(
      kTraceDiffCommand,
      "Compare two traces (generate --trace) tensor by tensor; exit 1 when one is over the tolerance");
  cmd->add_option("a", o->a, "A trace file")->required();
  cmd->add_option("b", o->b, "The trace or reference safetensors file to compare it with")->required();
  cmd->add_option("--tolerance", o->tolerance, "Largest relative error ‖a−b‖/‖b‖ that counts as equal")
      ->check(CLI::NonNegativeNumber);
  add_lab_options(cmd, o->lab, kJsonOption);
  return [cmd, o]() -> int { return cmd->parsed() ? run_trace_diff(*o) : -1; };
}

}  // namespace cubeforge::cli
