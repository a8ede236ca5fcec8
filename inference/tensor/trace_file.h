// Traces as files: a sink that keeps every named tensor and writes them as one
// safetensors file, and the comparison of two such files (or of a trace and a
// reference dump whose tensors carry the same names) that `cubeforge-cli
// trace-diff` prints. The names are those of inference/tensor/trace.h.
//
// A trace file lists its tensors in the order they were recorded: the data
// section holds them one after another (the JSON header sorts names, the data
// offsets keep the order), so "the first tensor over the tolerance" is the
// first in computation order.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "inference/core/result.h"
#include "inference/tensor/safetensors.h"
#include "inference/tensor/trace.h"

namespace cubeforge {

// Keeps a copy of everything recorded, in order.
class TraceRecorder final : public TraceSink {
 public:
  struct Tensor {
    std::string name;
    DType dtype = DType::kF32;
    std::vector<int64_t> shape;
    std::vector<std::byte> data;
  };

  void record(std::string_view name, DType dtype, std::span<const int64_t> shape, const void* data) override;

  const std::vector<Tensor>& tensors() const { return tensors_; }
  const Tensor* find(std::string_view name) const;
  size_t byte_size() const;

  // One safetensors file, in recording order (a name recorded twice is an
  // error naming it).
  Status write(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata = {},
               const WriteOptions& options = {}) const;

 private:
  std::vector<Tensor> tensors_;
};

// The tensors of a file in the order of its data section.
std::vector<const TensorEntry*> entries_in_file_order(const SafetensorsFile& file);

struct TensorComparison {
  std::string name;
  std::vector<int64_t> shape_a, shape_b;
  bool comparable = true;         // same element count (shapes may differ, e.g. [1, T, C] and [T, C])
  double relative_error = 0;      // ‖a − b‖ / ‖b‖ (‖a − b‖ when b is all zeros); NaN when either holds a NaN
  double max_abs_difference = 0;  // max |a − b|
  std::vector<float> first_a, first_b;  // the first few values of each
  bool within_tolerance = true;
};

struct TraceComparison {
  double tolerance = 0;
  std::vector<TensorComparison> tensors;  // the names in both, in A's order
  std::vector<std::string> only_in_a, only_in_b;
  // The first compared tensor over the tolerance, or not comparable.
  std::optional<size_t> first_over_tolerance;
};

// Compares every tensor name `a` and `b` share (float values of any dtype,
// widened to float32). `first_values`: how many values of each to keep.
Result<TraceComparison> compare_traces(const SafetensorsFile& a, const SafetensorsFile& b, double tolerance,
                                       size_t first_values = 4);

}  // namespace cubeforge
