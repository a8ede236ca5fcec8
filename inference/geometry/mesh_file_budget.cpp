// Counting a mesh file's claims before import: STL, PLY, OBJ and glTF/GLB.
#include "inference/geometry/mesh_file_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <sstream>
#include <string_view>
#include <vector>

#include "inference/core/file_io.h"
#include "inference/core/input_budgets.h"
#include "inference/core/strict_json.h"
#include "inference/core/untrusted_text.h"

namespace cubeforge {

Error node_hierarchy_too_deep(const std::string& subject) {
  return make_error(ErrorCode::kUnsupported, "cannot import " + subject + ": its node hierarchy is more than " +
                                                 std::to_string(kMaxMeshNodeDepth) +
                                                 " nodes deep; the importer walks it by recursion, so cubeforge "
                                                 "reads at most that");
}

namespace {

// Closes a descriptor when it goes out of scope.
struct FileDescriptor {
  int fd = -1;
  ~FileDescriptor() {
    if (fd >= 0) ::close(fd);
  }
};

std::string quoted_path(const std::filesystem::path& path) { return single_quoted(escape_untrusted(path.string())); }

Error not_what_it_claims(const std::filesystem::path& path, const std::string& why) {
  return make_error(ErrorCode::kCorruptFile, "cannot import " + quoted_path(path) + ": " + why);
}

// Reads up to `size` bytes at `offset` (fewer at the end of the file).
std::string read_at(int fd, uint64_t offset, size_t size) {
  std::string bytes(size, '\0');
  size_t done = 0;
  while (done < size) {
    const ssize_t n = ::pread(fd, bytes.data() + done, size - done, off_t(offset + done));
    if (n <= 0) break;
    done += size_t(n);
  }
  bytes.resize(done);
  return bytes;
}

// --- STL -------------------------------------------------------------------------

// A binary STL is 84 + 50 bytes per triangle (Assimp takes a file of exactly
// that size for binary); its count is then a claim the file's size backs.
void count_stl(int fd, uint64_t size, MeshFileClaims& claims) {
  if (size < 84) return;
  const std::string head = read_at(fd, 80, 4);
  if (head.size() < 4) return;
  uint32_t triangles = 0;
  std::memcpy(&triangles, head.data(), 4);
  if (84 + uint64_t(triangles) * 50 != size) return;  // ASCII: counted after import
  claims.faces = triangles;
  claims.vertices = uint64_t(triangles) * 3;
}

// --- PLY -----------------------------------------------------------------------

size_t ply_type_size(const std::string& type) {
  if (type == "char" || type == "uchar" || type == "int8" || type == "uint8") return 1;
  if (type == "short" || type == "ushort" || type == "int16" || type == "uint16") return 2;
  if (type == "double" || type == "float64") return 8;
  return 4;  // int, uint, float and their sized names (the header check allows only known types)
}

// The vertex and face counts of a PLY header (already checked for syntax),
// and whether the file can hold what they claim: every element needs at
// least its scalar properties and its lists' counts (binary), or a character
// and a separator per property (ASCII).
Status count_ply(const std::filesystem::path& path, int fd, uint64_t size, MeshFileClaims& claims) {
  const std::string head = read_at(fd, 0, size_t(std::min<uint64_t>(size, 64 << 10)));
  const size_t end = head.find("end_header");
  if (end == std::string::npos) return ok_status();  // the header check says why
  const size_t data_start = head.find('\n', end) == std::string::npos ? head.size() : head.find('\n', end) + 1;
  std::istringstream in(head.substr(0, end));
  std::string line;
  bool binary = false;
  uint64_t least_bytes = 0;
  uint64_t count = 0, element_bytes = 0;
  std::string element;
  auto close_element = [&] {
    least_bytes = saturating_add(least_bytes, saturating_multiply(count, element_bytes));
    if (element == "vertex") claims.vertices = saturating_add(claims.vertices, count);
    if (element == "face") claims.faces = saturating_add(claims.faces, count);
  };
  while (std::getline(in, line)) {
    std::istringstream words(line);
    std::vector<std::string> w{std::istream_iterator<std::string>(words), std::istream_iterator<std::string>()};
    if (w.empty()) continue;
    if (w[0] == "format") binary = w.size() > 1 && w[1] != "ascii";
    if (w[0] == "element" && w.size() == 3) {
      close_element();
      element = w[1];
      count = std::strtoull(w[2].c_str(), nullptr, 10);
      element_bytes = 0;
    }
    if (w[0] == "property" && w.size() >= 3)
      element_bytes += binary ? ply_type_size(w[1] == "list" ? w[2] : w[1]) : 2;
  }
  close_element();
  const uint64_t data_bytes = size - std::min<uint64_t>(size, data_start);
  if (least_bytes > data_bytes)
    return not_what_it_claims(path, "its PLY header claims elements that need at least " + std::to_string(least_bytes) +
                                        " bytes, but " + std::to_string(data_bytes) +
                                        " follow the header; is it a complete PLY file?");
  return ok_status();
}

// --- OBJ -----------------------------------------------------------------------

// One pass over the lines: "v" lines are vertices, an "f" line of n corners
// is n - 2 triangles.
void count_obj(int fd, MeshFileClaims& claims) {
  std::vector<char> buffer(size_t(1) << 16);
  enum class State { kLineStart, kTag, kSkipLine, kFace } state = State::kLineStart;
  char tag[2] = {0, 0};
  int tag_length = 0;
  uint64_t corners = 0;
  bool in_token = false;
  auto end_face = [&] {
    claims.largest_polygon = std::max(claims.largest_polygon, corners);
    if (corners >= 3) claims.faces += corners - 2;
  };
  uint64_t offset = 0;
  for (;;) {
    const ssize_t n = ::pread(fd, buffer.data(), buffer.size(), off_t(offset));
    if (n <= 0) break;
    offset += uint64_t(n);
    const char* p = buffer.data();
    const char* const end = p + n;
    while (p < end) {
      const char c = *p;
      switch (state) {
        case State::kLineStart:
          if (c == ' ' || c == '\t' || c == '\r' || c == '\n') break;
          state = State::kTag;
          tag_length = 0;
          [[fallthrough]];
        case State::kTag:
          if (c == ' ' || c == '\t') {
            if (tag_length == 1 && tag[0] == 'v') ++claims.vertices;
            if (tag_length == 1 && tag[0] == 'f') {
              state = State::kFace;
              corners = 0;
              in_token = false;
              break;
            }
            state = State::kSkipLine;
          } else if (c == '\n') {
            state = State::kLineStart;
          } else {
            if (tag_length < 2) tag[tag_length] = c;
            ++tag_length;
          }
          break;
        case State::kSkipLine: {
          const void* newline = std::memchr(p, '\n', size_t(end - p));
          if (!newline) {
            p = end;
            continue;
          }
          p = static_cast<const char*>(newline);
          state = State::kLineStart;
          break;
        }
        case State::kFace:
          if (c == '\n') {
            end_face();
            state = State::kLineStart;
          } else if (c == ' ' || c == '\t' || c == '\r') {
            in_token = false;
          } else if (!in_token) {
            in_token = true;
            ++corners;
          }
          break;
      }
      ++p;
    }
  }
  if (state == State::kFace) end_face();
}

// --- glTF ----------------------------------------------------------------------

// No array in a glTF cubeforge reads needs more entries (the node, part and
// accessor counts that matter have budgets of their own); a fixed bound on
// what the streaming reader keeps.
constexpr uint64_t kMaxGltfArrayEntries = uint64_t(1) << 20;
constexpr uint64_t kNone = UINT64_MAX;

struct GltfAccessor {
  uint64_t buffer_view = kNone;
  uint64_t byte_offset = 0;
  uint64_t count = 0;
  uint64_t component_bytes = 0;  // 0: not given or unknown
  uint64_t components = 0;
  // A sparse accessor's replacements: `sparse_count` indices and values.
  bool sparse = false;
  uint64_t sparse_count = kNone;
  uint64_t indices_view = kNone, indices_offset = 0, index_bytes = 0;
  uint64_t values_view = kNone, values_offset = 0;
};
struct GltfBufferView {
  uint64_t buffer = kNone;
  uint64_t byte_offset = 0, byte_length = 0, byte_stride = 0;
};
struct GltfBuffer {
  uint64_t byte_length = 0;
  bool has_uri = false, data_uri = false;
  std::string uri;  // an external file's name
};
struct GltfPrimitive {
  uint64_t position = kNone, indices = kNone, mode = 4;
  std::vector<uint64_t> accessors;  // every accessor it reads (attributes and morph targets)
  std::vector<uint64_t> target_positions;
};
struct GltfNode {
  uint64_t mesh = kNone;
  std::vector<uint64_t> children;
};

struct GltfSummary {
  std::string version;
  bool has_version = false;
  uint64_t scene = kNone;
  bool scene_not_a_number = false;  // checked once the version is known (1.0 names its scene)
  std::vector<std::vector<uint64_t>> scenes;
  std::vector<GltfNode> nodes;
  std::vector<std::vector<GltfPrimitive>> meshes;
  std::vector<GltfAccessor> accessors;
  std::vector<GltfBufferView> buffer_views;
  std::vector<GltfBuffer> buffers;
  std::vector<uint64_t> other_accessors;  // animations' and skins' reads
  uint64_t primitives = 0;
};

// A nlohmann SAX handler that keeps, of a glTF's JSON, what the budgets and
// bounds need, stopping at the first claim past a budget. Nesting is bounded
// as for any JSON (kMaxJsonDepth), arrays to kMaxGltfArrayEntries.
class GltfSummaryReader {
 public:
  GltfSummaryReader(GltfSummary& summary, uint64_t node_budget, uint64_t instance_budget)
      : s_(summary), node_budget_(node_budget), instance_budget_(instance_budget) {}

  bool null() { return scalar(Scalar{}); }
  bool boolean(bool) { return scalar(Scalar{}); }
  bool number_integer(nlohmann::json::number_integer_t value) {
    return value >= 0 ? scalar(Scalar{Scalar::kNumber, uint64_t(value)}) : scalar(Scalar{Scalar::kNegative});
  }
  bool number_unsigned(nlohmann::json::number_unsigned_t value) { return scalar(Scalar{Scalar::kNumber, value}); }
  bool number_float(nlohmann::json::number_float_t, const nlohmann::json::string_t&) {
    return scalar(Scalar{Scalar::kFraction});
  }
  bool string(nlohmann::json::string_t& value) {
    Scalar text{Scalar::kString};
    text.text = &value;
    return scalar(text);
  }
  bool binary(nlohmann::json::binary_t&) { return scalar(Scalar{}); }
  bool start_object(std::size_t) { return open(false); }
  bool start_array(std::size_t) { return open(true); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(nlohmann::json::string_t& name) {
    path_.back().key = name;
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& error) {
    error_ = std::string("its JSON is not valid: ") + error.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  struct Scalar {
    enum Kind { kOther, kNumber, kNegative, kFraction, kString } kind = kOther;
    uint64_t number = 0;
    const std::string* text = nullptr;
  };
  struct Level {
    bool array = false;
    std::string key;       // objects: the member being read
    uint64_t index = kNone;  // arrays: the element being read
  };

  // Path tests: key_at(i) for an object level, index_at(i) for an array level.
  bool is_key(size_t level, std::string_view key) const {
    return level < path_.size() && !path_[level].array && path_[level].key == key;
  }
  uint64_t index_at(size_t level) const { return path_[level].index; }

  std::string where() const {
    std::string text;
    for (const Level& level : path_) {
      if (level.array) {
        text += '[';
        text += std::to_string(level.index);
        text += ']';
      } else {
        if (!text.empty()) text += '.';
        text += level.key;
      }
    }
    return text;
  }
  bool fail(const std::string& why) {
    error_ = why;
    return false;
  }

  // A new value in the current container: arrays count their elements, and
  // new entities are made as their arrays grow.
  bool enter() {
    if (path_.empty()) return true;
    Level& parent = path_.back();
    if (!parent.array) return true;
    parent.index = parent.index == kNone ? 0 : parent.index + 1;
    if (parent.index >= kMaxGltfArrayEntries)
      return fail("its JSON array " + where() + " has more than " + std::to_string(kMaxGltfArrayEntries) +
                  " entries; no glTF cubeforge reads needs that many");
    const size_t depth = path_.size();
    if (depth == 2) {
      if (is_key(0, "nodes")) {
        if (parent.index >= node_budget_) {
          over_budget_ = InputBudget::kMeshNodes;
          over_amount_ = parent.index + 1;
          return fail("");
        }
        s_.nodes.emplace_back();
      } else if (is_key(0, "scenes")) {
        s_.scenes.emplace_back();
      } else if (is_key(0, "meshes")) {
        s_.meshes.emplace_back();
      } else if (is_key(0, "accessors")) {
        s_.accessors.emplace_back();
      } else if (is_key(0, "bufferViews")) {
        s_.buffer_views.emplace_back();
      } else if (is_key(0, "buffers")) {
        s_.buffers.emplace_back();
      }
    } else if (depth == 4 && is_key(0, "meshes") && is_key(2, "primitives") && index_at(1) < s_.meshes.size()) {
      if (++s_.primitives > instance_budget_) {
        over_budget_ = InputBudget::kMeshInstances;
        over_amount_ = s_.primitives;
        return fail("");
      }
      s_.meshes[index_at(1)].emplace_back();
    }
    return true;
  }
  bool open(bool array) {
    if (!enter()) return false;
    // An accessor's "sparse" object, whatever it holds, makes it sparse.
    if (path_.size() == 3 && is_key(0, "accessors") && is_key(2, "sparse") && index_at(1) < s_.accessors.size())
      s_.accessors[index_at(1)].sparse = true;
    if (path_.size() >= size_t(kMaxJsonDepth))
      return fail("its JSON is nested more than " + std::to_string(kMaxJsonDepth) + " levels deep (in " + where() + ")");
    path_.push_back({array, {}, kNone});
    return true;
  }
  bool close() {
    path_.pop_back();
    return true;
  }

  // An index, a count or an offset: a whole number from 0.
  bool number(const Scalar& value, uint64_t* out) {
    if (value.kind != Scalar::kNumber)
      return fail(where() + " is not a whole number from 0, as the glTF format requires there");
    *out = value.number;
    return true;
  }

  bool scalar(const Scalar& value) {
    if (!enter()) return false;
    const size_t depth = path_.size();
    if (depth == 0) return true;
    const std::string& top = path_[0].key;
    if (depth == 1) {
      if (top == "scene") {
        if (value.kind == Scalar::kNumber) s_.scene = value.number;
        else s_.scene_not_a_number = true;
      }
      return true;
    }
    if (top == "asset" && depth == 2 && is_key(1, "version")) {
      s_.has_version = true;
      if (value.kind == Scalar::kString) s_.version = *value.text;
      return true;
    }
    if (!path_[1].array) return true;
    const uint64_t i = index_at(1);
    if (top == "scenes" && depth == 4 && is_key(2, "nodes") && path_[3].array) {
      uint64_t node = 0;
      if (!number(value, &node)) return false;
      if (++scene_references_ > 64 * node_budget_)
        return fail("its scenes name more than " + std::to_string(64 * node_budget_) + " root nodes");
      s_.scenes[i].push_back(node);
    } else if (top == "nodes" && i < s_.nodes.size()) {
      if (depth == 3 && is_key(2, "mesh")) return number(value, &s_.nodes[i].mesh);
      if (depth == 4 && is_key(2, "children") && path_[3].array) {
        uint64_t child = 0;
        if (!number(value, &child)) return false;
        // A hierarchy is a forest: fewer parent-child links than nodes.
        if (++child_references_ > node_budget_) {
          over_budget_ = InputBudget::kMeshNodes;
          over_amount_ = child_references_;
          return fail("");
        }
        s_.nodes[i].children.push_back(child);
      }
    } else if (top == "meshes" && i < s_.meshes.size() && depth >= 5 && is_key(2, "primitives") &&
               index_at(3) < s_.meshes[i].size()) {
      GltfPrimitive& primitive = s_.meshes[i][index_at(3)];
      uint64_t accessor = 0;
      if (depth == 5 && is_key(4, "indices")) {
        if (!number(value, &primitive.indices)) return false;
        primitive.accessors.push_back(primitive.indices);
      } else if (depth == 5 && is_key(4, "mode")) {
        return number(value, &primitive.mode);
      } else if (depth == 6 && is_key(4, "attributes")) {
        if (!number(value, &accessor)) return false;
        primitive.accessors.push_back(accessor);
        if (path_[5].key == "POSITION") primitive.position = accessor;
      } else if (depth == 7 && is_key(4, "targets")) {
        if (!number(value, &accessor)) return false;
        primitive.accessors.push_back(accessor);
        if (path_[6].key == "POSITION") primitive.target_positions.push_back(accessor);
      }
    } else if (top == "accessors" && i < s_.accessors.size()) {
      GltfAccessor& a = s_.accessors[i];
      if (depth == 4 && is_key(2, "sparse") && is_key(3, "count")) return number(value, &a.sparse_count);
      if (depth == 5 && is_key(2, "sparse") && is_key(3, "indices")) {
        if (is_key(4, "bufferView")) return number(value, &a.indices_view);
        if (is_key(4, "byteOffset")) return number(value, &a.indices_offset);
        if (is_key(4, "componentType")) {
          uint64_t type = 0;
          if (!number(value, &type)) return false;
          a.index_bytes = type == 5121 ? 1 : type == 5123 ? 2 : type == 5125 ? 4 : 0;
        }
      }
      if (depth == 5 && is_key(2, "sparse") && is_key(3, "values")) {
        if (is_key(4, "bufferView")) return number(value, &a.values_view);
        if (is_key(4, "byteOffset")) return number(value, &a.values_offset);
      }
      if (depth != 3) return true;
      const std::string& field = path_[2].key;
      if (field == "bufferView") return number(value, &a.buffer_view);
      if (field == "byteOffset") return number(value, &a.byte_offset);
      if (field == "count") return number(value, &a.count);
      if (field == "componentType") {
        uint64_t type = 0;
        if (!number(value, &type)) return false;
        a.component_bytes = type == 5120 || type == 5121 ? 1 : type == 5122 || type == 5123 ? 2
                            : type == 5125 || type == 5126                                  ? 4
                                                                                           : 0;
      }
      if (field == "type" && value.kind == Scalar::kString) {
        const std::string& type = *value.text;
        a.components = type == "SCALAR" ? 1 : type == "VEC2" ? 2 : type == "VEC3" ? 3 : type == "VEC4" ? 4
                       : type == "MAT2" ? 4 : type == "MAT3" ? 9 : type == "MAT4" ? 16 : 0;
      }
    } else if (top == "bufferViews" && i < s_.buffer_views.size() && depth == 3) {
      GltfBufferView& v = s_.buffer_views[i];
      const std::string& field = path_[2].key;
      if (field == "buffer") return number(value, &v.buffer);
      if (field == "byteOffset") return number(value, &v.byte_offset);
      if (field == "byteLength") return number(value, &v.byte_length);
      if (field == "byteStride") return number(value, &v.byte_stride);
    } else if (top == "buffers" && i < s_.buffers.size() && depth == 3) {
      GltfBuffer& b = s_.buffers[i];
      if (is_key(2, "byteLength")) return number(value, &b.byte_length);
      if (is_key(2, "uri") && value.kind == Scalar::kString) {
        b.has_uri = true;
        b.data_uri = value.text->compare(0, 5, "data:") == 0;
        if (!b.data_uri) b.uri = *value.text;
      }
    } else if ((top == "animations" && depth == 5 && is_key(2, "samplers") && (is_key(4, "input") || is_key(4, "output"))) ||
               (top == "skins" && depth == 3 && is_key(2, "inverseBindMatrices"))) {
      uint64_t accessor = 0;
      if (!number(value, &accessor)) return false;
      if (s_.other_accessors.size() >= kMaxGltfArrayEntries)
        return fail("its animations and skins read more than " + std::to_string(kMaxGltfArrayEntries) + " accessors");
      s_.other_accessors.push_back(accessor);
    }
    return true;
  }

 public:
  std::optional<InputBudget> over_budget_;
  uint64_t over_amount_ = 0;

 private:
  GltfSummary& s_;
  uint64_t node_budget_, instance_budget_;
  uint64_t scene_references_ = 0, child_references_ = 0;
  std::vector<Level> path_;
  std::string error_;
};

std::string percent_decoded(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && std::isxdigit(static_cast<unsigned char>(text[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(text[i + 2]))) {
      out += char(std::stoi(text.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// The JSON of a .gltf, or a .glb's JSON chunk and the length of its binary
// chunk (the container was checked by check_glb_container).
Status gltf_json(int fd, uint64_t size, bool binary, std::string* json, uint64_t* binary_chunk) {
  *binary_chunk = 0;
  if (!binary) {
    *json = read_at(fd, 0, size_t(size));
    return ok_status();
  }
  const std::string header = read_at(fd, 0, 20);
  if (header.size() < 20) return ok_status();
  uint32_t length = 0;
  std::memcpy(&length, header.data() + 12, 4);
  *json = read_at(fd, 20, size_t(std::min<uint64_t>(length, size)));
  const uint64_t next = 20 + ((uint64_t(length) + 3) / 4) * 4;
  const std::string chunk = read_at(fd, next, 8);
  if (chunk.size() == 8) {
    uint32_t binary_length = 0, type = 0;
    std::memcpy(&binary_length, chunk.data(), 4);
    std::memcpy(&type, chunk.data() + 4, 4);
    if (type == 0x004E4942u) *binary_chunk = binary_length;
  }
  return ok_status();
}

Status count_gltf(const std::filesystem::path& path, int fd, uint64_t size, bool binary, MeshFileClaims& claims) {
  if (binary) {
    const std::string header = read_at(fd, 0, 8);
    uint32_t version = 0;
    if (header.size() == 8) std::memcpy(&version, header.data() + 4, 4);
    if (version == 1)
      return make_error(ErrorCode::kUnsupported,
                        "cannot import " + quoted_path(path) +
                            ": it is a glTF 1.0 binary file; cubeforge reads glTF 2.0 only (the importer of the "
                            "obsolete 1.0 format aborts on malformed files): convert it to glTF 2.0");
  }
  std::string json;
  uint64_t binary_chunk = 0;
  CUBEFORGE_TRY(gltf_json(fd, size, binary, &json, &binary_chunk));
  CUBEFORGE_ASSIGN_OR_RETURN(const uint64_t node_budget, input_budget(InputBudget::kMeshNodes));
  CUBEFORGE_ASSIGN_OR_RETURN(const uint64_t instance_budget, input_budget(InputBudget::kMeshInstances));
  GltfSummary s;
  GltfSummaryReader reader(s, node_budget, instance_budget);
  const bool read = nlohmann::json::sax_parse(json.begin(), json.end(), &reader, nlohmann::json::input_format_t::json,
                                              /*strict=*/true, /*ignore_comments=*/false);
  json = std::string();
  const std::string subject = quoted_path(path);
  if (!read) {
    if (reader.over_budget_ == InputBudget::kMeshNodes)
      return check_input_budget(InputBudget::kMeshNodes, reader.over_amount_, subject + ": its scene");
    if (reader.over_budget_ == InputBudget::kMeshInstances)
      return check_input_budget(InputBudget::kMeshInstances, reader.over_amount_, subject + ": its meshes");
    return not_what_it_claims(path, reader.error());
  }
  if (!s.has_version || s.version.empty() || s.version[0] != '2')
    return make_error(ErrorCode::kUnsupported,
                      "cannot import " + subject + ": it is glTF " +
                          (s.has_version ? escape_untrusted(s.version) : std::string("without asset.version")) +
                          "; cubeforge reads glTF 2.0 only (the importer of the obsolete 1.0 format aborts on "
                          "malformed files): convert it to glTF 2.0");
  if (s.scene_not_a_number) return not_what_it_claims(path, "scene is not a whole number from 0");

  // Buffers: sizes against the files and chunk that hold them; the buffer
  // files' bytes count with the file's.
  const std::filesystem::path folder = path.parent_path();
  std::set<std::filesystem::path> external;
  for (size_t b = 0; b < s.buffers.size(); ++b) {
    const GltfBuffer& buffer = s.buffers[b];
    if (!buffer.has_uri) {
      if (binary && b == 0 && buffer.byte_length > binary_chunk)
        return not_what_it_claims(path, "buffers[0] claims " + std::to_string(buffer.byte_length) +
                                            " bytes but the binary chunk has " + std::to_string(binary_chunk));
      continue;
    }
    if (buffer.data_uri) continue;  // inside the JSON, whose bytes are counted
    const std::filesystem::path name(percent_decoded(buffer.uri));
    if (name.is_absolute() || std::find(name.begin(), name.end(), "..") != name.end()) continue;  // the import refuses it
    std::error_code error;
    const std::filesystem::path file = folder / name;
    if (!std::filesystem::is_regular_file(file, error)) continue;  // the import says it is missing
    const uint64_t file_size = std::filesystem::file_size(file, error);
    if (error) continue;
    if (external.insert(file).second) claims.file_bytes = saturating_add(claims.file_bytes, file_size);
    if (buffer.byte_length > file_size)
      return not_what_it_claims(path, "buffers[" + std::to_string(b) + "] claims " +
                                          std::to_string(buffer.byte_length) + " bytes but " +
                                          single_quoted(escape_untrusted(buffer.uri)) + " has " +
                                          std::to_string(file_size));
  }

  // Buffer views inside their buffers.
  for (size_t v = 0; v < s.buffer_views.size(); ++v) {
    const GltfBufferView& view = s.buffer_views[v];
    if (view.buffer >= s.buffers.size() ||
        saturating_add(view.byte_offset, view.byte_length) > s.buffers[view.buffer].byte_length)
      return not_what_it_claims(path, "bufferViews[" + std::to_string(v) + "] lies outside its buffer");
  }
  // Accessors read: each inside its buffer view, and the bytes copied out of them.
  uint64_t copied_bytes = 0;
  auto check_accessor = [&](uint64_t index, uint64_t* count) -> Status {
    if (index >= s.accessors.size())
      return not_what_it_claims(path, "it reads accessor " + std::to_string(index) + " of " +
                                          std::to_string(s.accessors.size()));
    const GltfAccessor& a = s.accessors[index];
    if (a.component_bytes == 0 || a.components == 0)
      return not_what_it_claims(path, "accessors[" + std::to_string(index) + "] has no known type and componentType");
    const uint64_t element = a.component_bytes * a.components;
    copied_bytes = saturating_add(copied_bytes, saturating_multiply(a.count, element));
    if (a.buffer_view != kNone && a.count > 0) {
      if (a.buffer_view >= s.buffer_views.size())
        return not_what_it_claims(path, "accessors[" + std::to_string(index) + "] names a missing buffer view");
      const GltfBufferView& view = s.buffer_views[a.buffer_view];
      const uint64_t stride = view.byte_stride ? view.byte_stride : element;
      const uint64_t last = saturating_add(saturating_add(a.byte_offset, saturating_multiply(a.count - 1, stride)), element);
      if (last > view.byte_length)
        return not_what_it_claims(path, "accessors[" + std::to_string(index) + "] (" + std::to_string(a.count) +
                                            " elements) runs past its buffer view of " +
                                            std::to_string(view.byte_length) + " bytes");
    }
    if (a.sparse) {
      // Every part of a sparse accessor is given and lies inside its view
      // (Assimp read past a buffer on one without a count).
      const std::string name = "accessors[" + std::to_string(index) + "].sparse";
      if (a.sparse_count == kNone || a.sparse_count == 0 || a.sparse_count > a.count)
        return not_what_it_claims(path, name + " needs a count from 1 to the accessor's " + std::to_string(a.count));
      if (a.index_bytes == 0 || a.indices_view >= s.buffer_views.size() || a.values_view >= s.buffer_views.size())
        return not_what_it_claims(path, name + " needs indices (a buffer view and an unsigned componentType) and "
                                               "values (a buffer view)");
      if (saturating_add(a.indices_offset, saturating_multiply(a.sparse_count, a.index_bytes)) >
              s.buffer_views[a.indices_view].byte_length ||
          saturating_add(a.values_offset, saturating_multiply(a.sparse_count, element)) >
              s.buffer_views[a.values_view].byte_length)
        return not_what_it_claims(path, name + " runs past its buffer views");
      copied_bytes = saturating_add(copied_bytes, saturating_multiply(a.sparse_count, element + a.index_bytes));
    }
    if (count) *count = a.count;
    return ok_status();
  };
  for (uint64_t accessor : s.other_accessors) CUBEFORGE_TRY(check_accessor(accessor, nullptr));

  // Each mesh's parts, vertices and triangles, read once.
  struct MeshCost {
    uint64_t parts = 0, vertices = 0, faces = 0;
  };
  std::vector<MeshCost> cost(s.meshes.size());
  MeshCost all;
  for (size_t m = 0; m < s.meshes.size(); ++m) {
    for (const GltfPrimitive& primitive : s.meshes[m]) {
      for (uint64_t accessor : primitive.accessors) CUBEFORGE_TRY(check_accessor(accessor, nullptr));
      uint64_t vertices = 0, indices = 0;
      if (primitive.position != kNone) CUBEFORGE_TRY(check_accessor(primitive.position, &vertices));
      if (primitive.indices != kNone) CUBEFORGE_TRY(check_accessor(primitive.indices, &indices));
      if (primitive.mode > 6)
        return not_what_it_claims(path, "meshes[" + std::to_string(m) + "] has a primitive of mode " +
                                            std::to_string(primitive.mode) + "; glTF modes are 0 to 6");
      const uint64_t corners = primitive.indices != kNone ? indices : vertices;
      // Assimp counts a strip's or loop's elements as corners minus one or two,
      // unsigned (found by fuzzing: a strip without positions asked for 64 GiB).
      const std::string part = "meshes[" + std::to_string(m) + "] has a primitive ";
      if (primitive.position == kNone)
        return not_what_it_claims(path, part + "without a POSITION attribute; every part of a mesh needs "
                                               "its vertices' positions");
      static constexpr uint64_t kLeastCorners[] = {1, 2, 2, 2, 3, 3, 3};  // points, lines, …, fans
      if (corners < kLeastCorners[primitive.mode])
        return not_what_it_claims(path, part + "of mode " + std::to_string(primitive.mode) + " with " +
                                            std::to_string(corners) + " corners; that mode needs at least " +
                                            std::to_string(kLeastCorners[primitive.mode]));
      const uint64_t faces = primitive.mode == 4                          ? corners / 3
                             : (primitive.mode == 5 || primitive.mode == 6) ? (corners >= 3 ? corners - 2 : 0)
                                                                            : 0;
      uint64_t morphed = 0;
      for (uint64_t target : primitive.target_positions) {
        uint64_t count = 0;
        CUBEFORGE_TRY(check_accessor(target, &count));
        morphed = saturating_add(morphed, count);
      }
      cost[m].parts += 1;
      cost[m].vertices = saturating_add(cost[m].vertices, saturating_add(vertices, morphed));
      cost[m].faces = saturating_add(cost[m].faces, faces);
    }
    all.parts = saturating_add(all.parts, cost[m].parts);
    all.vertices = saturating_add(all.vertices, cost[m].vertices);
    all.faces = saturating_add(all.faces, cost[m].faces);
  }
  claims.file_bytes = std::max(claims.file_bytes, copied_bytes);

  // The hierarchy: a forest (each node has at most one parent, roots none),
  // walked without recursion from the imported scene's roots.
  std::vector<uint32_t> parents(s.nodes.size(), 0);
  for (size_t n = 0; n < s.nodes.size(); ++n) {
    for (uint64_t child : s.nodes[n].children) {
      if (child >= s.nodes.size())
        return not_what_it_claims(path, "nodes[" + std::to_string(n) + "] has child " + std::to_string(child) + " of " +
                                            std::to_string(s.nodes.size()) + " nodes");
      if (++parents[child] > 1)
        return not_what_it_claims(path, "nodes[" + std::to_string(child) +
                                            "] has two parents; a glTF node hierarchy is a set of trees");
    }
    if (s.nodes[n].mesh != kNone && s.nodes[n].mesh >= s.meshes.size())
      return not_what_it_claims(path, "nodes[" + std::to_string(n) + "] places mesh " + std::to_string(s.nodes[n].mesh) +
                                          " of " + std::to_string(s.meshes.size()));
  }
  std::vector<uint64_t> roots;
  if (s.scene != kNone) {
    if (s.scene >= s.scenes.size())
      return not_what_it_claims(path, "scene " + std::to_string(s.scene) + " is not one of its " +
                                          std::to_string(s.scenes.size()) + " scenes");
    roots = s.scenes[s.scene];
  } else if (!s.scenes.empty()) {
    for (const auto& scene : s.scenes) roots.insert(roots.end(), scene.begin(), scene.end());
  } else {
    for (size_t n = 0; n < s.nodes.size(); ++n)
      if (parents[n] == 0) roots.push_back(n);
  }
  MeshCost placed;
  uint64_t placed_nodes = 0;
  std::vector<std::pair<uint64_t, int>> pending;  // node, depth
  for (uint64_t root : roots) {
    if (root >= s.nodes.size())
      return not_what_it_claims(path, "a scene names node " + std::to_string(root) + " of " +
                                          std::to_string(s.nodes.size()));
    if (parents[root] != 0)
      return not_what_it_claims(path, "a scene names nodes[" + std::to_string(root) + "] as a root, but it has a parent");
    pending.push_back({root, 1});
    while (!pending.empty()) {
      const auto [node, depth] = pending.back();
      pending.pop_back();
      if (depth > kMaxMeshNodeDepth)
        return node_hierarchy_too_deep(subject);
      if (++placed_nodes > node_budget)  // a root listed by several scenes is placed each time
        return check_input_budget(InputBudget::kMeshNodes, placed_nodes, subject + ": its scene");
      const GltfNode& n = s.nodes[node];
      if (n.mesh != kNone) {
        placed.parts = saturating_add(placed.parts, cost[n.mesh].parts);
        placed.vertices = saturating_add(placed.vertices, cost[n.mesh].vertices);
        placed.faces = saturating_add(placed.faces, cost[n.mesh].faces);
      }
      for (uint64_t child : n.children) pending.push_back({child, depth + 1});
    }
  }
  claims.nodes = placed_nodes;
  claims.instances = std::max(placed.parts, all.parts);
  claims.vertices = std::max(placed.vertices, all.vertices);
  claims.faces = std::max(placed.faces, all.faces);
  return ok_status();
}

}  // namespace

Status check_mesh_file_budgets(const std::filesystem::path& path, const std::string& extension,
                               MeshFileClaims* out) {
  MeshFileClaims claims;
  uint64_t size = 0;
  FileDescriptor file;
  CUBEFORGE_ASSIGN_OR_RETURN(file.fd, open_regular_file(path, &size));
  claims.file_bytes = size;
  const std::string subject = quoted_path(path);
  // The file's own size first: nothing else is read from a file past it.
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshFileBytes, size, subject));
  if (extension == ".stl") count_stl(file.fd, size, claims);
  if (extension == ".ply") CUBEFORGE_TRY(count_ply(path, file.fd, size, claims));
  if (extension == ".obj") count_obj(file.fd, claims);
  if (extension == ".gltf" || extension == ".glb") CUBEFORGE_TRY(count_gltf(path, file.fd, size, extension == ".glb", claims));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshFileBytes, claims.file_bytes,
                                   subject + ": the file, the buffers it names and the data read from them"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshNodes, claims.nodes, subject + ": its scene"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshInstances, claims.instances,
                                   subject + ": its scene after instancing"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshVertices, claims.vertices, subject + ": its scene after instancing"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshFaces, claims.faces,
                                   subject + ": its scene after triangulation and instancing"));
  CUBEFORGE_TRY(check_input_budget(InputBudget::kMeshPolygonCorners, claims.largest_polygon,
                                   subject + ": its largest polygon"));
  if (out) *out = claims;
  return ok_status();
}

}  // namespace cubeforge
