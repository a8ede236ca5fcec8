// safetensors files: a strictly validated reader, and the one writer.
//
// Model files are untrusted input. The header is read and checked completely
// before any tensor's byte is read: its length against the file, the format's
// limit and the header budget (inference/core/input_budgets.h), the JSON
// (strict: a key given twice is an error), every dtype and shape, that shape x
// dtype equals the byte range, and that the ranges tile the data section as
// the format's reference reader demands: in offset order each begins where
// the one before ends, empty ones included, and the last ends with the file.
// So nothing overlaps, and no byte is read that no tensor indexes. Checking is
// linear in the header's size. Errors name the file and the tensor. The
// parser is a pure function over bytes so it can be fuzzed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/result.h"
#include "inference/tensor/dtype.h"

namespace cubeforge {

// One tensor's entry in a header, with its bytes relative to the data section.
struct TensorEntry {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  uint64_t begin = 0;  // byte offset into the data section
  uint64_t end = 0;

  int64_t element_count() const;
};

struct SafetensorsHeader {
  std::vector<TensorEntry> tensors;  // sorted by name
  std::map<std::string, std::string> metadata;
  uint64_t data_offset = 0;  // where the data section starts in the file
};

// Parses and validates the header of a complete file image. `file_name` only
// appears in error messages.
Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file, std::string_view file_name);

// A view of one tensor inside an open file.
struct TensorView {
  const TensorEntry* entry = nullptr;
  const std::byte* data = nullptr;

  const std::string& name() const { return entry->name; }
  DType dtype() const { return entry->dtype; }
  const std::vector<int64_t>& shape() const { return entry->shape; }
  int64_t element_count() const { return entry->element_count(); }
  size_t byte_size() const { return size_t(entry->end - entry->begin); }
};

std::string shape_to_string(std::span<const int64_t> shape);

// An error naming the file and the tensor when its data does not start on a
// multiple of its element size: the kernels read weights in place through
// typed pointers. Every common writer aligns tensors (this project's too, see
// lay_out_safetensors), so only a damaged or hand-made file fails.
Status check_element_aligned(const TensorView& view, std::string_view file_name);

// An error naming the file, the tensor and the element when a float tensor
// holds NaN or infinity: weights like that produce no shape, and the cause is
// the file, not the seed or the prompt.
Status check_finite(const TensorView& view, std::string_view file_name);

class SafetensorsFile {
 public:
  // Either way the file is read, never mapped (see Storage in the .cpp): a
  // file changed while in use is an error at a read, not a SIGBUS later.
  enum class Residence {
    kOnDemand,  // read each tensor when it is first asked for: untouched
                // tensors cost nothing (CLIP's vision tower)
    kHugePages, // read it all at open into anonymous huge-page memory: decode
                // streams every weight each token, and 4 KiB page walks would
                // cap that stream
  };
  // Opens the file and validates its header.
  static Result<SafetensorsFile> open(const std::filesystem::path& path, Residence residence = Residence::kOnDemand);
  // Takes ownership of an in-memory image (tests, fuzzing).
  static Result<SafetensorsFile> from_bytes(std::vector<std::byte> bytes, std::string name);
  // Builds an image of `size` bytes in fresh anonymous memory (huge pages
  // where the kernel allows): `fill` writes header and data, then the header
  // is validated as for a file. For multi-gigabyte generated models.
  static Result<SafetensorsFile> build_in_memory(size_t size, std::string name,
                                                 const std::function<void(std::span<std::byte>)>& fill);

  SafetensorsFile();  // an empty file with no tensors
  SafetensorsFile(SafetensorsFile&&) noexcept;
  SafetensorsFile& operator=(SafetensorsFile&&) noexcept;
  ~SafetensorsFile();

  const std::string& name() const { return name_; }
  const std::vector<TensorEntry>& entries() const { return header_.tensors; }
  const std::map<std::string, std::string>& metadata() const { return header_.metadata; }

  bool contains(std::string_view tensor) const;
  // The tensor, or a kNotFound error naming the file and tensor (or a kIo
  // error when its bytes cannot be read: the file changed since open).
  Result<TensorView> get(std::string_view tensor) const;
  // The tensor, checked against an expected shape (kCorruptFile on mismatch).
  Result<TensorView> get(std::string_view tensor, std::span<const int64_t> expected_shape) const;
  // Widened copy in float32 (any dtype), optionally shape-checked.
  Result<std::vector<float>> read_f32(std::string_view tensor) const;
  Result<std::vector<float>> read_f32(std::string_view tensor, std::span<const int64_t> expected_shape) const;
  // Integer tensors (token ids) as int64.
  Result<std::vector<int64_t>> read_i64(std::string_view tensor) const;
  // check_finite() over every float tensor, once per file (later calls
  // return the first answer without scanning again).
  Status check_all_finite() const;

 private:
  Result<TensorView> view_of(const TensorEntry& entry) const;

  struct Storage;
  std::unique_ptr<Storage> storage_;
  std::span<const std::byte> bytes_;
  SafetensorsHeader header_;
  std::string name_;
};

// ---- Writing
//
// The format: the JSON header's length in bytes (u64, little-endian), the JSON
// header (for each tensor its dtype, shape and byte range [begin, end) in the
// data section; "__metadata__" a map of strings), then the data section. The
// format asks for a data section that starts 8-byte aligned. Ours starts on a
// multiple of 64 bytes (the JSON padded with spaces), which is 8-aligned too
// and puts every tensor whose predecessors' sizes are multiples of 64 bytes on
// a cache line of its own, where the vector kernels read it fastest. Tensors
// lie one after another, those with the largest elements first (in the order
// given among equals), so every tensor starts on a multiple of its element
// size, as the reference's writer lays them out. Every writer of the project
// goes through lay_out_safetensors.

// A tensor to write: raw little-endian bytes of `dtype` with `shape`.
struct TensorToWrite {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;
  std::span<const std::byte> data;
};

// A file about to be written: its bytes before the data section, and where
// each tensor goes in the data section.
struct SafetensorsLayout {
  std::vector<std::byte> header;     // header length and padded JSON header
  std::vector<TensorEntry> tensors;  // in the order given, with their byte ranges (not in that order)
  uint64_t data_size = 0;

  uint64_t file_size() const { return header.size() + data_size; }
};

// Lays out tensors given by name, dtype and shape (begin and end are assigned).
// Names must be unique. `file_name` only appears in error messages.
Result<SafetensorsLayout> lay_out_safetensors(std::vector<TensorEntry> tensors,
                                              const std::map<std::string, std::string>& metadata,
                                              std::string_view file_name);

// A complete file image in memory (tests, generated files). Names must be
// unique; byte sizes must match shapes.
Result<std::vector<std::byte>> safetensors_image(std::span<const TensorToWrite> tensors,
                                                 const std::map<std::string, std::string>& metadata = {},
                                                 std::string_view file_name = "safetensors image");

// Writes a safetensors file atomically (temporary file + rename in the same
// directory) by the rules of file_io.h, with `options` (a cancel flag, what
// to do with a read-only file). Names must be unique; byte sizes must match shapes.
Status write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata = {}, const WriteOptions& options = {});

}  // namespace cubeforge
