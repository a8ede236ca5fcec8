// Weight formats of the GPT: converting when the model loads gives the same
// numbers, bit for bit, as loading a file that holds the converted tensors
// (a bf16 file, or the folder `quantize` writes); quantised files are checked
// like any other; decode byte counts include scales and offsets.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>

#include "inference/cpu/quantize.h"
#include "inference/cpu_backend/gpt_session.h"
#include "inference/model/random_weights.h"
#include "inference/model/weight_formats.h"
#include "tests/support/small_gpt.h"

namespace cubeforge {
namespace {

SafetensorsFile source_file() {
  auto file = random_weights_file(expected_gpt_tensors(testing::small_gpt_config()), 5, DType::kF32, "source.safetensors");
  EXPECT_TRUE(file.ok()) << file.error().to_string();
  return std::move(*file);
}

// Prefill (cond + BOS) and three decode steps with guidance: every step's logits.
std::vector<float> run(const DualStreamGpt& model) {
  const GptConfig& c = model.config();
  std::vector<float> text(size_t(6 * c.text_width));
  for (size_t i = 0; i < text.size(); ++i) text[i] = float(std::sin(double(i)));
  auto cond = model.project_condition(text, nullptr);
  EXPECT_TRUE(cond.ok());
  std::vector<float> rows = *cond;
  rows.insert(rows.end(), cond->begin(), cond->end());
  GptSession session(model, 2, model.condition_length(6), 8, AttentionMode::kCausal);
  std::vector<float> logits(size_t(2 * c.vocab_size())), all;
  std::vector<float> embedding(size_t(2 * c.width));
  for (int step = 0; step < 4; ++step) {
    auto row = model.token_embedding(step == 0 ? c.bos_id() : step * 7);
    std::copy(row.begin(), row.end(), embedding.begin());
    std::copy(row.begin(), row.end(), embedding.begin() + c.width);
    const Status s = step == 0 ? session.prefill(rows, embedding, 1, logits) : session.decode(embedding, logits);
    EXPECT_TRUE(s.ok()) << s.error().to_string();
    all.insert(all.end(), logits.begin(), logits.end());
  }
  return all;
}

DualStreamGpt load(SafetensorsFile file, const WeightOptions& options = {}) {
  auto model = DualStreamGpt::from_file(std::move(file), testing::small_gpt_config(), options);
  EXPECT_TRUE(model.ok()) << model.error().to_string();
  return std::move(*model);
}

SafetensorsFile image_file(const std::vector<TensorToWrite>& tensors, const std::string& name) {
  auto image = safetensors_image(tensors);
  EXPECT_TRUE(image.ok()) << image.error().to_string();
  auto file = SafetensorsFile::from_bytes(std::move(*image), name);
  EXPECT_TRUE(file.ok()) << file.error().to_string();
  return std::move(*file);
}

TEST(WeightFormats, Bf16AtLoadEqualsABf16File) {
  const SafetensorsFile source = source_file();
  const auto decode = DualStreamGpt::decode_matrix_names(testing::small_gpt_config());
  std::vector<std::vector<uint16_t>> rounded;
  std::vector<TensorToWrite> tensors;
  for (const TensorEntry& e : source.entries()) {
    auto view = source.get(e.name);
    if (std::find(decode.begin(), decode.end(), e.name) == decode.end()) {
      tensors.push_back({e.name, e.dtype, e.shape, {view->data, view->byte_size()}});
      continue;
    }
    const auto* values = reinterpret_cast<const float*>(view->data);
    auto& bits = rounded.emplace_back(size_t(view->element_count()));
    for (size_t i = 0; i < bits.size(); ++i) bits[i] = f32_to_bf16(values[i]);
    tensors.push_back({e.name, DType::kBF16, e.shape, std::as_bytes(std::span(bits))});
  }
  const auto converted = run(load(source_file(), {WeightFormat::kBF16}));
  const auto from_file = run(load(image_file(tensors, "bf16.safetensors")));
  ASSERT_EQ(converted.size(), from_file.size());
  EXPECT_EQ(std::memcmp(converted.data(), from_file.data(), converted.size() * 4), 0);
  EXPECT_NE(run(load(source_file())), converted);  // bf16 changed something
}

TEST(WeightFormats, QuantizedFileEqualsConversionAtLoad) {
  const GptConfig config = testing::small_gpt_config();
  const auto decode = DualStreamGpt::decode_matrix_names(config);
  for (const WeightOptions options :
       {WeightOptions{WeightFormat::kQ8, 32}, WeightOptions{WeightFormat::kQ4, 32}, WeightOptions{WeightFormat::kQ4, 64}}) {
    const SafetensorsFile source = source_file();
    auto converted = convert_matrices(source, decode, options);
    ASSERT_TRUE(converted.ok()) << converted.error().to_string();
    // Every decode matrix is converted, nothing else.
    for (const auto& name : decode) EXPECT_TRUE(holds_quantized(*converted, name)) << name;
    EXPECT_FALSE(converted->contains("text_proj.weight"));
    const DualStreamGpt at_load = load(source_file(), options);
    const DualStreamGpt from_folder = load(image_file(tensors_with_conversions(source, *converted), "q.safetensors"));
    const auto a = run(at_load), b = run(from_folder);
    EXPECT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0) << weight_format_name(options.format);
    // Decode bytes: codes, and two bytes per scale and per offset.
    size_t expected_bytes = 0;
    for (const auto& name : decode) {
      const auto shape = source.get(name)->shape();
      const int64_t n = shape[0], k = shape[1];
      const int64_t group = options.format == WeightFormat::kQ8 ? 32 : options.q4_group;
      expected_bytes += size_t(n * (options.format == WeightFormat::kQ8 ? k : k / 2)) +
                        size_t(n * (k / group)) * (options.format == WeightFormat::kQ8 ? 2 : 4);
    }
    EXPECT_EQ(at_load.decode_weight_bytes(), expected_bytes);
    EXPECT_EQ(from_folder.decode_weight_bytes(), expected_bytes);
  }
}

// A quantised file with one thing changed: the tensors of `form` with
// `edit` applied to the named tensor's entry and bytes.
Result<DualStreamGpt> load_edited(WeightFormat format, const std::string& tensor,
                                  const std::function<void(TensorToWrite&, std::vector<std::byte>&)>& edit) {
  const SafetensorsFile source = source_file();
  auto converted = convert_matrices(source, DualStreamGpt::decode_matrix_names(testing::small_gpt_config()), {format, 32});
  EXPECT_TRUE(converted.ok());
  auto tensors = tensors_with_conversions(source, *converted);
  std::vector<std::byte> bytes;
  for (auto it = tensors.begin(); it != tensors.end(); ++it)
    if (it->name == tensor) {
      bytes.assign(it->data.begin(), it->data.end());
      edit(*it, bytes);
      if (bytes.empty()) {
        tensors.erase(it);
      } else {
        it->data = bytes;
      }
      break;
    }
  return DualStreamGpt::from_file(image_file(tensors, "edited.safetensors"), testing::small_gpt_config());
}

TEST(WeightFormats, QuantizedFilesAreChecked) {
  const std::string matrix = "transformer.single_blocks.0.mlp.down_proj.weight";
  auto expect_error = [](const Result<DualStreamGpt>& r, const std::string& needle, const char* what) {
    ASSERT_FALSE(r.ok()) << what;
    EXPECT_NE(r.error().to_string().find(needle), std::string::npos) << what << ": " << r.error().to_string();
  };
  // A scale that is not finite.
  expect_error(load_edited(WeightFormat::kQ8, matrix + ".scales",
                           [](TensorToWrite&, std::vector<std::byte>& b) { b[6] = std::byte{0x00}, b[7] = std::byte{0x7C}; }),
               matrix + ".scales", "infinite scale");
  // An offset that is NaN.
  expect_error(load_edited(WeightFormat::kQ4, matrix + ".offsets",
                           [](TensorToWrite&, std::vector<std::byte>& b) { b[0] = std::byte{0x01}, b[1] = std::byte{0x7E}; }),
               matrix + ".offsets", "NaN offset");
  // Q4 without its offsets.
  expect_error(load_edited(WeightFormat::kQ4, matrix + ".offsets", [](TensorToWrite&, std::vector<std::byte>& b) { b.clear(); }),
               "missing tensors: " + matrix + ".offsets", "no offsets");
  // Codes of a dtype no format has.
  expect_error(load_edited(WeightFormat::kQ8, matrix,
                           [](TensorToWrite& t, std::vector<std::byte>& b) {
                             t.dtype = DType::kU8;
                             t.shape[1] /= 2;
                             b.resize(b.size() / 2);
                           }),
               matrix, "Q8 shape with U8 codes");  // U8 codes claim Q4, whose offsets are missing
  expect_error(load_edited(WeightFormat::kQ8, matrix,
                           [](TensorToWrite& t, std::vector<std::byte>& b) { t.dtype = DType::kI16; t.shape[1] /= 2; (void)b; }),
               "Q8 codes are I8", "I16 codes");
  // Scales for groups of 16: no format has them.
  expect_error(load_edited(WeightFormat::kQ8, matrix + ".scales",
                           [](TensorToWrite& t, std::vector<std::byte>& b) {
                             t.shape[1] *= 2;
                             b.resize(b.size() * 2, std::byte{0});
                           }),
               "groups of 16", "group of 16");
  // Codes of the wrong shape.
  expect_error(load_edited(WeightFormat::kQ8, matrix,
                           [](TensorToWrite& t, std::vector<std::byte>& b) {
                             t.shape[0] -= 1;
                             b.resize(size_t(t.shape[0] * t.shape[1]));
                           }),
               matrix + " is [", "short codes");
}

// Scales are read in place as F16: a hand-made file that puts them at an odd
// byte is refused by name (this project's writer aligns every tensor).
TEST(WeightFormats, MisalignedScalesAreRefused) {
  std::string header = R"({"pad":{"dtype":"U8","shape":[1],"data_offsets":[64,65]},)"
                       R"("w":{"dtype":"I8","shape":[2,32],"data_offsets":[0,64]},)"
                       R"("w.scales":{"dtype":"F16","shape":[2,1],"data_offsets":[65,69]}})";
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  std::vector<std::byte> bytes(8 + header.size() + 69, std::byte{0});
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = std::byte((header.size() >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  auto file = SafetensorsFile::from_bytes(std::move(bytes), "hand-made.safetensors");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto bound = bind_quantized(*file, "w");
  ASSERT_FALSE(bound.ok());
  const std::string message = bound.error().to_string();
  EXPECT_NE(message.find("tensor 'w.scales'"), std::string::npos) << message;
  EXPECT_NE(message.find("2-byte elements"), std::string::npos) << message;
}

TEST(WeightFormats, NonFiniteWeightsAreNotQuantised) {
  const SafetensorsFile source = source_file();
  std::vector<TensorToWrite> tensors;
  std::vector<float> broken;
  for (const TensorEntry& e : source.entries()) {
    auto view = source.get(e.name);
    tensors.push_back({e.name, e.dtype, e.shape, {view->data, view->byte_size()}});
    if (e.name == "lm_head.weight") {
      broken.assign(reinterpret_cast<const float*>(view->data), reinterpret_cast<const float*>(view->data) + view->element_count());
      broken[100] = INFINITY;
      tensors.back().data = std::as_bytes(std::span(broken));
    }
  }
  auto model = DualStreamGpt::from_file(image_file(tensors, "inf.safetensors"), testing::small_gpt_config(), {WeightFormat::kQ8});
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.error().to_string().find("lm_head.weight"), std::string::npos) << model.error().to_string();
}

}  // namespace
}  // namespace cubeforge
