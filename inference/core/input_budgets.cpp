// The budgets' table, their variables, and the message of a refusal.
#include "inference/core/input_budgets.h"

#include <charconv>
#include <cstdlib>
#include <limits>
#include <string>

namespace cubeforge {

namespace {

constexpr uint64_t kMiB = uint64_t(1) << 20;

// Measured on the 2-core test machine: a binary STL of 2 million triangles
// (the default) is imported in 16 s and 490 MB, and tokenized in 21 s and
// 510 MB, most of it Assimp reading; twice the triangles, twice the cost. 256
// corners keep the quadratic triangulation of the largest polygons to about
// a millisecond each. A model's safetensors header holds about 150 bytes per
// tensor: 16 MiB is a hundred thousand tensors, far beyond any model's.
const InputBudgetInfo kBudgets[] = {
    {"CUBEFORGE_MAX_MESH_BYTES", 512 * kMiB, "bytes"},
    {"CUBEFORGE_MAX_MESH_VERTICES", 6'000'000, "vertices"},
    {"CUBEFORGE_MAX_MESH_FACES", 2'000'000, "triangles"},
    {"CUBEFORGE_MAX_MESH_INSTANCES", 10'000, "placed mesh parts"},
    {"CUBEFORGE_MAX_MESH_NODES", 10'000, "nodes"},
    {"CUBEFORGE_MAX_POLYGON_CORNERS", 256, "corners"},
    {"CUBEFORGE_MAX_MESH_GRID_COVERAGE", 32'000'000, "grid columns"},
    {"CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES", 16 * kMiB, "bytes"},
    {"CUBEFORGE_MAX_PROMPTS_BYTES", 4 * kMiB, "bytes"},
};

}  // namespace

const InputBudgetInfo& input_budget_info(InputBudget budget) { return kBudgets[size_t(budget)]; }

Result<uint64_t> input_budget(InputBudget budget) {
  const InputBudgetInfo& info = input_budget_info(budget);
  const char* text = std::getenv(info.variable);
  if (!text || !*text) return info.default_value;
  const std::string_view value(text);
  uint64_t parsed = 0;
  const auto [end, error] = std::from_chars(value.data(), value.data() + value.size(), parsed);
  if (error != std::errc() || end != value.data() + value.size() || parsed == 0)
    return make_error(ErrorCode::kInvalidArgument,
                      std::string(info.variable) + " is '" + std::string(value) +
                          "'; it must be a whole number of " + info.unit + " from 1 (unset it for the default, " +
                          std::to_string(info.default_value) + ")");
  return parsed;
}

Status check_input_budget(InputBudget budget, uint64_t amount, std::string_view subject) {
  CUBEFORGE_ASSIGN_OR_RETURN(const uint64_t limit, input_budget(budget));
  if (amount <= limit) return ok_status();
  const InputBudgetInfo& info = input_budget_info(budget);
  const bool saturated = amount == std::numeric_limits<uint64_t>::max();
  const std::string amount_text = saturated ? "more than 2^64" : std::to_string(amount);
  if (saturated)
    return make_error(ErrorCode::kUnsupported, std::string(subject) + " needs " + amount_text + " " + info.unit +
                                                   ", over any budget (" + info.variable + " is " +
                                                   std::to_string(limit) + "); the file is damaged or hostile");
  return make_error(ErrorCode::kUnsupported,
                    std::string(subject) + " needs " + amount_text + " " + info.unit + ", over the budget of " +
                        std::to_string(limit) + " (" + info.variable + "); if the file is what you meant, set " +
                        info.variable + "=" + amount_text + " or more to read it");
}

uint64_t saturating_add(uint64_t a, uint64_t b) {
  return a > std::numeric_limits<uint64_t>::max() - b ? std::numeric_limits<uint64_t>::max() : a + b;
}

uint64_t saturating_multiply(uint64_t a, uint64_t b) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return std::numeric_limits<uint64_t>::max();
  return a * b;
}

}  // namespace cubeforge
