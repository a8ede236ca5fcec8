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
#include <numeric>
#include <set>

#include "inference/core/file_io.h"
#include "inference/core/thread_pool.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge {

namespace {

constexpr uint64_t kMaxHeaderBytes = 100u << 20;  // the format's own limit
constexpr int kMaxJsonDepth = 4;                   // {"name": {"shape": [..]}} is depth 3

Error corrupt(std::string_view file, const std::string& what) {
  return make_error(ErrorCode::kCorruptFile,
                    single_quoted(file) + " is not a valid safetensors file: " + what + "; re-download or re-export the file");
}

Error corrupt_tensor(std::string_view file, std::string_view tensor, const std::string& what) {
  return corrupt(file, "tensor '" + std::string(tensor) + "': " + what);
}

// Rejects pathological nesting before the JSON parser sees it.
bool nesting_within(std::string_view json, int max_depth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < json.size(); ++i) {
    char c = json[i];
    if (in_string) {
      if (c == '\\') ++i;
      else if (c == '"') in_string = false;
      continue;
    }
    if (c == '"') in_string = true;
    else if (c == '{' || c == '[') {
      if (++depth > max_depth) return false;
    } else if (c == '}' || c == ']') {
      --depth;
    }
  }
  return true;
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

Result<SafetensorsHeader> parse_safetensors_header(std::span<const std::byte> file, std::string_view file_name) {
  if (file.size() < 8) return corrupt(file_name, "file is " + std::to_string(file.size()) + " bytes, shorter than the 8-byte header length");
  uint64_t header_length = 0;
  for (int i = 7; i >= 0; --i) header_length = (header_length << 8) | uint64_t(file[size_t(i)]);
  if (header_length > kMaxHeaderBytes)
    return corrupt(file_name, "header length " + std::to_string(header_length) + " exceeds the 100 MiB limit");
  if (header_length > file.size() - 8)
    return corrupt(file_name, "header length " + std::to_string(header_length) + " runs past the end of the " +
                                  std::to_string(file.size()) + "-byte file (truncated?)");
  std::string_view text(reinterpret_cast<const char*>(file.data() + 8), size_t(header_length));
  if (!nesting_within(text, kMaxJsonDepth)) return corrupt(file_name, "header JSON is nested too deeply");

  // Duplicate tensor names would silently shadow each other in a JSON object.
  std::set<std::string> top_level_keys;
  bool duplicate = false;
  std::string duplicate_name;
  nlohmann::json::parser_callback_t on_event = [&](int depth, nlohmann::json::parse_event_t event,
                                                    nlohmann::json& parsed) {
    if (event == nlohmann::json::parse_event_t::key && depth == 1) {
      std::string key = parsed.get<std::string>();
      if (!top_level_keys.insert(key).second) {
        duplicate = true;
        duplicate_name = key;
      }
    }
    return true;
  };
  nlohmann::json root = nlohmann::json::parse(text, on_event, /*allow_exceptions=*/false);
  if (root.is_discarded()) return corrupt(file_name, "header is not valid JSON");
  if (duplicate) return corrupt_tensor(file_name, duplicate_name, "appears twice in the header");
  if (!root.is_object()) return corrupt(file_name, "header JSON is not an object");

  SafetensorsHeader header;
  header.data_offset = 8 + header_length;
  const uint64_t data_size = file.size() - header.data_offset;

  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const nlohmann::json& value = it.value();
    if (name == "__metadata__") {
      if (!value.is_object()) return corrupt(file_name, "__metadata__ is not an object");
      for (auto m = value.begin(); m != value.end(); ++m) {
        if (!m.value().is_string()) return corrupt(file_name, "__metadata__ value '" + m.key() + "' is not a string");
        header.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (name.empty()) return corrupt(file_name, "a tensor has an empty name");
    if (!value.is_object()) return corrupt_tensor(file_name, name, "entry is not an object");
    if (value.size() != 3 || !value.contains("dtype") || !value.contains("shape") || !value.contains("data_offsets"))
      return corrupt_tensor(file_name, name, "entry must have exactly dtype, shape and data_offsets");

    TensorEntry entry;
    entry.name = name;
    const auto& dtype = value["dtype"];
    if (!dtype.is_string()) return corrupt_tensor(file_name, name, "dtype is not a string");
    auto parsed_dtype = dtype_from_name(dtype.get<std::string>());
    if (!parsed_dtype)
      return corrupt_tensor(file_name, name, "unsupported dtype '" + dtype.get<std::string>() + "'");
    entry.dtype = *parsed_dtype;

    const auto& shape = value["shape"];
    if (!shape.is_array()) return corrupt_tensor(file_name, name, "shape is not an array");
    if (shape.size() > 8) return corrupt_tensor(file_name, name, "shape has more than 8 dimensions");
    uint64_t elements = 1;
    for (const auto& d : shape) {
      if (!d.is_number_unsigned()) return corrupt_tensor(file_name, name, "shape holds a value that is not a non-negative integer");
      uint64_t dim = d.get<uint64_t>();
      if (dim > uint64_t(std::numeric_limits<int64_t>::max()) || !checked_multiply(elements, dim, &elements))
        return corrupt_tensor(file_name, name, "shape is too large");
      entry.shape.push_back(int64_t(dim));
    }

    const auto& offsets = value["data_offsets"];
    if (!offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      return corrupt_tensor(file_name, name, "data_offsets must be two non-negative integers");
    entry.begin = offsets[0].get<uint64_t>();
    entry.end = offsets[1].get<uint64_t>();
    if (entry.end < entry.begin) return corrupt_tensor(file_name, name, "data_offsets end before they begin");
    if (entry.end > data_size)
      return corrupt_tensor(file_name, name,
                            "data_offsets [" + std::to_string(entry.begin) + ", " + std::to_string(entry.end) +
                                ") run past the " + std::to_string(data_size) + "-byte data section (truncated?)");
    uint64_t expected_bytes = 0;
    if (!checked_multiply(elements, dtype_size(entry.dtype), &expected_bytes) ||
        expected_bytes != entry.end - entry.begin)
      return corrupt_tensor(file_name, name,
                            "shape " + shape_to_string(entry.shape) + " of " + std::string(dtype_name(entry.dtype)) +
                                " needs " + std::to_string(expected_bytes) + " bytes but data_offsets span " +
                                std::to_string(entry.end - entry.begin));
    header.tensors.push_back(std::move(entry));
  }

  std::vector<const TensorEntry*> by_offset;
  for (const auto& t : header.tensors) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const TensorEntry* a, const TensorEntry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i) {
    if (by_offset[i]->begin < by_offset[i - 1]->end && by_offset[i]->begin != by_offset[i]->end &&
        by_offset[i - 1]->begin != by_offset[i - 1]->end)
      return corrupt(file_name, "tensors '" + by_offset[i - 1]->name + "' and '" + by_offset[i]->name +
                                    "' overlap in the data section");
  }
  std::sort(header.tensors.begin(), header.tensors.end(),
            [](const TensorEntry& a, const TensorEntry& b) { return a.name < b.name; });
  return header;
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

struct SafetensorsFile::Storage {
  bool checked_finite = false;
  void* mapping = nullptr;
  size_t mapping_size = 0;
  std::vector<std::byte> owned;
  ~Storage() {
    if (mapping) ::munmap(mapping, mapping_size);
  }
};

SafetensorsFile::SafetensorsFile() = default;
SafetensorsFile::SafetensorsFile(SafetensorsFile&&) noexcept = default;
SafetensorsFile& SafetensorsFile::operator=(SafetensorsFile&&) noexcept = default;
SafetensorsFile::~SafetensorsFile() = default;

Result<SafetensorsFile> SafetensorsFile::open(const std::filesystem::path& path, Residence residence) {
  uint64_t file_size = 0;
  CUBEFORGE_ASSIGN_OR_RETURN(const int fd, open_regular_file(path, &file_size));
  SafetensorsFile file;
  file.storage_ = std::make_unique<Storage>();
  file.name_ = path.string();
  const size_t size = size_t(file_size);
  if (size > 0) {
    const bool anonymous = residence == Residence::kHugePages;
    void* mapping = anonymous ? ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0)
                              : ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (mapping == MAP_FAILED) {
      int err = errno;
      ::close(fd);
      return make_error(err == ENOMEM ? ErrorCode::kOutOfMemory : ErrorCode::kIo,
                        "cannot map '" + path.string() + "': " + std::strerror(err));
    }
    file.storage_->mapping = mapping;
    file.storage_->mapping_size = size;
    if (anonymous) {
      ::madvise(mapping, size, MADV_HUGEPAGE);
      auto* out = static_cast<char*>(mapping);
      size_t done = 0;
      while (done < size) {
        const ssize_t n = ::pread(fd, out + done, std::min<size_t>(size - done, size_t(1) << 26), off_t(done));
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
          int err = n < 0 ? errno : EIO;
          ::close(fd);
          return make_error(ErrorCode::kIo, "cannot read '" + path.string() + "': " + std::strerror(err));
        }
        done += size_t(n);
      }
    }
    file.bytes_ = std::span<const std::byte>(static_cast<const std::byte*>(mapping), size);
  }
  ::close(fd);
  CUBEFORGE_ASSIGN_OR_RETURN(file.header_, parse_safetensors_header(file.bytes_, file.name_));
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
  return TensorView{&*it, bytes_.data() + header_.data_offset + it->begin};
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
  for (const TensorEntry& entry : header_.tensors)
    CUBEFORGE_TRY(check_finite(TensorView{&entry, bytes_.data() + header_.data_offset + entry.begin}, name_));
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
