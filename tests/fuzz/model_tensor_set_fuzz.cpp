// libFuzzer target: the model-level configuration inference and tensor-set
// check (where one stray "...blocks.999999.x" name once cost 11 GB). The input
// is a JSON object of tensor names to shapes, {"name": [dims]} for F32 or
// {"name": {"dtype": "F16", "shape": [dims]}}; the harness lays the tensors out
// as a real safetensors file (zero-filled data, at most 1 MiB), then infers
// the GPT and shape-tokenizer configurations and checks the file against
// them, as loading a model folder does. Every tensor with a ".scales" sibling
// also goes through the quantised-matrix checks of a `quantize` folder. The
// bounded run's -rss_limit_mb and -timeout catch any check that grows with a
// claimed count.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "inference/model/config.h"
#include "inference/model/weight_formats.h"

namespace {

using namespace cubeforge;

constexpr uint64_t kMaxDataBytes = 1 << 20;

// The safetensors image for the described tensors, or nothing when the
// description is not one (the parser's own validation is fuzzed elsewhere).
bool build_image(const nlohmann::json& description, std::vector<std::byte>& image) {
  if (!description.is_object()) return false;
  nlohmann::json header = nlohmann::json::object();
  uint64_t offset = 0;
  for (auto it = description.begin(); it != description.end(); ++it) {
    const nlohmann::json* shape = &it.value();
    std::string dtype = "F32";
    if (it.value().is_object()) {
      if (!it.value().contains("shape") || !it.value().contains("dtype") || !it.value()["dtype"].is_string())
        return false;
      shape = &it.value()["shape"];
      dtype = it.value()["dtype"].get<std::string>();
    }
    if (!shape->is_array() || shape->size() > 4) return false;
    const auto parsed = dtype_from_name(dtype);
    if (!parsed) return false;
    uint64_t bytes = dtype_size(*parsed);
    for (const auto& d : *shape) {
      if (!d.is_number_unsigned() || d.get<uint64_t>() > kMaxDataBytes) return false;
      bytes *= d.get<uint64_t>();
      if (bytes > kMaxDataBytes) return false;
    }
    if (offset + bytes > kMaxDataBytes) return false;
    header[it.key()] = {{"dtype", dtype}, {"shape", *shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  const std::string text = header.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  image.assign(8 + text.size() + offset, std::byte{0});
  const uint64_t length = text.size();
  for (int i = 0; i < 8; ++i) image[size_t(i)] = std::byte((length >> (8 * i)) & 0xff);
  std::memcpy(image.data() + 8, text.data(), text.size());
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const auto description = nlohmann::json::parse(data, data + size, nullptr, /*allow_exceptions=*/false);
  std::vector<std::byte> image;
  if (description.is_discarded() || !build_image(description, image)) return 0;
  auto file = SafetensorsFile::from_bytes(std::move(image), "fuzz.safetensors");
  if (!file.ok()) return 0;
  if (auto gpt = infer_gpt_config(*file); gpt.ok()) {
    (void)check_gpt_config(*gpt, *file, "the inferred configuration").ok();
    (void)check_tensor_set(*file, expected_gpt_tensors(*gpt)).ok();
  }
  std::vector<std::string> quantized;
  for (const TensorEntry& e : file->entries())
    if (holds_quantized(*file, e.name)) quantized.push_back(e.name);
  for (const std::string& name : quantized) (void)bind_quantized(*file, name).ok();
  if (auto gpt = infer_gpt_config(*file); gpt.ok() && !quantized.empty()) {
    if (auto expected = expected_with_quantized_forms(*file, expected_gpt_tensors(*gpt), quantized); expected.ok())
      (void)check_tensor_set(*file, *expected).ok();
  }
  if (auto shape = infer_shape_config(*file); shape.ok()) {
    (void)check_shape_config(*shape, *file, "the inferred configuration").ok();
  }
  return 0;
}
