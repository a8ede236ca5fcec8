// The trace hook's slow side: formatting names and gathering strided rows,
// reached only when a sink is attached.
#include "inference/tensor/trace.h"

#include <algorithm>
#include <vector>

namespace cubeforge {

std::string TracePrefix::name(std::string_view point) const {
  std::string out;
  auto append = [&out](std::string_view part) {
    if (part.empty()) return;
    if (!out.empty()) out += '.';
    out += part;
  };
  append(block);
  if (layer >= 0) append(std::to_string(layer));
  append(stream);
  append(point);
  return out;
}

namespace detail {

void record_f32(TraceSink& sink, std::string_view name, const float* data, std::initializer_list<int64_t> shape) {
  sink.record(name, DType::kF32, std::span<const int64_t>(shape.begin(), shape.size()), data);
}

void record_f32(TraceSink& sink, const TracePrefix& prefix, std::string_view point, const float* data,
                std::initializer_list<int64_t> shape) {
  record_f32(sink, prefix.name(point), data, shape);
}

void record_f32_rows(TraceSink& sink, const TracePrefix& prefix, std::string_view point, const float* data,
                     int64_t rows, int64_t columns, int64_t stride, std::initializer_list<int64_t> shape) {
  std::vector<float> dense(size_t(rows) * size_t(columns));
  for (int64_t r = 0; r < rows; ++r)
    std::copy_n(data + r * stride, columns, dense.begin() + r * columns);
  record_f32(sink, prefix, point, dense.data(), shape);
}

}  // namespace detail

void ScopedTraceSink::record(std::string_view name, DType dtype, std::span<const int64_t> shape, const void* data) {
  std::string scoped = scope_;
  scoped += '.';
  scoped += name;
  target_.record(scoped, dtype, shape, data);
}

}  // namespace cubeforge
