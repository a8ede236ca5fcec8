// Hostile inputs by class, built on the spot: each case writes a model folder,
// mesh or list of prompts made to crash a parser, to cost gigabytes or minutes
// from a small or sparse file, to cost time in a header, or to slip a field
// past a check, and names the cubeforge-cli command that reads it and what a
// correct run ends with. Sparse files (ftruncate) cost nothing on disk.
//
// The cases are the tests of tests/app/hostile_budget_test.cpp (exit code,
// message, peak memory and bytes read bounded per case) and the rows of the
// table cubeforge-hostile-table prints for any build of the command-line tool.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <ostream>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "tests/support/hostile_files.h"

namespace cubeforge::testing {

struct HostileCase {
  std::string name;         // also the test's name
  std::string description;  // what the case is, for the table
  // Writes the case's files under `folder` and returns cubeforge-cli's arguments.
  std::function<std::vector<std::string>(const std::filesystem::path& folder)> build;
  int expected_exit = 1;
  std::string expected_output;  // a fragment a correct run prints
  uint64_t stack_bytes = 0;     // a stack limit for the run (ulimit -s)
  std::vector<std::string> environment;
  // Acts on the running program as its output grows (changes a file it
  // reads); returns false once done.
  std::function<bool(const std::string& output, pid_t pid, const std::filesystem::path& folder)> during;
};

// How a test framework prints a case: by its name.
inline void PrintTo(const HostileCase& c, std::ostream* out) { *out << c.name; }

inline HostileCase hostile_case(std::string name, std::string description,
                                std::function<std::vector<std::string>(const std::filesystem::path&)> build,
                                int expected_exit, std::string expected_output) {
  HostileCase c;
  c.name = std::move(name);
  c.description = std::move(description);
  c.build = std::move(build);
  c.expected_exit = expected_exit;
  c.expected_output = std::move(expected_output);
  return c;
}

namespace hostile_detail {

inline void write_text(const std::filesystem::path& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}

// Grows (or cuts) a file to `size` bytes without writing them: a sparse tail of zeros.
inline void resize_sparse(const std::filesystem::path& path, uint64_t size) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT, 0644);
  if (fd < 0 || ::ftruncate(fd, off_t(size)) != 0) std::abort();
  ::close(fd);
}

inline std::string nested(const std::string& open, const std::string& inner, const std::string& close, int depth) {
  std::string text;
  text.reserve((open.size() + close.size()) * size_t(depth) + inner.size());
  for (int i = 0; i < depth; ++i) text += open;
  text += inner;
  for (int i = 0; i < depth; ++i) text += close;
  return text;
}

// A square sheet of 2 * cells^2 triangles in the plane z = 0: positions
// (float32 xyz) then indices (uint32), as one glTF buffer.
struct SheetBuffer {
  std::string bytes;
  size_t position_bytes = 0, index_bytes = 0;
  int vertices = 0, indices = 0;
};
inline SheetBuffer sheet_buffer(int cells) {
  SheetBuffer sheet;
  const int side = cells + 1;
  std::vector<float> positions;
  for (int y = 0; y < side; ++y)
    for (int x = 0; x < side; ++x) positions.insert(positions.end(), {float(x) / cells, float(y) / cells, 0.f});
  std::vector<uint32_t> indices;
  for (int y = 0; y < cells; ++y)
    for (int x = 0; x < cells; ++x) {
      const uint32_t a = uint32_t(y * side + x), b = a + 1, c = a + uint32_t(side), d = c + 1;
      indices.insert(indices.end(), {a, b, d, a, d, c});
    }
  sheet.vertices = side * side;
  sheet.indices = int(indices.size());
  sheet.position_bytes = positions.size() * 4;
  sheet.index_bytes = indices.size() * 4;
  sheet.bytes.assign(reinterpret_cast<const char*>(positions.data()), sheet.position_bytes);
  sheet.bytes.append(reinterpret_cast<const char*>(indices.data()), sheet.index_bytes);
  return sheet;
}

// glTF 2.0 with the sheet as mesh 0; `nodes` and `scenes` are the caller's.
inline nlohmann::json gltf_with_sheet(const SheetBuffer& sheet, const std::string& buffer_uri = "") {
  nlohmann::json buffer = {{"byteLength", sheet.bytes.size()}};
  if (!buffer_uri.empty()) buffer["uri"] = buffer_uri;
  return {
      {"asset", {{"version", "2.0"}}},
      {"scene", 0},
      {"buffers", {buffer}},
      {"bufferViews",
       {{{"buffer", 0}, {"byteOffset", 0}, {"byteLength", sheet.position_bytes}},
        {{"buffer", 0}, {"byteOffset", sheet.position_bytes}, {"byteLength", sheet.index_bytes}}}},
      {"accessors",
       {{{"bufferView", 0}, {"componentType", 5126}, {"count", sheet.vertices}, {"type", "VEC3"},
         {"min", {0, 0, 0}}, {"max", {1, 1, 0}}},
        {{"bufferView", 1}, {"componentType", 5125}, {"count", sheet.indices}, {"type", "SCALAR"}}}},
      {"meshes", {{{"primitives", {{{"attributes", {{"POSITION", 0}}}, {"indices", 1}}}}}}},
  };
}

inline std::string glb(const std::string& json_text, const std::string& binary) {
  std::string json = json_text;
  while (json.size() % 4) json.push_back(' ');
  std::string bin = binary;
  while (bin.size() % 4) bin.push_back('\0');
  std::string out;
  auto put = [&](uint32_t v) { out.append(reinterpret_cast<const char*>(&v), 4); };
  put(0x46546C67u);
  put(2);
  put(uint32_t(12 + 8 + json.size() + 8 + bin.size()));
  put(uint32_t(json.size()));
  put(0x4E4F534Au);
  out += json;
  put(uint32_t(bin.size()));
  put(0x004E4942u);
  out += bin;
  return out;
}

// A GLB of the sheet whose scene is `members`, JSON text added to the
// top-level object ("nodes" and "scenes", perhaps "meshes"): written as text,
// since a JSON value of a hundred thousand nodes is slow to build.
inline std::string sheet_glb(int cells, const std::string& members) {
  const SheetBuffer sheet = sheet_buffer(cells);
  nlohmann::json gltf = gltf_with_sheet(sheet);
  if (members.find("\"meshes\"") != std::string::npos) gltf.erase("meshes");
  std::string json = gltf.dump();
  json.pop_back();
  json.reserve(json.size() + members.size() + 2);
  json += ',';
  json += members;
  json += '}';
  return glb(json, sheet.bytes);
}

// "[first, first + 1, ..., first + count - 1]"
inline std::string index_list(int first, int count) {
  std::string text = "[";
  for (int i = 0; i < count; ++i) {
    if (i) text += ',';
    text += std::to_string(first + i);
  }
  text += ']';
  return text;
}

// The header of a safetensors file as text, and its data section.
struct RawSafetensors {
  std::string header;
  std::string data;
};
inline RawSafetensors read_raw_safetensors(const std::filesystem::path& path) {
  std::string bytes(size_t(std::filesystem::file_size(path)), '\0');
  std::ifstream(path, std::ios::binary).read(bytes.data(), std::streamsize(bytes.size()));
  uint64_t length = 0;
  std::memcpy(&length, bytes.data(), 8);
  return {bytes.substr(8, size_t(length)), bytes.substr(8 + size_t(length))};
}
// The header is given in pieces, written one after another (a 100 MiB header
// is not copied to be joined).
inline void write_raw_safetensors(const std::filesystem::path& path, std::initializer_list<std::string_view> header,
                                  std::string_view data) {
  uint64_t length = 0;
  for (std::string_view piece : header) length += piece.size();
  const std::string padding((8 - (8 + length) % 8) % 8, ' ');
  length += padding.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), 8);
  for (std::string_view piece : header) out << piece;
  out << padding << data;
}

// The header of a safetensors file rewritten entry by entry: `entry` returns
// the text of each tensor's value (given the parsed one), `extra` text to add.
inline void rewrite_header_text(const std::filesystem::path& path,
                                const std::function<std::string(const std::string& name, const nlohmann::json&)>& entry,
                                const std::string& extra = "") {
  RawSafetensors raw = read_raw_safetensors(path);
  const nlohmann::json header = nlohmann::json::parse(raw.header);
  std::string text = "{";
  for (auto it = header.begin(); it != header.end(); ++it) {
    if (text.size() > 1) text += ',';
    text += nlohmann::json(it.key()).dump();
    text += ':';
    text += it.key() == "__metadata__" ? it.value().dump() : entry(it.key(), it.value());
  }
  write_raw_safetensors(path, {text, extra, "}"}, raw.data);
}

// ",\"extra.0\":{...},..." for `count` empty tensors, or as many as fit in `bytes`.
inline std::string empty_tensor_entries(int count, uint64_t bytes) {
  const std::string entry = "{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[0,0]}";
  std::string text;
  if (bytes != UINT64_MAX) text.reserve(size_t(bytes));
  for (int i = 0; i < count && text.size() + 30 + entry.size() < bytes; ++i) {
    text += ",\"extra.";
    text += std::to_string(i);
    text += "\":";
    text += entry;
  }
  return text;
}

inline std::vector<std::string> generate_args(const std::filesystem::path& model, const std::filesystem::path& out,
                                              std::vector<std::string> extra = {}) {
  std::vector<std::string> args = {"generate", "--prompt", "a tall chair", "--resolution", "4", "--out", out.string()};
  if (!model.empty()) args.insert(args.end(), {"--model", model.string()});
  args.insert(args.end(), extra.begin(), extra.end());
  return args;
}

inline std::vector<std::string> tokenize_args(const std::filesystem::path& mesh) {
  return {"tokenize", "--resolution", "4", "--mesh", mesh.string()};
}

// A copy of the built-in model with `edit` applied to it.
inline std::filesystem::path edited_model(const std::filesystem::path& folder,
                                          const std::function<void(const std::filesystem::path&)>& edit) {
  const auto model = folder / "model";
  copy_builtin_model(model);
  edit(model);
  return model;
}

}  // namespace hostile_detail

inline std::vector<HostileCase> hostile_input_cases() {
  using namespace hostile_detail;
  namespace fs = std::filesystem;
  constexpr uint64_t kGiB = uint64_t(1) << 30;
  std::vector<HostileCase> cases;
  auto model_case = [&](std::string name, std::string description, std::function<void(const fs::path&)> edit,
                        std::string expected, std::vector<std::string> extra = {}) {
    cases.push_back(hostile_case(std::move(name), std::move(description),
                     [edit, extra](const fs::path& folder) {
                       return generate_args(edited_model(folder, edit), folder / "out.glb", extra);
                     },
                     1, std::move(expected)));
  };
  auto mesh_case = [&](std::string name, std::string description, std::string file,
                       std::function<void(const fs::path&)> write, std::string expected) {
    cases.push_back(hostile_case(std::move(name), std::move(description),
                     [file, write](const fs::path& folder) {
                       write(folder / file);
                       return tokenize_args(folder / file);
                     },
                     1, std::move(expected)));
  };

  // --- crashes --------------------------------------------------------------------
  model_case("vocab_nested_deep", "clip/vocab.json: a token's id nested 100000 arrays deep",
             [](const fs::path& m) { write_text(m / "clip/vocab.json", "{\"a\": " + nested("[", "1", "]", 100000) + "}"); },
             "nested more than");
  model_case("clip_config_nested_deep", "clip/config.json: a value nested 100000 objects deep",
             [](const fs::path& m) {
               write_text(m / "clip/config.json",
                          "{\"text_config\": {\"vocab_size\": " + nested("{\"a\": ", "1", "}", 100000) + "}}");
             },
             "nested more than");
  mesh_case("glb_node_chain", "GLB: a node hierarchy that is one chain 50000 nodes deep", "chain.glb",
            [](const fs::path& p) {
              const int depth = 50000;
              std::string members = "\"nodes\":[";
              for (int i = 0; i + 1 < depth; ++i) {
                members += "{\"children\":[";
                members += std::to_string(i + 1);
                members += "]},";
              }
              members += "{\"mesh\":0}],\"scenes\":[{\"nodes\":[0]}]";
              write_text(p, sheet_glb(4, members));
            },
            "CUBEFORGE_MAX_MESH_NODES");
  mesh_case("glb_extras_nested_deep", "GLB: a node's extras nested 100000 objects deep", "extras.glb",
            [](const fs::path& p) {
              const SheetBuffer sheet = sheet_buffer(4);
              nlohmann::json g = gltf_with_sheet(sheet);
              g["scenes"] = {{{"nodes", {0}}}};
              std::string json = g.dump();
              json.pop_back();  // the closing brace: the nodes are written by hand
              json += ",\"nodes\":[{\"mesh\":0,\"extras\":" + nested("{\"a\":", "1", "}", 100000) + "}]}";
              write_text(p, glb(json, sheet.bytes));
            },
            "nested more than");
  mesh_case("gltf1_accessor_past_view", "glTF 1.0: an accessor that runs past its buffer view", "old.gltf",
            [](const fs::path& p) {
              const SheetBuffer sheet = sheet_buffer(1);
              write_text(p.parent_path() / "old.bin", sheet.bytes);
              const nlohmann::json g = {
                  {"asset", {{"version", "1.0"}}},
                  {"scene", "s"},
                  {"scenes", {{"s", {{"nodes", {"n"}}}}}},
                  {"nodes", {{"n", {{"meshes", {"m"}}}}}},
                  {"meshes", {{"m", {{"primitives", {{{"attributes", {{"POSITION", "p"}}}, {"indices", "i"}, {"mode", 4}}}}}}}},
                  {"buffers", {{"b", {{"uri", "old.bin"}, {"byteLength", sheet.bytes.size()}}}}},
                  {"bufferViews",
                   {{"v", {{"buffer", "b"}, {"byteOffset", 0}, {"byteLength", sheet.position_bytes}, {"target", 34962}}},
                    {"w", {{"buffer", "b"}, {"byteOffset", sheet.position_bytes}, {"byteLength", sheet.index_bytes},
                           {"target", 34963}}}}},
                  {"accessors",
                   {{"p", {{"bufferView", "v"}, {"byteOffset", 0}, {"byteStride", 12}, {"componentType", 5126},
                           {"count", 1000000}, {"type", "VEC3"}}},
                    {"i", {{"bufferView", "w"}, {"byteOffset", 0}, {"componentType", 5125}, {"count", sheet.indices},
                           {"type", "SCALAR"}}}}},
              };
              write_text(p, g.dump());
            },
            "glTF 1.0");
  {
    HostileCase c = hostile_case("model_truncated_while_read", "clip/model.safetensors cut to 4 KiB while the run holds it",
                  [](const fs::path& folder) {
                    return generate_args(edited_model(folder, [](const fs::path&) {}), folder / "out.glb");
                  },
                  0, "wrote");
    c.environment = {"CUBEFORGE_TEST_PAUSE_AT=text"};
    c.during = [](const std::string& output, pid_t pid, const fs::path& folder) {
      if (output.find("paused at text") == std::string::npos) return true;
      resize_sparse(folder / "model/clip/model.safetensors", 4096);
      ::kill(pid, SIGUSR1);
      return false;
    };
    cases.push_back(c);
  }
  {
    HostileCase c = hostile_case("stack_64k", "a 64 KiB stack (ulimit -s 64)",
                                 [](const fs::path& folder) { return generate_args("", folder / "out.glb"); }, 0, "wrote");
    c.stack_bytes = 64 << 10;
    cases.push_back(c);
  }

  // --- gigabytes and minutes from small or sparse files -------------------------------
  for (int instances : {10000, 100000}) {
    mesh_case("glb_instances_" + std::to_string(instances / 1000) + "k",
              "GLB: one 2048-triangle mesh instanced " + std::to_string(instances) + " times",
              "instances.glb",
              [instances](const fs::path& p) {
                std::string members = "\"nodes\":[{\"children\":" + index_list(1, instances) + "}";
                for (int i = 0; i < instances; ++i) {
                  members += ",{\"mesh\":0,\"translation\":[";
                  members += std::to_string(i % 100);
                  members += ',';
                  members += std::to_string(i / 100);
                  members += ",0]}";
                }
                members += "],\"scenes\":[{\"nodes\":[0]}]";
                write_text(p, sheet_glb(32, members));
              },
              "CUBEFORGE_MAX_MESH_NODES");
  }
  mesh_case("glb_instances_1k_of_8k", "GLB: one 8192-triangle mesh instanced 1000 times", "instances.glb",
            [](const fs::path& p) {
              std::string members = "\"nodes\":[";
              for (int i = 0; i < 1000; ++i) {
                members += i ? ",{\"mesh\":0,\"translation\":[" : "{\"mesh\":0,\"translation\":[";
                members += std::to_string(i % 100);
                members += ',';
                members += std::to_string(i / 100);
                members += ",0]}";
              }
              members += "],\"scenes\":[{\"nodes\":" + index_list(0, 1000) + "}]";
              write_text(p, sheet_glb(64, members));
            },
            "CUBEFORGE_MAX_MESH_FACES");
  mesh_case("glb_primitives_100k", "GLB: one mesh of 100000 primitives", "primitives.glb",
            [](const fs::path& p) {
              const std::string primitive = "{\"attributes\":{\"POSITION\":0},\"indices\":1}";
              std::string members = "\"meshes\":[{\"primitives\":[";
              members.reserve(100000 * (primitive.size() + 1) + 100);
              for (int i = 0; i < 100000; ++i) {
                if (i) members += ',';
                members += primitive;
              }
              members += "]}],\"nodes\":[{\"mesh\":0}],\"scenes\":[{\"nodes\":[0]}]";
              write_text(p, sheet_glb(1, members));
            },
            "CUBEFORGE_MAX_MESH_INSTANCES");
  mesh_case("stl_sparse_2g", "binary STL of 2 GiB, sparse, its triangle count matching its size", "big.stl",
            [](const fs::path& p) {
              const uint32_t triangles = uint32_t((2 * kGiB - 84) / 50);
              std::string head(80, ' ');
              head.replace(0, 6, "binary");
              head.append(reinterpret_cast<const char*>(&triangles), 4);
              write_text(p, head);
              resize_sparse(p, 84 + uint64_t(triangles) * 50);
            },
            "CUBEFORGE_MAX_MESH_BYTES");
  mesh_case("obj_sparse_2g", "OBJ: one triangle, then a sparse 2 GiB tail", "big.obj",
            [](const fs::path& p) {
              write_text(p, "v 0 0 0\nv 1 0 0\nv 0 1 0\nf 1 2 3\n");
              resize_sparse(p, 2 * kGiB);
            },
            "CUBEFORGE_MAX_MESH_BYTES");
  mesh_case("ply_sparse_2g", "binary PLY of 2 GiB, sparse, its vertex count matching its size", "big.ply",
            [](const fs::path& p) {
              const std::string head =
                  "ply\nformat binary_little_endian 1.0\nelement vertex 178956970\nproperty float x\n"
                  "property float y\nproperty float z\nelement face 1\nproperty list uchar uint vertex_indices\n"
                  "end_header\n";
              write_text(p, head);
              resize_sparse(p, head.size() + uint64_t(178956970) * 12 + 13);
            },
            "CUBEFORGE_MAX_MESH_BYTES");
  mesh_case("gltf_buffer_sparse_2g", "glTF: a 2 GiB sparse buffer file, a few bytes of it used", "big.gltf",
            [](const fs::path& p) {
              const SheetBuffer sheet = sheet_buffer(4);
              write_text(p.parent_path() / "big.bin", sheet.bytes);
              resize_sparse(p.parent_path() / "big.bin", 2 * kGiB);
              nlohmann::json g = gltf_with_sheet(sheet, "big.bin");
              g["buffers"][0]["byteLength"] = 2 * kGiB;
              g["nodes"] = {{{"mesh", 0}}};
              g["scenes"] = {{{"nodes", {0}}}};
              write_text(p, g.dump());
            },
            "CUBEFORGE_MAX_MESH_BYTES");
  mesh_case("obj_huge_polygons", "OBJ: 4 polygons of 20000 corners each", "polygons.obj",
            [](const fs::path& p) {
              const int corners = 20000;
              std::string text;
              for (int f = 0; f < 4; ++f)
                for (int i = 0; i < corners; ++i) {
                  const double a = 2 * M_PI * i / corners;
                  char line[96];
                  std::snprintf(line, sizeof line, "v %.6f %.6f %.1f\n", std::cos(a), std::sin(a), f * 0.1);
                  text += line;
                }
              for (int f = 0; f < 4; ++f) {
                text += "f";
                for (int i = 0; i < corners; ++i) {
                  text += ' ';
                  text += std::to_string(f * corners + i + 1);
                }
                text += "\n";
              }
              write_text(p, text);
            },
            "CUBEFORGE_MAX_POLYGON_CORNERS");
  mesh_case("obj_faces_across_the_grid", "OBJ: 20000 triangles, each across the whole box", "across.obj",
            [](const fs::path& p) {
              std::string text = "v -1 -1 -1\nv -1 -1 1\nv -1 1 -1\nv -1 1 1\nv 1 -1 -1\nv 1 -1 1\nv 1 1 -1\nv 1 1 1\n";
              for (int f = 0; f < 20000; ++f) text += f % 2 ? "f 1 4 6\n" : "f 2 3 8\n";
              write_text(p, text);
            },
            "CUBEFORGE_MAX_MESH_GRID_COVERAGE");
  model_case("clip_config_2p24_layers", "clip/config.json claims 2^24 layers",
             [](const fs::path& m) {
               std::ifstream in(m / "clip/config.json");
               nlohmann::json config = nlohmann::json::parse(in);
               config["text_config"]["num_hidden_layers"] = 1 << 24;
               write_text(m / "clip/config.json", config.dump());
             },
             "num_hidden_layers");
  cases.push_back(hostile_case("prompts_sparse_2g", "calibrate-kv --prompts: a sparse 2 GiB file",
                   [](const fs::path& folder) {
                     write_text(folder / "prompts.txt", "a tall chair\n");
                     resize_sparse(folder / "prompts.txt", 2 * kGiB);
                     return std::vector<std::string>{"calibrate-kv", "--prompts", (folder / "prompts.txt").string(),
                                                     "--out", (folder / "bases.safetensors").string()};
                   },
                   2, "CUBEFORGE_MAX_PROMPTS_BYTES"));
  model_case("safetensors_bad_header_sparse_4g", "shape_gpt.safetensors: a broken header, then a sparse 4 GiB tail",
             [](const fs::path& m) {
               write_raw_safetensors(m / "shape_gpt.safetensors", {"{\"broken\": "}, "");
               resize_sparse(m / "shape_gpt.safetensors", 4 * kGiB);
             },
             "not valid JSON");
  model_case("safetensors_unindexed_tail_4g", "shape_gpt.safetensors: valid, then 4 GiB no tensor indexes",
             [](const fs::path& m) {
               const auto path = m / "shape_gpt.safetensors";
               resize_sparse(path, fs::file_size(path) + 4 * kGiB);
             },
             "no tensor");

  // --- headers that cost time ------------------------------------------------------
  model_case("safetensors_50k_tensors", "shape_gpt.safetensors: 50000 more (empty) tensors in its header",
             [](const fs::path& m) {
               rewrite_header_text(m / "shape_gpt.safetensors",
                                   [](const std::string&, const nlohmann::json& v) { return v.dump(); },
                                   empty_tensor_entries(50000, UINT64_MAX));
             },
             "unexpected tensors");
  model_case("safetensors_20m_header", "shape_gpt.safetensors: a 20 MiB header of empty tensors",
             [](const fs::path& m) {
               rewrite_header_text(m / "shape_gpt.safetensors",
                                   [](const std::string&, const nlohmann::json& v) { return v.dump(); },
                                   empty_tensor_entries(INT32_MAX, uint64_t(20) << 20));
             },
             "CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES");

  // --- fields accepted twice or checked too late --------------------------------------------
  model_case("safetensors_duplicate_field", "shape_gpt.safetensors: a tensor entry with data_offsets twice",
             [](const fs::path& m) {
               rewrite_header_text(m / "shape_gpt.safetensors", [](const std::string& name, const nlohmann::json& v) {
                 std::string text = v.dump();
                 if (name == "bbox_proj.bias") {
                   text.pop_back();
                   text += ",\"data_offsets\":" + v["data_offsets"].dump() + "}";
                 }
                 return text;
               });
             },
             "twice");
  model_case("config_yaml_duplicate_key", "config.yaml: gpt_model.n_embd given twice",
             [](const fs::path& m) {
               std::ifstream in(m / "config.yaml");
               std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
               const size_t at = text.find("  n_embd:");
               text.insert(at, "  n_embd: 64\n");
               write_text(m / "config.yaml", text);
             },
             "twice");
  model_case("safetensors_overlap_behind_empty", "shape_gpt.safetensors: two tensors overlap, an empty one between them",
             [](const fs::path& m) {
               // bbox_proj.bias holds [0, 512), bbox_proj.weight [512, 2048): the weight is
               // moved to start inside the bias, and an empty tensor sits between the two.
               rewrite_header_text(m / "shape_gpt.safetensors",
                                   [](const std::string& name, const nlohmann::json& v) {
                                     nlohmann::json entry = v;
                                     if (name == "bbox_proj.weight") entry["data_offsets"] = {256, 1792};
                                     return entry.dump();
                                   },
                                   ",\"bbox_proj.empty\":{\"dtype\":\"F32\",\"shape\":[0],\"data_offsets\":[100,100]}");
             },
             "overlap");
  cases.push_back(hostile_case("bbox_3e38", "generate --bbox 3e38 1 1",
                   [](const fs::path& folder) { return generate_args("", folder / "out.glb", {"--bbox", "3e38", "1", "1"}); },
                   105, "--bbox: must be a number from"));
  return cases;
}

}  // namespace cubeforge::testing
