// safetensors reader (mmap + full header validation) and the one writer.
#include "inference/tensor/safetensors.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>

#include "inference/core/file_io.h"
#include "inference/core/input_budgets.h"
#include "inference/core/thread_pool.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge {

namespace {

constexpr uint64_t kFormatMaxHeaderBytes = 100u << 20;  // the format's own limit

Error corrupt(std::string_view file, const std::string& what) {
  return make_error(ErrorCode::kCorruptFile,
                    single_quoted(file) + " is not a valid safetensors file: " + what + "; re-download or re-export the file");
}

Error corrupt_tensor(std::string_view file, std::string_view tensor, const std::string& what) {
  return corrupt(file, "tensor '" + std::string(tensor) + "': " + what);
}

bool checked_multiply(uint64_t a, uint64_t b, uint64_t* out) {
  if (a != 0 && b > std::numeric_limits<uint64_t>::max() / a) return false;
  *out = a * b;
  return true;
}

}  // namespace

int64_t TensorEntry::element_count() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

std::string shape_to_string(std::span<const int64_t> shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) s += ", ";
    s += std::to_string(shape[i]);
  }
  return s + "]";
}

namespace {

uint64_t little_endian_u64(const std::byte* bytes) {
  uint64_t value = 0;
  for (int i = 7; i >= 0; --i) value = (value << 8) | uint64_t(bytes[i]);
  return value;
}

// The header length's checks, before a byte of the header is read: the
// format's limit, the file's size, and the budget.
Status check_header_length(uint64_t header_length, uint64_t file_size, std::string_view file_name) {
  if (header_length > kFormatMaxHeaderBytes)
    return corrupt(file_name, "header length " + std::to_string(header_length) + " exceeds the format's 100 MiB limit");
  if (header_length > file_size - 8)
    return corrupt(file_name, "header length " + std::to_string(header_length) + " runs past the end of the " +
                                  std::to_string(file_size) + "-byte file (truncated?)");
  return check_input_budget(InputBudget::kSafetensorsHeaderBytes, header_length,
                            single_quoted(file_name) + ": its safetensors header");
}

// The header's JSON read as it streams past (nlohmann's SAX interface), into
// tensor entries, without building a JSON value: linear in the header's
// size, and a few dozen bytes per tensor. Strict: a field given twice, an
// unknown field or a value of the wrong kind is an error where it appears.
class HeaderReader {
 public:
  HeaderReader(SafetensorsHeader& header, uint64_t data_size, std::string_view file_name)
      : header_(header), data_size_(data_size), file_name_(file_name) {}

  bool null() { return scalar(Kind::kOther, 0, nullptr); }
  bool boolean(bool) { return scalar(Kind::kOther, 0, nullptr); }
  bool number_integer(nlohmann::json::number_integer_t value) {
    return value >= 0 ? scalar(Kind::kUnsigned, uint64_t(value), nullptr) : scalar(Kind::kOther, 0, nullptr);
  }
  bool number_unsigned(nlohmann::json::number_unsigned_t value) { return scalar(Kind::kUnsigned, value, nullptr); }
  bool number_float(nlohmann::json::number_float_t, const nlohmann::json::string_t&) {
    return scalar(Kind::kOther, 0, nullptr);
  }
  bool string(nlohmann::json::string_t& value) { return scalar(Kind::kString, 0, &value); }
  bool binary(nlohmann::json::binary_t&) { return scalar(Kind::kOther, 0, nullptr); }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }

  bool key(nlohmann::json::string_t& name) {
    if (at_ == At::kEntry) {
      const Field field = name == "dtype" ? kDtype : name == "shape" ? kShape : name == "data_offsets" ? kOffsets : kUnknown;
      if (field == kUnknown) return fail(tensor_error("entry must have exactly dtype, shape and data_offsets"));
      if (fields_seen_ & field)
        return fail(corrupt(file_name_, "header: key '" + name + "' appears twice in " + entry_.name +
                                            " (a JSON object holds each key once)"));
      fields_seen_ |= field;
      field_ = field;
      return true;
    }
    key_ = std::move(name);
    return true;
  }

  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    return fail(corrupt(file_name_, std::string("header: not valid JSON: ") + error.what()));
  }

  std::optional<Error>& error() { return error_; }

 private:
  enum class Kind { kUnsigned, kString, kOther };
  enum class At { kStart, kTop, kMetadata, kEntry, kShape, kOffsets, kDone };
  enum Field { kUnknown = 0, kDtype = 1, kShape = 2, kOffsets = 4 };

  bool fail(Error error) {
    error_ = std::move(error);
    return false;
  }
  Error tensor_error(const std::string& what) const { return corrupt_tensor(file_name_, entry_.name, what); }
  // The error for a value of the wrong kind where the reader is.
  Error misplaced() const {
    switch (at_) {
      case At::kStart: return corrupt(file_name_, "header JSON is not an object");
      case At::kTop:
        return key_ == "__metadata__" ? corrupt(file_name_, "__metadata__ is not an object")
                                      : corrupt_tensor(file_name_, key_, "entry is not an object");
      case At::kMetadata: return corrupt(file_name_, "__metadata__ value '" + key_ + "' is not a string");
      case At::kEntry:
        return field_ == kDtype   ? tensor_error("dtype is not a string")
               : field_ == kShape ? tensor_error("shape is not an array")
                                  : tensor_error("data_offsets must be two non-negative integers");
      case At::kShape: return tensor_error("shape holds a value that is not a non-negative integer");
      case At::kOffsets: return tensor_error("data_offsets must be two non-negative integers");
      case At::kDone: break;
    }
    return corrupt(file_name_, "header holds something after its object");
  }

  bool open(bool array) {
    if (at_ == At::kStart && !array) {
      at_ = At::kTop;
      return true;
    }
    if (at_ == At::kTop && !array) {
      if (key_ == "__metadata__") {
        if (seen_metadata_)
          return fail(corrupt(file_name_, "header: key '__metadata__' appears twice in the top level (a JSON object "
                                          "holds each key once)"));
        seen_metadata_ = true;
        at_ = At::kMetadata;
        return true;
      }
      if (key_.empty()) return fail(corrupt(file_name_, "a tensor has an empty name"));
      entry_ = TensorEntry{};
      entry_.name = std::move(key_);
      fields_seen_ = 0;
      elements_ = 1;
      offsets_.clear();
      at_ = At::kEntry;
      return true;
    }
    if (at_ == At::kEntry && array && (field_ == kShape || field_ == kOffsets)) {
      at_ = field_ == kShape ? At::kShape : At::kOffsets;
      return true;
    }
    return fail(misplaced());
  }

  bool close() {
    switch (at_) {
      case At::kTop: at_ = At::kDone; return true;
      case At::kMetadata: at_ = At::kTop; return true;
      case At::kShape: at_ = At::kEntry; return true;
      case At::kOffsets:
        if (offsets_.size() != 2) return fail(tensor_error("data_offsets must be two non-negative integers"));
        at_ = At::kEntry;
        return true;
      case At::kEntry: at_ = At::kTop; return finish_entry();
      default: return fail(misplaced());
    }
  }

  bool scalar(Kind kind, uint64_t number, std::string* text) {
    switch (at_) {
      case At::kMetadata:
        if (kind != Kind::kString) return fail(misplaced());
        if (!header_.metadata.emplace(key_, std::move(*text)).second)
          return fail(corrupt(file_name_, "header: key '" + key_ + "' appears twice in __metadata__ (a JSON object "
                                          "holds each key once)"));
        return true;
      case At::kEntry:
        if (field_ != kDtype || kind != Kind::kString) return fail(misplaced());
        if (auto dtype = dtype_from_name(*text)) {
          entry_.dtype = *dtype;
          return true;
        }
        return fail(tensor_error("unsupported dtype '" + *text + "'"));
      case At::kShape:
        if (kind != Kind::kUnsigned) return fail(misplaced());
        if (entry_.shape.size() == 8) return fail(tensor_error("shape has more than 8 dimensions"));
        if (number > uint64_t(std::numeric_limits<int64_t>::max()) || !checked_multiply(elements_, number, &elements_))
          return fail(tensor_error("shape is too large"));
        entry_.shape.push_back(int64_t(number));
        return true;
      case At::kOffsets:
        if (kind != Kind::kUnsigned || offsets_.size() == 2) return fail(misplaced());
        offsets_.push_back(number);
        return true;
      default: return fail(misplaced());
    }
  }

  bool finish_entry() {
    if (fields_seen_ != (kDtype | kShape | kOffsets))
      return fail(tensor_error("entry must have exactly dtype, shape and data_offsets"));
    entry_.begin = offsets_[0];
    entry_.end = offsets_[1];
    if (entry_.end < entry_.begin) return fail(tensor_error("data_offsets end before they begin"));
    if (entry_.end > data_size_)
      return fail(tensor_error("data_offsets [" + std::to_string(entry_.begin) + ", " + std::to_string(entry_.end) +
                               ") run past the " + std::to_string(data_size_) + "-byte data section (truncated?)"));
    uint64_t expected_bytes = 0;
    if (!checked_multiply(elements_, dtype_size(entry_.dtype), &expected_bytes) ||
        expected_bytes != entry_.end - entry_.begin)
      return fail(tensor_error("shape " + shape_to_string(entry_.shape) + " of " +
                               std::string(dtype_name(entry_.dtype)) + " needs " + std::to_string(expected_bytes) +
                               " bytes but data_offsets span " + std::to_string(entry_.end - entry_.begin)));
    header_.tensors.push_back(std::move(entry_));
    return true;
  }

  SafetensorsHeader& header_;
  uint64_t data_size_;
  std::string_view file_name_;
  At at_ = At::kStart;
  std::string key_;  // the top level's or __metadata__'s current key
  Field field_ = kUnknown;
  unsigned fields_seen_ = 0;
  bool seen_metadata_ = false;
  TensorEntry entry_;
  uint64_t elements_ = 1;
  std::vector<uint64_t> offsets_;
  std::optional<Error> error_;
};

// Parses and checks `text`, the JSON header of a file of `file_size` bytes.
Result<SafetensorsHeader> parse_header_text(std::string_view text, uint64_t file_size, std::string_view file_name) {
  SafetensorsHeader header;
  header.data_offset = 8 + text.size();
  const uint64_t data_size = file_size - header.data_offset;
  HeaderReader reader(header, data_size, file_name);
  if (!nlohmann::json::sax_parse(text.begin(), text.end(), &reader, nlohmann::json::input_format_t::json,
                                 /*strict=*/true, /*ignore_comments=*/false))
    return reader.error() ? std::move(*reader.error()) : corrupt(file_name, "header: not valid JSON");

  // A tensor named twice would shadow the other.
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  for (size_t i = 1; i < header.tensors.size(); ++i)
    if (header.tensors[i].name == header.tensors[i - 1].name)
      return corrupt_tensor(file_name, header.tensors[i].name, "appears twice in the header");

  // Tensors tile the data section, as the format's reference reader demands:
  // ordered by offset, each begins where the one before ends, empty ones
  // included, and the last ends where the file does. So an overlap cannot
  // hide behind an empty tensor, and no byte is read that no tensor indexes
  // (a gap, or a tail of gigabytes after a valid file).
  std::vector<const TensorEntry*> by_offset;
  by_offset.reserve(header.tensors.size());
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(), [](const TensorEntry* a, const TensorEntry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t covered = 0;
  const TensorEntry* last = nullptr;  // the tensor that ends at `covered`
  for (const TensorEntry* t : by_offset) {
    if (t->begin < covered)
      return corrupt(file_name, "tensors '" + last->name + "' [" + std::to_string(last->begin) + ", " +
                                    std::to_string(last->end) + ") and '" + t->name + "' [" + std::to_string(t->begin) +
                                    ", " + std::to_string(t->end) + ") overlap in the data section");
    if (t->begin > covered)
      return corrupt(file_name, "bytes [" + std::to_string(covered) + ", " + std::to_string(t->begin) +
                                    ") of the data section, before tensor '" + t->name + "', belong to no tensor");
    covered = t->end;
    last = t;
  }
  if (covered != data_size)
    return corrupt(file_name, "the data section's last " + std::to_string(data_size - covered) + " bytes (from byte " +
                                  std::to_string(covered) + ") belong to no tensor");
  return header;
}

}  // namespace

Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file, std::string_view file_name) {
  if (file.size() < 8) return corrupt(file_name, "file is " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length");
  const uint64_t header_length = little_endian_u64(file.data());
  CUBEFORGE_TRY(check_header_length(header_length, file.size(), file_name));
  return parse_header_text(std::string_view(reinterpret_cast<const char*>(file.data() + 8), size_t(header_length)),
                           file.size(), file_name);
}

Status check_element_aligned(const TensorView& view, std::string_view file_name) {
  const size_t element = dtype_size(view.dtype());
  if (reinterpret_cast<uintptr_t>(view.data) % element == 0) return ok_status();
  return make_error(ErrorCode::kCorruptFile,
                    single_quoted(file_name) + ": tensor '" + view.name() + "' starts at byte " +
                        std::to_string(view.entry->begin) + " of the data section, not on a multiple of its " +
                        std::to_string(element) +
                        "-byte elements; the file is damaged or was written by a tool that does not align tensors "
                        "(re-save it with the safetensors library)");
}

Status check_finite(const TensorView& view, std::string_view file_name) {
  if (!dtype_is_float(view.dtype())) return ok_status();
  const int64_t count = view.element_count();
  const size_t element_bytes = dtype_size(view.dtype());
  // Large tensors are scanned in parallel slices; the first bad element wins.
  constexpr int64_t kSlice = int64_t(1) << 22;
  const int64_t slices = (count + kSlice - 1) / kSlice;
  std::vector<int64_t> first_bad(size_t(std::max<int64_t>(slices, 1)), -1);
  parallel_for(slices, 1, [&](int64_t s0, int64_t s1) {
    for (int64_t s = s0; s < s1; ++s) {
      const int64_t begin = s * kSlice, n = std::min(kSlice, count - begin);
      const int64_t at = find_non_finite(view.dtype(), view.data + size_t(begin) * element_bytes, n);
      if (at >= 0) first_bad[size_t(s)] = begin + at;
    }
  });
  for (int64_t at : first_bad) {
    if (at < 0) continue;
    float value = 0.f;
    convert_to_f32(view.dtype(), view.data + size_t(at) * element_bytes, &value, 1);
    return make_error(ErrorCode::kCorruptFile,
                      single_quoted(file_name) + ": tensor '" + view.name() + "' holds " +
                          (std::isnan(value) ? "NaN" : "an infinity") + " at element " + std::to_string(at) + " of " +
                          std::to_string(count) +
                          "; weights must be finite numbers: the file is damaged or the model diverged in "
                          "training. Re-download or re-export it");
  }
  return ok_status();
}

// Where a file's bytes live. Nothing maps the file itself: a mapping turns a
// file cut short while the model runs (weights are used in place for the
// life of the model) into SIGBUS at whatever instruction next touches the
// lost page, far from any border where an error could be returned. Bytes are
// copied with pread instead, into anonymous memory laid out as the file is
// (so alignment is the file's): all of them at open (kHugePages), or each
// tensor's when it is first asked for (kOnDemand), so that tensors never
// used cost neither reading nor memory. A file that shrinks while it is read
// gives a short read, and an error naming it.
struct SafetensorsFile::Storage {
  bool checked_finite = false;
  void* mapping = nullptr;  // anonymous, the file's size
  size_t mapping_size = 0;
  std::vector<std::byte> owned;
  int fd = -1;                   // kOnDemand: the open file the tensors come from
  std::vector<uint8_t> loaded;   // kOnDemand: per entry (by name order), its bytes are in place
  std::mutex loading;
  ~Storage() {
    if (mapping) ::munmap(mapping, mapping_size);
    if (fd >= 0) ::close(fd);
  }
};

namespace {

// Reads `size` bytes at `offset` of `fd` into `out`; an error when the file
// ends first (it was cut short after it was measured) or the read fails.
Status read_exactly(int fd, std::byte* out, uint64_t size, uint64_t offset, const std::string& file_name,
                    const std::string& what) {
  uint64_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, out + done, size_t(std::min<uint64_t>(size - done, uint64_t(1) << 26)),
                              off_t(offset + done));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return make_error(ErrorCode::kIo, "cannot read " + what + " of " + single_quoted(file_name) + ": " +
                                                     std::strerror(errno));
    if (n == 0)
      return make_error(ErrorCode::kIo, single_quoted(file_name) + " ended at byte " + std::to_string(offset + done) +
                                            " while " + what + " (to byte " + std::to_string(offset + size) +
                                            ") was read: the file changed while cubeforge read it. Leave model "
                                            "files alone while they are in use, then try again");
    done += uint64_t(n);
  }
  return ok_status();
}

}  // namespace

SafetensorsFile::SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path, Residence residence) {
  uint64_t file_size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &file_size));
  SafetensorsFile file;
  file.storage_ = std::make_unique<Storage>();
  file.storage_->fd = fd;  // closed with the storage
  file.name_ = path.string();
  const std::string& name = file.name_;
  // The header first, checked before any tensor's byte is read: a broken
  // header or an unindexed tail costs nothing however large the file is.
  if (file_size < 8) return corrupt(name, "file is " + std::to_string(file_size) + " bytes, shorter than the 8-byte header length");
  std::byte length_bytes[8];
  CUBEFORGE_TRY(read_exactly(fd, length_bytes, 8, 0, name, "the header length"));
  const uint64_t header_length = little_endian_u64(length_bytes);
  CUBEFORGE_TRY(check_header_length(header_length, file_size, name));
  std::string header_text(size_t(header_length), '\0');
  CUBEFORGE_TRY(read_exactly(fd, reinterpret_cast<std::byte*>(header_text.data()), header_length, 8, name, "the header"));
  CUBEFORGE_ASSIGN_OR_RETURN(file.header_, parse_header_text(header_text, file_size, name));

  const size_t size = size_t(file_size);
  void* mapping = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (mapping == MAP_FAILED) {
    const int err = errno;
    return make_error(err == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kIo,
                      "cannot reserve memory for " + single_quoted(name) + " (" + std::to_string(file_size >> 20) +
                          " MiB): " + std::strerror(err));
  }
  file.storage_->mapping = mapping;
  file.storage_->mapping_size = size;
  auto* bytes = static_cast<std::byte*>(mapping);
  std::memcpy(bytes, length_bytes, 8);
  std::memcpy(bytes + 8, header_text.data(), header_text.size());
  file.bytes_ = std::span<const std::byte>(bytes, size);
  if (residence == Residence::kHugePages) {
    // Every tensor is used (the header tiles the data section with them), each token.
    ::madvise(mapping, size, MADV_HUGEPAGE);
    const uint64_t offset = file.header_.data_offset;
    CUBEFORGE_TRY(read_exactly(fd, bytes + offset, file_size - offset, offset, name, "the tensors"));
    ::close(fd);
    file.storage_->fd = -1;
  } else {
    file.storage_->loaded.assign(file.header_.tensors.size(), 0);
  }
  return file;
}

Result<SafetensorsFile> SafetensorsFile::from_bytes(std::vector<std::byte> bytes, std::string name) {
  SafetensorsFile file;
  file.storage_ = std::make_unique<Storage>();
  file.storage_->owned = std::move(bytes);
  file.bytes_ = file.storage_->owned;
  file.name_ = std::move(name);
  CUBEFORGE_ASSIGN_OR_RETURN(file.header_, parse_safetensors_header(file.bytes_, file.name_));
  return file;
}

Result<SafetensorsFile> SafetensorsFile::build_in_memory(size_t size, std::string name,
                                                        const std::function<void(std::span<std::byte>)>& fill) {
  SafetensorsFile file;
  file.storage_ = std::make_unique<Storage>();
  file.name_ = std::move(name);
  void* mapping = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED)
    return make_error(ErrorCode::kOutOfMemory, "cannot allocate " + std::to_string(size >> 20) + " MiB for '" +
                                                   file.name_ + "'; free memory or choose a smaller model");
  ::madvise(mapping, size, MADV_HUGEPAGE);  // fewer page faults and TLB misses; advisory only
  file.storage_->mapping = mapping;
  file.storage_->mapping_size = size;
  fill(std::span<std::byte>(static_cast<std::byte*>(mapping), size));
  file.bytes_ = std::span<const std::byte>(static_cast<const std::byte*>(mapping), size);
  CUBEFORGE_ASSIGN_OR_RETURN(file.header_, parse_safetensors_header(file.bytes_, file.name_));
  return file;
}

Result<TensorView> SafetensorsFile::view_of(const TensorEntry& entry) const {
  std::byte* data = const_cast<std::byte*>(bytes_.data()) + header_.data_offset + entry.begin;
  if (storage_ && storage_->fd >= 0) {
    const size_t index = size_t(&entry - header_.tensors.data());
    std::lock_guard<std::mutex> lock(storage_->loading);
    if (!storage_->loaded[index]) {
      CUBEFORGE_TRY(read_exactly(storage_->fd, data, entry.end - entry.begin, header_.data_offset + entry.begin, name_,
                                 "tensor '" + entry.name + "'"));
      storage_->loaded[index] = 1;
    }
  }
  return TensorView{&entry, data};
}

bool SafetensorsFile::contains(std::string_view tensor) const {
  auto it = std::lower_bound(header_.tensors.begin(), header_.tensors.end(), tensor,
                             [](const TensorEntry& e, std::string_view n) { return e.name < n; });
  return it != header_.tensors.end() && it->name == tensor;
}

Result<TensorView> SafetensorsFile::get(std::string_view tensor) const {
  auto it = std::lower_bound(header_.tensors.begin(), header_.tensors.end(), tensor,
                             [](const TensorEntry& e, std::string_view n) { return e.name < n; });
  if (it == header_.tensors.end() || it->name != tensor)
    return make_error(ErrorCode::kNotFound, "'" + name_ + "' has no tensor '" + std::string(tensor) + "'");
  return view_of(*it);
}

Result<TensorView> SafetensorsFile::get(std::string_view tensor, std::span<const int64_t> expected_shape) const {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, get(tensor));
  if (!std::equal(view.shape().begin(), view.shape().end(), expected_shape.begin(), expected_shape.end()))
    return make_error(ErrorCode::kCorruptFile, "'" + name_ + "': tensor '" + std::string(tensor) + "' has shape " +
                                                   shape_to_string(view.shape()) + ", expected " +
                                                   shape_to_string(expected_shape));
  return view;
}

Result<std::vector<float>> SafetensorsFile::read_f32(std::string_view tensor) const {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, get(tensor));
  std::vector<float> out(size_t(view.element_count()));
  convert_to_f32(view.dtype(), view.data, out.data(), out.size());
  return out;
}

Result<std::vector<float>> SafetensorsFile::read_f32(std::string_view tensor,
                                                     std::span<const int64_t> expected_shape) const {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, get(tensor, expected_shape));
  std::vector<float> out(size_t(view.element_count()));
  convert_to_f32(view.dtype(), view.data, out.data(), out.size());
  return out;
}

Result<std::vector<int64_t>> SafetensorsFile::read_i64(std::string_view tensor) const {
  CUBEFORGE_ASSIGN_OR_RETURN(TensorView view, get(tensor));
  std::vector<int64_t> out(size_t(view.element_count()));
  switch (view.dtype()) {
    case DType::kI64: std::memcpy(out.data(), view.data, out.size() * 8); break;
    case DType::kI32:
      for (size_t i = 0; i < out.size(); ++i) {
        int32_t v;
        std::memcpy(&v, view.data + 4 * i, 4);
        out[i] = v;
      }
      break;
    default:
      return make_error(ErrorCode::kCorruptFile, "'" + name_ + "': tensor '" + std::string(tensor) +
                                                     "' holds " + std::string(dtype_name(view.dtype())) +
                                                     ", expected integer ids (I64 or I32)");
  }
  return out;
}

Status SafetensorsFile::check_all_finite() const {
  if (storage_ && storage_->checked_finite) return ok_status();
  for (const TensorEntry& entry : header_.tensors) {
    CUBEFORGE_ASSIGN_OR_RETURN(const TensorView view, view_of(entry));
    CUBEFORGE_TRY(check_finite(view, name_));
  }
  if (storage_) storage_->checked_finite = true;
  return ok_status();
}

namespace {

// Data sections start on a multiple of this many bytes (see safetensors.h).
constexpr size_t kDataAlignment = 64;

// The entries of tensors to write, checked: byte sizes must match shapes.
Result<std::vector<TensorEntry>> entries_to_write(std::span<const TensorToWrite> tensors, std::string_view file_name) {
  std::vector<TensorEntry> entries;
  entries.reserve(tensors.size());
  for (const auto& t : tensors) {
    uint64_t elements = 1;
    for (int64_t d : t.shape) elements *= uint64_t(d);
    if (elements * dtype_size(t.dtype) != t.data.size())
      return make_error(ErrorCode::kInvalidArgument, "tensor '" + t.name + "' for '" + std::string(file_name) +
                                                         "' has shape " + shape_to_string(t.shape) + " but " +
                                                         std::to_string(t.data.size()) + " bytes");
    entries.push_back(TensorEntry{t.name, t.dtype, t.shape});
  }
  return entries;
}

}  // namespace

Result<SafetensorsLayout> lay_out_safetensors(std::vector<TensorEntry> tensors,
                                              const std::map<std::string, std::string>& metadata,
                                              std::string_view file_name) {
  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  std::set<std::string> names;
  std::vector<size_t> order(tensors.size());
  std::iota(order.begin(), order.end(), size_t(0));
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return dtype_size(tensors[a].dtype) > dtype_size(tensors[b].dtype); });
  for (size_t index : order) {
    TensorEntry& t = tensors[index];
    if (!names.insert(t.name).second)
      return make_error(ErrorCode::kInvalidArgument,
                        "tensor '" + t.name + "' is written twice to '" + std::string(file_name) + "'");
    uint64_t bytes = dtype_size(t.dtype);
    for (int64_t d : t.shape) bytes *= uint64_t(d);
    t.begin = offset;
    t.end = offset + bytes;
    header[t.name] = {
        {"dtype", std::string(dtype_name(t.dtype))}, {"shape", t.shape}, {"data_offsets", {t.begin, t.end}}};
    offset = t.end;
  }
  // Metadata may carry user text that is not UTF-8 (a prompt): replaced, never thrown on.
  std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  while ((8 + text.size()) % kDataAlignment != 0) text.push_back(' ');
  SafetensorsLayout layout;
  layout.header.resize(8 + text.size());
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) layout.header[size_t(i)] = std::byte((length >> (8 * i)) & 0xff);
  std::memcpy(layout.header.data() + 8, text.data(), text.size());
  layout.tensors = std::move(tensors);
  layout.data_size = offset;
  return layout;
}

Result<std::vector<std::byte>> safetensors_image(std::span<const TensorToWrite> tensors,
                                                 const std::map<std::string, std::string>& metadata,
                                                 std::string_view file_name) {
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<TensorEntry> entries, entries_to_write(tensors, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsLayout layout, lay_out_safetensors(std::move(entries), metadata, file_name));
  std::vector<std::byte> image(layout.file_size());
  std::memcpy(image.data(), layout.header.data(), layout.header.size());
  for (size_t t = 0; t < tensors.size(); ++t)
    if (!tensors[t].data.empty())
      std::memcpy(image.data() + layout.header.size() + layout.tensors[t].begin, tensors[t].data.data(),
                  tensors[t].data.size());
  return image;
}

Status write_safetensors(const std::filesystem::path& path, std::span<const TensorToWrite> tensors,
                         const std::map<std::string, std::string>& metadata, const WriteOptions& options) {
  const std::string file_name = path.string();
  CUBEFORGE_ASSIGN_OR_RETURN(std::vector<TensorEntry> entries, entries_to_write(tensors, file_name));
  CUBEFORGE_ASSIGN_OR_RETURN(SafetensorsLayout layout, lay_out_safetensors(std::move(entries), metadata, file_name));
  return write_file_atomically(path, [&](const ByteSink& sink) -> Status {
    CUBEFORGE_TRY(sink(layout.header));
    std::vector<size_t> order(tensors.size());
    std::iota(order.begin(), order.end(), size_t(0));
    std::sort(order.begin(), order.end(),
              [&](size_t a, size_t b) { return layout.tensors[a].begin < layout.tensors[b].begin; });
    for (size_t t : order) CUBEFORGE_TRY(sink(tensors[t].data));
    return ok_status();
  }, options);
}

}  // namespace cubeforge
