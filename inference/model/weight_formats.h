// The weight formats a model decodes with, and quantised matrices in model
// files.
//
// stored (the default) uses every matrix as the file holds it and stays exact
// against the reference; bf16 rounds F32 decode matrices to bfloat16; q8 and
// q4 quantise every decode matrix (cpu/quantize.h has the formats). The
// conversion happens when a model loads, into memory of its own, or ahead of
// time with `cubeforge-cli quantize`, which writes the same tensors into a
// model folder.
//
// In a file, a quantised matrix NAME is NAME, the codes (I8 [N, K] for Q8;
// U8 [N, K/2] for Q4, packed as cpu/quantize.h says), NAME.scales (F16
// [N, K / group]) and, for Q4, NAME.offsets (F16 [N, K / group]); the group
// is K over the scales' columns. Loading checks every size and dtype, the
// group, and that every scale and offset is finite.
#pragma once

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/result.h"
#include "inference/cpu/ops.h"
#include "inference/model/config.h"
#include "inference/options/engine_options.h"
#include "inference/tensor/safetensors.h"

namespace cubeforge {

// Converts the matrices `names` of `source` to `options.format`, into an
// in-memory file (huge pages) laid out as above. A matrix the format leaves
// as it is (bf16: one that is not F32; q8/q4: one already quantised, or
// whose columns are not a multiple of the group) is not in it. Fails on a
// value that is not finite or too large for an F16 scale, naming the tensor.
Result<SafetensorsFile> convert_matrices(const SafetensorsFile& source, std::span<const std::string> names,
                                         const WeightOptions& options);

// Every tensor of `source`, each matrix that `converted` holds in its
// converted form: what a model folder in that format holds (views into both
// files, for write_safetensors).
std::vector<TensorToWrite> tensors_with_conversions(const SafetensorsFile& source, const SafetensorsFile& converted);

// `expected` with each tensor of `quantizable` that `file` holds quantised
// replaced by that form's tensors (names, shapes and dtypes), so that
// check_tensor_set checks them like any other. Fails when the form is not one
// of the formats (wrong dtype, a group size there is none of).
Result<std::vector<ExpectedTensor>> expected_with_quantized_forms(const SafetensorsFile& file,
                                                                  std::vector<ExpectedTensor> expected,
                                                                  std::span<const std::string> quantizable);

// Whether `file` holds matrix `name` quantised (it has NAME.scales).
bool holds_quantized(const SafetensorsFile& file, const std::string& name);

// Matrix `name` of `file` as a quantised WeightMatrix, zero-copy, after
// checking sizes, dtypes, the group and that scales and offsets are finite.
Result<cpu::WeightMatrix> bind_quantized(const SafetensorsFile& file, const std::string& name);

}  // namespace cubeforge
