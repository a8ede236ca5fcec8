// Converting decode matrices to bf16, Q8 or Q4, and reading quantised
// matrices from files (see weight_formats.h).
#include "inference/model/weight_formats.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <mutex>
#include <set>

#include "inference/core/thread_pool.h"
#include "inference/cpu/quantize.h"

namespace cubeforge {

namespace {

std::string scales_name(const std::string& name) { return name + ".scales"; }
std::string offsets_name(const std::string& name) { return name + ".offsets"; }

cpu::Quantization quantization_of(WeightFormat format) {
  return format == WeightFormat::kQ8 ? cpu::Quantization::kQ8 : cpu::Quantization::kQ4;
}

// One matrix to convert: where it comes from and the tensors it becomes.
struct Conversion {
  TensorView source;
  std::vector<TensorEntry> outputs;  // codes (or bf16 values), scales, offsets
};

}  // namespace

Result<SafetensorsFile> convert_matrices(const SafetensorsFile& source, std::span<const std::string> names,
                                         const WeightOptions& options) {
  if (options.format == WeightFormat::kStored) return SafetensorsFile();
  const bool quantize = options.format == WeightFormat::kQ8 || options.format == WeightFormat::kQ4;
  const cpu::Quantization quantization = quantization_of(options.format);
  const int64_t group = options.format == WeightFormat::kQ8 ? cpu::kQ8BlockSize : options.q4_group;
  if (quantize && !cpu::valid_quantization_group(quantization, group))
    return make_error(ErrorCode::kInvalidArgument,
                      "a Q4 group has 32 or 64 weights, not " + std::to_string(group));
  std::vector<Conversion> conversions;
  std::vector<TensorEntry> entries;
  for (const std::string& name : names) {
    if (holds_quantized(source, name)) continue;
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, source.get(name));
    if (view.shape().size() != 2 || !dtype_is_float(view.dtype()) || view.dtype() == DType::kF64) continue;
    const int64_t rows = view.shape()[0], cols = view.shape()[1];
    Conversion c{view, {}};
    if (!quantize) {
      if (view.dtype() != DType::kF32) continue;
      c.outputs.push_back({name, DType::kBF16, {rows, cols}});
    } else {
      if (cols % group != 0) continue;
      const bool q4 = quantization == cpu::Quantization::kQ4;
      c.outputs.push_back({name, q4 ? DType::kU8 : DType::kI8, {rows, cpu::quantized_row_bytes(quantization, cols)}});
      c.outputs.push_back({scales_name(name), DType::kF16, {rows, cols / group}});
      if (q4) c.outputs.push_back({offsets_name(name), DType::kF16, {rows, cols / group}});
    }
    entries.insert(entries.end(), c.outputs.begin(), c.outputs.end());
    conversions.push_back(std::move(c));
  }
  const std::string file_name = source.name() + " (" + std::string(weight_format_name(options.format)) + ")";
  const std::map<std::string, std::string> metadata = {{"cubeforge.weights", std::string(weight_format_name(options.format))}};
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsLayout layout, lay_out_safetensors(std::move(entries), metadata, file_name));
  std::mutex failure_mutex;
  std::string failed;  // the first tensor that could not be converted
  auto file = SafetensorsFile::build_in_memory(layout.file_size(), file_name, [&](std::span<std::byte> image) {
    std::memcpy(image.data(), layout.header.data(), layout.header.size());
    std::byte* data = image.data() + layout.header.size();
    size_t entry = 0;
    for (const Conversion& c : conversions) {
      const int64_t rows = c.source.shape()[0], cols = c.source.shape()[1];
      const size_t element = dtype_size(c.source.dtype());
      std::byte* outputs[3] = {};
      for (size_t o = 0; o < c.outputs.size(); ++o) outputs[o] = data + layout.tensors[entry + o].begin;
      entry += c.outputs.size();
      // Rows in chunks of about 64 K values, each chunk widened to float32 first.
      const int64_t chunk_rows = std::max<int64_t>(1, 65536 / cols);
      parallel_for((rows + chunk_rows - 1) / chunk_rows, 1, [&](int64_t c0, int64_t c1) {
        std::vector<float> values(size_t(chunk_rows * cols));
        for (int64_t chunk = c0; chunk < c1; ++chunk) {
          const int64_t r0 = chunk * chunk_rows, n = std::min(chunk_rows, rows - r0);
          convert_to_f32(c.source.dtype(), c.source.data + size_t(r0 * cols) * element, values.data(), size_t(n * cols));
          bool ok = true;
          if (!quantize) {
            auto* out = reinterpret_cast<uint16_t*>(outputs[0]) + r0 * cols;
            for (int64_t i = 0; i < n * cols; ++i) out[i] = f32_to_bf16(values[size_t(i)]);
          } else if (quantization == cpu::Quantization::kQ8) {
            ok = cpu::quantize_rows_q8(values.data(), n, cols, reinterpret_cast<int8_t*>(outputs[0]) + r0 * cols,
                                       reinterpret_cast<uint16_t*>(outputs[1]) + r0 * (cols / group));
          } else {
            ok = cpu::quantize_rows_q4(values.data(), n, cols, group,
                                       reinterpret_cast<uint8_t*>(outputs[0]) + r0 * (cols / 2),
                                       reinterpret_cast<uint16_t*>(outputs[1]) + r0 * (cols / group),
                                       reinterpret_cast<uint16_t*>(outputs[2]) + r0 * (cols / group));
          }
          if (!ok) {
            std::lock_guard lock(failure_mutex);
            if (failed.empty()) failed = c.source.name();
          }
        }
      });
    }
  });
  if (!file.ok()) return file.error();
  if (!failed.empty())
    return make_error(ErrorCode::kCorruptFile, "'" + source.name() + "': tensor '" + failed +
                                                   "' has a value that is not finite or too large to quantise to " +
                                                   std::string(weight_format_name(options.format)));
  return std::move(*file);
}

std::vector<TensorToWrite> tensors_with_conversions(const SafetensorsFile& source, const SafetensorsFile& converted) {
  std::vector<TensorToWrite> tensors;
  auto add = [&](const SafetensorsFile& file, const TensorEntry& e) {
    const std::byte* data = file.get(e.name)->data;
    tensors.push_back({e.name, e.dtype, e.shape, std::span<const std::byte>(data, size_t(e.end - e.begin))});
  };
  for (const TensorEntry& e : source.entries())
    if (!converted.contains(e.name)) add(source, e);
  for (const TensorEntry& e : converted.entries()) add(converted, e);
  return tensors;
}

bool holds_quantized(const SafetensorsFile& file, const std::string& name) {
  return file.contains(scales_name(name));
}

namespace {

// The quantisation and group a file's tensors imply for matrix `name` of
// `rows` x `cols` weights, or an error naming what is wrong.
Result<std::pair<cpu::Quantization, int64_t>> quantized_form(const SafetensorsFile& file, const std::string& name,
                                                             int64_t cols) {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView codes, file.get(name));
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView scales, file.get(scales_name(name)));
  const std::string where = "'" + file.name() + "': quantised matrix '" + name + "'";
  cpu::Quantization q;
  if (codes.dtype() == DType::kI8)
    q = cpu::Quantization::kQ8;
  else if (codes.dtype() == DType::kU8)
    q = cpu::Quantization::kQ4;
  else
    return make_error(ErrorCode::kCorruptFile, where + " has codes of dtype " + std::string(dtype_name(codes.dtype())) +
                                                   "; Q8 codes are I8 and Q4 codes U8");
  if (scales.shape().size() != 2 || scales.shape()[1] <= 0 || cols % scales.shape()[1] != 0)
    return make_error(ErrorCode::kCorruptFile, where + " has scales of shape " + shape_to_string(scales.shape()) +
                                                   ", which do not divide its " + std::to_string(cols) + " columns");
  const int64_t group = cols / scales.shape()[1];
  if (!cpu::valid_quantization_group(q, group))
    return make_error(ErrorCode::kCorruptFile, where + " has groups of " + std::to_string(group) +
                                                   " weights; Q8 has 32, Q4 32 or 64");
  return std::pair{q, group};
}

}  // namespace

Result<std::vector<ExpectedTensor>> expected_with_quantized_forms(const SafetensorsFile& file,
                                                                  std::vector<ExpectedTensor> expected,
                                                                  std::span<const std::string> quantizable) {
  const std::set<std::string> names(quantizable.begin(), quantizable.end());
  std::vector<ExpectedTensor> out;
  for (ExpectedTensor& e : expected) {
    if (!names.count(e.name) || !holds_quantized(file, e.name) || e.shape.size() != 2) {
      out.push_back(std::move(e));
      continue;
    }
    const int64_t rows = e.shape[0], cols = e.shape[1];
    CUBEFORGE_ASSIGN_OR_RETURN(auto form, quantized_form(file, e.name, cols));
    const auto [q, group] = form;
    const bool q4 = q == cpu::Quantization::kQ4;
    out.push_back({e.name, {rows, cpu::quantized_row_bytes(q, cols)}, q4 ? DType::kU8 : DType::kI8});
    out.push_back({scales_name(e.name), {rows, cols / group}, DType::kF16});
    if (q4) out.push_back({offsets_name(e.name), {rows, cols / group}, DType::kF16});
  }
  return out;
}

Result<cpu::WeightMatrix> bind_quantized(const SafetensorsFile& file, const std::string& name) {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView codes, file.get(name));
  const std::string where = "'" + file.name() + "': quantised matrix '" + name + "'";
  if (codes.shape().size() != 2)
    return make_error(ErrorCode::kCorruptFile, where + " is not a matrix: " + shape_to_string(codes.shape()));
  const int64_t rows = codes.shape()[0];
  const int64_t cols = codes.dtype() == DType::kU8 ? 2 * codes.shape()[1] : codes.shape()[1];
  CUBEFORGE_ASSIGN_OR_RETURN(auto form, quantized_form(file, name, cols));
  const auto [q, group] = form;
  const std::vector<int64_t> scale_shape = {rows, cols / group};
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView scales, file.get(scales_name(name), scale_shape));
  if (scales.dtype() != DType::kF16)
    return make_error(ErrorCode::kCorruptFile, where + " has scales of dtype " + std::string(dtype_name(scales.dtype())) + ", not F16");
  cpu::WeightMatrix w{codes.dtype(), codes.data, rows, cols, q, group,
                      reinterpret_cast<const uint16_t*>(scales.data), nullptr};
  std::vector<TensorView> checked = {scales};
  if (q == cpu::Quantization::kQ4) {
    CUBEFORGE_ASSIGN_OR_RETURN(TensorView offsets, file.get(offsets_name(name), scale_shape));
    if (offsets.dtype() != DType::kF16)
      return make_error(ErrorCode::kCorruptFile, where + " has offsets of dtype " + std::string(dtype_name(offsets.dtype())) + ", not F16");
    w.offsets = reinterpret_cast<const uint16_t*>(offsets.data);
    checked.push_back(offsets);
  }
  for (const TensorView& v : checked) {
    CUBEFORGE_TRY(check_element_aligned(v, file.name()));
    if (const int64_t i = find_non_finite(DType::kF16, v.data, v.element_count()); i >= 0)
      return make_error(ErrorCode::kCorruptFile, "'" + file.name() + "': tensor '" + v.name() +
                                                     "' has a value that is not finite at index " + std::to_string(i));
  }
  return w;
}

}  // namespace cubeforge
