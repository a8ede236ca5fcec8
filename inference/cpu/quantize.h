// Quantised weight matrices: the two formats the matrix-vector kernels read in
// their stored form, their scalar definition, and the conversion into them.
//
// Q8: along each row, blocks of 32 weights share one F16 scale s; a weight is
//   code · s with an 8-bit code in [-127, 127]. s is the block's largest
//   magnitude over 127, rounded up to F16, so no code saturates and every
//   weight is within s/2 of its original.
// Q4: along each row, groups of 32 or 64 weights share an F16 scale s and an
//   F16 offset m; a weight is code · s + m, rounded once to float32, with a
//   4-bit code in [0, 15]. m is the group's minimum rounded down to F16 and s
//   is (max − m)/15 rounded up, so no code saturates and every weight is
//   within s/2 of its original (plus the float32 rounding of the sum).
//   Codes are packed per 32 weights in 16 bytes: byte i holds weight i in its
//   low nibble and weight i + 16 in its high nibble, so 16 bytes widen into
//   two vectors of consecutive weights.
//
// Both products code · s are exact in float32 (at most 7 + 11 significant
// bits), so every kernel sees the same weights as dequantize_rows.
#pragma once

#include <cstdint>

#include "inference/cpu/ops.h"

namespace cubeforge::cpu {

constexpr int64_t kQ8BlockSize = 32;
constexpr int64_t kQ4PackSize = 32;  // weights per 16 bytes of packed codes

// Whether `group` is a group size the format has (Q8: 32; Q4: 32 or 64).
bool valid_quantization_group(Quantization quantization, int64_t group);

// Bytes of codes in one row of `cols` weights.
int64_t quantized_row_bytes(Quantization quantization, int64_t cols);

// Quantises float32 rows [rows, cols] (cols a multiple of the group size).
// codes: [rows, quantized_row_bytes]; scales and offsets: [rows, cols / group].
// False when a value is not finite or a scale does not fit F16.
bool quantize_rows_q8(const float* values, int64_t rows, int64_t cols, int8_t* codes, uint16_t* scales);
bool quantize_rows_q4(const float* values, int64_t rows, int64_t cols, int64_t group, uint8_t* codes,
                      uint16_t* scales, uint16_t* offsets);

// The formats' definition: rows [row_begin, row_end) of a quantised matrix as
// float32, one value at a time.
void dequantize_rows(const WeightMatrix& w, int64_t row_begin, int64_t row_end, float* out);

// The F16 value nearest to x on one side: at least x, or at most x.
uint16_t f16_rounded_up(float x);
uint16_t f16_rounded_down(float x);

}  // namespace cubeforge::cpu
