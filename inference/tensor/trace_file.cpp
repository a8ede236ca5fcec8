// Trace files: recording into memory, writing through the one safetensors
// writer, and comparing two files tensor by tensor.
#include "inference/tensor/trace_file.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

namespace cubeforge {

void TraceRecorder::record(std::string_view name, DType dtype, std::span<const int64_t> shape, const void* data) {
  Tensor& t = tensors_.emplace_back();
  t.name = std::string(name);
  t.dtype = dtype;
  t.shape.assign(shape.begin(), shape.end());
  size_t bytes = dtype_size(dtype);
  for (int64_t extent : shape) bytes *= size_t(extent);
  t.data.resize(bytes);
  if (bytes) std::memcpy(t.data.data(), data, bytes);
}

const TraceRecorder::Tensor* TraceRecorder::find(std::string_view name) const {
  for (const Tensor& t : tensors_)
    if (t.name == name) return &t;
  return nullptr;
}

size_t TraceRecorder::byte_size() const {
  size_t bytes = 0;
  for (const Tensor& t : tensors_) bytes += t.data.size();
  return bytes;
}

Status TraceRecorder::write(const std::filesystem::path& path, const std::map<std::string, std::string>& metadata,
                            const WriteOptions& options) const {
  std::vector<TensorToWrite> tensors;
  tensors.reserve(tensors_.size());
  for (const Tensor& t : tensors_) tensors.push_back({t.name, t.dtype, t.shape, t.data});
  return write_safetensors(path, tensors, metadata, options);
}

std::vector<const TensorEntry*> entries_in_file_order(const SafetensorsFile& file) {
  std::vector<const TensorEntry*> entries;
  for (const TensorEntry& e : file.entries()) entries.push_back(&e);
  // Empty tensors share their offset with the next one: ties keep name order.
  std::stable_sort(entries.begin(), entries.end(),
                   [](const TensorEntry* x, const TensorEntry* y) { return x->begin < y->begin; });
  return entries;
}

namespace {

TensorComparison compare(const TensorEntry& entry_a, const std::vector<float>& a, const TensorEntry& entry_b,
                         const std::vector<float>& b, double tolerance, size_t first_values) {
  TensorComparison c;
  c.name = entry_a.name;
  c.shape_a = entry_a.shape;
  c.shape_b = entry_b.shape;
  c.first_a.assign(a.begin(), a.begin() + ptrdiff_t(std::min(first_values, a.size())));
  c.first_b.assign(b.begin(), b.begin() + ptrdiff_t(std::min(first_values, b.size())));
  c.comparable = a.size() == b.size();
  if (!c.comparable) {
    c.relative_error = INFINITY;
    c.max_abs_difference = INFINITY;
    c.within_tolerance = false;
    return c;
  }
  double difference = 0, norm = 0, largest = 0;
  bool has_nan = false;
  for (size_t i = 0; i < a.size(); ++i) {
    const double d = double(a[i]) - double(b[i]);
    difference += d * d;
    norm += double(b[i]) * double(b[i]);
    if (std::isnan(d)) has_nan = true;
    else largest = std::max(largest, std::fabs(d));
  }
  c.relative_error = norm > 0 ? std::sqrt(difference / norm) : std::sqrt(difference);
  c.max_abs_difference = has_nan ? NAN : largest;
  c.within_tolerance = c.relative_error <= tolerance;  // false for NaN
  return c;
}

}  // namespace

Result<TraceComparison> compare_traces(const SafetensorsFile& a, const SafetensorsFile& b, double tolerance,
                                       size_t first_values) {
  TraceComparison result;
  result.tolerance = tolerance;
  std::unordered_set<std::string_view> names_in_a;
  for (const TensorEntry* entry_a : entries_in_file_order(a)) {
    names_in_a.insert(entry_a->name);
    if (!b.contains(entry_a->name)) {
      result.only_in_a.push_back(entry_a->name);
      continue;
    }
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view_b, b.get(entry_a->name));
    CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> values_a, a.read_f32(entry_a->name));
    CUBEFORGE_ASSIGN_OR_RETURN(std::vector<float> values_b, b.read_f32(entry_a->name));
    result.tensors.push_back(compare(*entry_a, values_a, *view_b.entry, values_b, tolerance, first_values));
    if (!result.tensors.back().within_tolerance && !result.first_over_tolerance)
      result.first_over_tolerance = result.tensors.size() - 1;
  }
  for (const TensorEntry* entry_b : entries_in_file_order(b))
    if (!names_in_a.contains(entry_b->name)) result.only_in_b.push_back(entry_b->name);
  return result;
}

}  // namespace cubeforge
