// Budgets for what an input file may cost, checked before the work.
//
// A small or sparse file can claim gigabytes of vertices, a header can claim
// millions of tensors, a scene can place one mesh a million times. Every such
// claim is counted from what the file says (a header, a count, a JSON scene)
// and checked against a budget here before anything is allocated for it; the
// refusal says which budget the file exceeded, by how much, and the
// environment variable that raises it. All budgets are in this one table
// (docs/command-line.md lists them); the defaults keep the worst input within
// them to seconds and a few hundred MB on a desktop.
//
// Depth limits (JSON nesting, scene hierarchies) are not budgets: they protect
// recursive code from its stack, so raising them could crash; they are fixed.
#pragma once

#include <cstdint>
#include <string_view>

#include "inference/core/result.h"

namespace cubeforge {

enum class InputBudget {
  kMeshFileBytes,         // a mesh file and the buffer files it names
  kMeshVertices,          // vertices after instancing
  kMeshFaces,             // triangles after triangulation and instancing
  kMeshInstances,         // mesh parts (glTF primitives, ...) placed in the scene, after instancing
  kMeshNodes,             // scene nodes after instancing
  kMeshPolygonCorners,    // corners of one polygon (triangulation is quadratic in them)
  kMeshGridCoverage,      // grid columns the faces' extents span, summed, when a mesh's inside is measured
  kSafetensorsHeaderBytes,  // the JSON header of a weight file
  kPromptsFileBytes,      // a --prompts file
};

struct InputBudgetInfo {
  const char* variable;      // CUBEFORGE_MAX_...
  uint64_t default_value;
  const char* unit;          // "bytes", "triangles", ...
};

const InputBudgetInfo& input_budget_info(InputBudget budget);

// The budget in force: the variable's value when set, else the default. An
// unreadable value is an error naming the variable.
Result<uint64_t> input_budget(InputBudget budget);

// ok when `amount` is within the budget; otherwise an error that begins with
// `subject` ("'x.glb': the scene after instancing") and says the amount, the
// budget and how to raise it.
Status check_input_budget(InputBudget budget, uint64_t amount, std::string_view subject);

// a + b and a * b, stopping at UINT64_MAX: counts taken from files may be anything.
uint64_t saturating_add(uint64_t a, uint64_t b);
uint64_t saturating_multiply(uint64_t a, uint64_t b);

}  // namespace cubeforge
