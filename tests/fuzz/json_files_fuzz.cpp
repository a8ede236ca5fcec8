// libFuzzer target: the JSON that model folders hold, structure-aware. The
// input is one JSON text, which json_structure_mutator.h nests, repeats,
// pushes to the edges of its numbers and gives keys twice. It is read as
// every JSON reader of a model folder reads it: strictly (inference/core/
// strict_json.h), as clip/config.json, as clip/vocab.json, and as the header
// of a safetensors file whose data section is as long as the header's largest
// offset says. Nothing may crash or hang; what the strict reader accepts is
// what nlohmann reads too, nested at most kMaxJsonDepth; an accepted
// safetensors header's tensors tile its data section.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "inference/core/strict_json.h"
#include "inference/tensor/safetensors.h"
#include "inference/text/clip_text_encoder.h"
#include "inference/text/clip_tokenizer.h"
#include "tests/fuzz/json_structure_mutator.h"

namespace {

int depth_of(const nlohmann::json& root) {
  int deepest = 0;
  std::vector<std::pair<const nlohmann::json*, int>> pending = {{&root, 0}};
  while (!pending.empty()) {
    const auto [value, depth] = pending.back();
    pending.pop_back();
    if (!value->is_structured()) continue;
    deepest = std::max(deepest, depth + 1);
    for (const auto& child : *value) pending.push_back({&child, depth + 1});
  }
  return deepest;
}

}  // namespace

extern "C" size_t LLVMFuzzerCustomMutator(uint8_t* data, size_t size, size_t max_size, unsigned seed) {
  return cubeforge::fuzz::mutate_json(data, size, max_size, seed, 0);
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto strict = cubeforge::parse_json_strictly(text);
  const nlohmann::json loose = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (strict.ok()) {
    if (loose.is_discarded() || *strict != loose || depth_of(*strict) > cubeforge::kMaxJsonDepth) std::abort();
    (void)cubeforge::json_excerpt(*strict);
  }
  (void)cubeforge::ClipTextConfig::from_json(text, "fuzz/config.json");
  (void)cubeforge::ClipTokenizer::from_strings(text, "#version: 0.2\na b\n", "fuzz/vocab.json", "fuzz/merges.txt");

  // As a safetensors header, with the data section its largest offset asks for (bounded).
  uint64_t data_bytes = 0;
  if (!loose.is_discarded() && loose.is_object() && depth_of(loose) <= 4)
    for (const auto& [name, entry] : loose.items())
      if (entry.is_object() && entry.contains("data_offsets") && entry["data_offsets"].is_array() &&
          entry["data_offsets"].size() == 2 && entry["data_offsets"][1].is_number_unsigned())
        data_bytes = std::max<uint64_t>(data_bytes, entry["data_offsets"][1].get<uint64_t>());
  if (data_bytes > (1u << 16)) data_bytes = 0;
  std::vector<std::byte> image(8 + size + size_t(data_bytes), std::byte{0});
  const uint64_t length = size;
  std::memcpy(image.data(), &length, 8);
  std::memcpy(image.data() + 8, data, size);
  auto file = cubeforge::SafetensorsFile::from_bytes(std::move(image), "fuzz.safetensors");
  if (file.ok()) {
    uint64_t covered = 0;
    for (const auto& entry : file->entries()) covered += entry.end - entry.begin;
    if (covered != data_bytes) std::abort();
    for (const auto& entry : file->entries()) (void)file->get(entry.name);
  }
  return 0;
}
