// The safetensors reader: round trips, and hand-made corrupt files that must
// each be rejected with an error naming the file and, where there is one, the
// tensor.
#include "inference/tensor/safetensors.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cstring>
#include <filesystem>

#include "inference/core/file_io.h"
#include "tests/support/hostile_numbers.h"

namespace cubeforge {
namespace {

std::vector<std::byte> image(const std::string& header, size_t data_bytes, uint64_t declared_length = UINT64_MAX) {
  const uint64_t length = declared_length == UINT64_MAX ? header.size() : declared_length;
  std::vector<std::byte> bytes(8 + header.size() + data_bytes, std::byte{0});
  for (int i = 0; i < 8; ++i) bytes[size_t(i)] = std::byte((length >> (8 * i)) & 0xff);
  std::memcpy(bytes.data() + 8, header.data(), header.size());
  return bytes;
}

Error rejected(std::vector<std::byte> bytes) {
  auto file = SafetensorsFile::from_bytes(std::move(bytes), "model.safetensors");
  EXPECT_FALSE(file.ok());
  if (file.ok()) return Error{};
  EXPECT_EQ(file.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(file.error().message.find("model.safetensors"), std::string::npos) << file.error().message;
  return file.error();
}

bool mentions(const Error& e, const std::string& text) { return e.message.find(text) != std::string::npos; }

TEST(Safetensors, RoundTripThroughAtomicWriter) {
  std::vector<float> a = {1.f, -2.f, 3.5f, 0.25f, 8.f, 9.f};
  std::vector<uint16_t> b = {f32_to_bf16(1.5f), f32_to_bf16(-3.f)};
  std::vector<int64_t> ids = {7, 11, 13};
  std::vector<TensorToWrite> tensors = {
      {"layer.a", DType::kF32, {2, 3}, std::as_bytes(std::span<const float>(a))},
      {"layer.b", DType::kBF16, {2}, std::as_bytes(std::span<const uint16_t>(b))},
      {"ids", DType::kI64, {1, 3}, std::as_bytes(std::span<const int64_t>(ids))},
  };
  const auto path = std::filesystem::temp_directory_path() / "cubeforge-roundtrip.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors, {{"note", "hello"}}).ok());
  auto file = SafetensorsFile::open(path);
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  EXPECT_EQ(file->metadata().at("note"), "hello");
  auto read_a = file->read_f32("layer.a", std::vector<int64_t>{2, 3});
  ASSERT_TRUE(read_a.ok());
  EXPECT_EQ(*read_a, a);
  auto read_b = file->read_f32("layer.b");
  ASSERT_TRUE(read_b.ok());
  EXPECT_EQ(*read_b, (std::vector<float>{1.5f, -3.f}));
  auto read_ids = file->read_i64("ids");
  ASSERT_TRUE(read_ids.ok());
  EXPECT_EQ(*read_ids, ids);
  auto wrong_shape = file->read_f32("layer.a", std::vector<int64_t>{3, 2});
  ASSERT_FALSE(wrong_shape.ok());
  EXPECT_TRUE(mentions(wrong_shape.error(), "layer.a")) << wrong_shape.error().message;
  auto missing = file->get("layer.c");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(missing.error(), "layer.c"));
  std::filesystem::remove(path);
}

TEST(Safetensors, WriterRefusesDuplicatesAndWrongSizes) {
  std::vector<float> a(4);
  std::vector<TensorToWrite> dup = {{"x", DType::kF32, {4}, std::as_bytes(std::span<const float>(a))},
                                    {"x", DType::kF32, {4}, std::as_bytes(std::span<const float>(a))}};
  const auto path = std::filesystem::temp_directory_path() / "cubeforge-dup.safetensors";
  EXPECT_FALSE(write_safetensors(path, dup).ok());
  std::vector<TensorToWrite> wrong = {{"x", DType::kF32, {5}, std::as_bytes(std::span<const float>(a))}};
  EXPECT_FALSE(write_safetensors(path, wrong).ok());
  EXPECT_FALSE(std::filesystem::exists(path));
}

TEST(Safetensors, ImageStartsItsDataOnA64ByteBoundary) {
  const std::vector<uint16_t> a = {1, 2, 3};  // 6 bytes: the next tensor starts unaligned
  const std::vector<float> b = {0.5f, -1.f};
  const std::vector<TensorToWrite> tensors = {{"a", DType::kF16, {3}, std::as_bytes(std::span<const uint16_t>(a))},
                                              {"b", DType::kF32, {2}, std::as_bytes(std::span<const float>(b))}};
  auto image = safetensors_image(tensors, {{"note", "x"}});
  ASSERT_TRUE(image.ok()) << image.error().to_string();
  uint64_t length = 0;
  for (int i = 0; i < 8; ++i) length |= uint64_t((*image)[size_t(i)]) << (8 * i);
  EXPECT_EQ((8 + length) % 64, 0u);
  EXPECT_EQ(image->size(), 8 + length + 6 + 8);
  EXPECT_EQ(char((*image)[size_t(8 + length - 1)]), ' ');  // padded with spaces
  auto header = parse_safetensors_header(*image, "image");
  ASSERT_TRUE(header.ok()) << header.error().to_string();
  EXPECT_EQ(header->data_offset, 8 + length);
  auto file = SafetensorsFile::from_bytes(std::move(image).value(), "image");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  auto read_b = file->read_f32("b");
  ASSERT_TRUE(read_b.ok());
  EXPECT_EQ(*read_b, b);
  EXPECT_EQ(file->metadata().at("note"), "x");
}

TEST(Safetensors, WriterPlacesEveryTensorOnAMultipleOfItsElementSize) {
  const std::vector<uint16_t> a = {1, 2, 3};  // 6 bytes
  const std::vector<int8_t> b = {-5};         // 1 byte
  const std::vector<float> c = {0.5f, -1.f};
  const std::vector<double> d = {2.25};
  const std::vector<TensorToWrite> tensors = {{"a", DType::kF16, {3}, std::as_bytes(std::span<const uint16_t>(a))},
                                              {"b", DType::kI8, {1}, std::as_bytes(std::span<const int8_t>(b))},
                                              {"c", DType::kF32, {2}, std::as_bytes(std::span<const float>(c))},
                                              {"d", DType::kF64, {1}, std::as_bytes(std::span<const double>(d))}};
  auto bytes = safetensors_image(tensors, {});
  ASSERT_TRUE(bytes.ok()) << bytes.error().to_string();
  const auto path = std::filesystem::temp_directory_path() / "cubeforge-aligned.safetensors";
  ASSERT_TRUE(write_safetensors(path, tensors).ok());
  auto written = read_file_bytes(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(written.ok());
  EXPECT_EQ(*written, *bytes);  // the streaming writer puts each tensor where the layout says
  auto file = SafetensorsFile::from_bytes(std::move(bytes).value(), "image");
  ASSERT_TRUE(file.ok()) << file.error().to_string();
  for (const TensorEntry& e : file->entries()) {
    EXPECT_EQ(e.begin % dtype_size(e.dtype), 0u) << e.name;
    auto view = file->get(e.name);
    ASSERT_TRUE(view.ok());
    EXPECT_TRUE(check_element_aligned(*view, "image").ok()) << e.name;
  }
  EXPECT_EQ(*file->read_f32("a"), (std::vector<float>{f16_to_f32(1), f16_to_f32(2), f16_to_f32(3)}));
  EXPECT_EQ(*file->read_f32("b"), (std::vector<float>{-5.f}));
  EXPECT_EQ(*file->read_f32("c"), c);
  EXPECT_EQ(*file->read_f32("d"), (std::vector<float>{2.25f}));
}

TEST(Safetensors, AMisalignedTensorIsNamedWhereItWouldBeReadInPlace) {
  std::string header = R"({"pad":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                       R"("w":{"dtype":"F16","shape":[2],"data_offsets":[1,5]}})";
  while ((8 + header.size()) % 8 != 0) header.push_back(' ');
  auto file = SafetensorsFile::from_bytes(image(header, 5), "model.safetensors");
  ASSERT_TRUE(file.ok()) << file.error().to_string();  // readable: read_f32 copies
  EXPECT_EQ(*file->read_f32("w"), (std::vector<float>{0.f, 0.f}));
  auto view = file->get("w");
  ASSERT_TRUE(view.ok());
  ASSERT_NE(reinterpret_cast<uintptr_t>(view->data) % 2, 0u);
  Status aligned = check_element_aligned(*view, "model.safetensors");
  ASSERT_FALSE(aligned.ok());
  EXPECT_TRUE(mentions(aligned.error(), "'model.safetensors'") && mentions(aligned.error(), "tensor 'w'"));
  EXPECT_TRUE(mentions(aligned.error(), "2-byte elements")) << aligned.error().message;
}

TEST(Safetensors, TruncatedBeforeHeaderLength) {
  Error e = rejected(std::vector<std::byte>(5));
  EXPECT_TRUE(mentions(e, "shorter than the 8-byte header length"));
}

TEST(Safetensors, HugeHeaderLength) {
  Error e = rejected(image("{}", 0, uint64_t(1) << 40));
  EXPECT_TRUE(mentions(e, "exceeds the format's 100 MiB limit"));
}

TEST(Safetensors, HeaderLengthPastEndOfFile) {
  Error e = rejected(image("{}", 0, 64));
  EXPECT_TRUE(mentions(e, "runs past the end"));
}

TEST(Safetensors, BadJson) {
  Error e = rejected(image("{\"a\": {\"dtype\": \"F32\",", 0));
  EXPECT_TRUE(mentions(e, "not valid JSON"));
  e = rejected(image("[1, 2]", 0));
  EXPECT_TRUE(mentions(e, "not an object"));
  e = rejected(image(std::string(64, '[') + std::string(64, ']'), 0));
  EXPECT_TRUE(mentions(e, "not an object"));
  // Read as it streams: nesting anywhere is a value of the wrong kind, named where it appears.
  e = rejected(image(R"({"a":{"shape":)" + std::string(100000, '[') + std::string(100000, ']') + "}}", 0));
  EXPECT_TRUE(mentions(e, "tensor 'a': shape holds a value that is not a non-negative integer")) << e.message;
}

TEST(Safetensors, TruncatedData) {
  Error e = rejected(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  EXPECT_TRUE(mentions(e, "tensor 'w'"));
  EXPECT_TRUE(mentions(e, "truncated"));
}

TEST(Safetensors, OverlappingRanges) {
  Error e = rejected(image(
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
      24));
  EXPECT_TRUE(mentions(e, "overlap"));
  EXPECT_TRUE(mentions(e, "'a'") && mentions(e, "'b'"));
}

TEST(Safetensors, WrongDtype) {
  Error e = rejected(image(R"({"w":{"dtype":"Q4_K","shape":[4],"data_offsets":[0,16]}})", 16));
  EXPECT_TRUE(mentions(e, "unsupported dtype 'Q4_K'"));
  EXPECT_TRUE(mentions(e, "tensor 'w'"));
}

TEST(Safetensors, ShapeDisagreesWithByteRange) {
  Error e = rejected(image(R"({"w":{"dtype":"BF16","shape":[3,4],"data_offsets":[0,16]}})", 16));
  EXPECT_TRUE(mentions(e, "[3, 4]"));
  EXPECT_TRUE(mentions(e, "needs 24 bytes"));
}

TEST(Safetensors, MalformedEntries) {
  EXPECT_TRUE(mentions(rejected(image(R"({"w":{"dtype":"F32","shape":[-4],"data_offsets":[0,16]}})", 16)),
                       "non-negative"));
  EXPECT_TRUE(mentions(rejected(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[16,0]}})", 16)),
                       "end before they begin"));
  EXPECT_TRUE(mentions(rejected(image(R"({"w":{"dtype":"F32","shape":[4]}})", 16)), "exactly dtype"));
  EXPECT_TRUE(mentions(rejected(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 16)),
                       "appears twice"));
  EXPECT_TRUE(mentions(rejected(image(R"({"__metadata__":{"a":1}})", 0)), "not a string"));
  EXPECT_TRUE(mentions(rejected(image(R"({"w":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,16]}})", 16)),
                       "too large"));
}

// A JSON object holds a key once: a field given twice in one tensor's entry
// was taken with the last value and accepted.
TEST(Safetensors, AFieldGivenTwiceIsRefused) {
  Error e = rejected(image(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16],"data_offsets":[0,16]}})", 16));
  EXPECT_TRUE(mentions(e, "key 'data_offsets' appears twice in w")) << e.message;
  e = rejected(image(R"({"__metadata__":{"a":"1","a":"2"}})", 0));
  EXPECT_TRUE(mentions(e, "key 'a' appears twice in __metadata__")) << e.message;
}

// Tensors must tile the data section: an overlap was missed when an empty
// tensor sat between the two, and gaps and tails were read and accepted.
TEST(Safetensors, RangesMustTileTheDataSection) {
  Error e = rejected(image(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},)"
                           R"("e":{"dtype":"F32","shape":[0],"data_offsets":[4,4]},)"
                           R"("b":{"dtype":"F32","shape":[4],"data_offsets":[8,24]}})",
                           24));
  EXPECT_TRUE(mentions(e, "tensors 'a' [0, 16) and 'e' [4, 4) overlap")) << e.message;
  e = rejected(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                     R"("b":{"dtype":"F32","shape":[2],"data_offsets":[16,24]}})",
                     24));
  EXPECT_TRUE(mentions(e, "bytes [8, 16) of the data section, before tensor 'b', belong to no tensor")) << e.message;
  e = rejected(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", 4096));
  EXPECT_TRUE(mentions(e, "last 4088 bytes (from byte 8) belong to no tensor")) << e.message;
  // Empty tensors where one ends and the next begins (or at the end) are fine.
  auto fine = SafetensorsFile::from_bytes(image(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                R"("e":{"dtype":"F32","shape":[0],"data_offsets":[8,8]},)"
                                                R"("z":{"dtype":"F32","shape":[0,3],"data_offsets":[8,8]}})",
                                                8),
                                          "model.safetensors");
  EXPECT_TRUE(fine.ok()) << fine.error().to_string();
}

TEST(Safetensors, AHeaderOverItsBudgetIsRefusedBeforeItIsRead) {
  ::setenv("CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES", "64", 1);
  auto file = SafetensorsFile::from_bytes(image(std::string(65, ' '), 0), "model.safetensors");
  ::unsetenv("CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES");
  ASSERT_FALSE(file.ok());
  EXPECT_TRUE(mentions(file.error(), "'model.safetensors': its safetensors header needs 65 bytes, over the budget of 64 "
                                     "(CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES)"))
      << file.error().message;
}

// Weights are read, never mapped: a file cut short while a model holds it
// gave SIGBUS at the next touch of a lost page. Read on demand, the cut shows
// as an error at the read; read at open, the bytes are the model's own.
TEST(Safetensors, AFileCutShortAfterOpeningIsAnErrorNotACrash) {
  std::vector<float> a(1024, 1.f), b(1024, 2.f);
  std::vector<TensorToWrite> tensors = {{"a", DType::kF32, {1024}, std::as_bytes(std::span<const float>(a))},
                                        {"b", DType::kF32, {1024}, std::as_bytes(std::span<const float>(b))}};
  const auto path = std::filesystem::temp_directory_path() / ("cubeforge-cut-" + std::to_string(::getpid()) + ".safetensors");
  ASSERT_TRUE(write_safetensors(path, tensors).ok());
  auto on_demand = SafetensorsFile::open(path);
  auto whole = SafetensorsFile::open(path, SafetensorsFile::Residence::kHugePages);
  ASSERT_TRUE(on_demand.ok() && whole.ok());
  auto first = on_demand->read_f32("a");  // read before the cut: kept
  std::filesystem::resize_file(path, 4096);
  auto second = on_demand->get("b");
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.error().code, ErrorCode::kIo);
  EXPECT_TRUE(mentions(second.error(), "changed while cubeforge read it")) << second.error().message;
  EXPECT_EQ(*first, a);
  EXPECT_EQ(*on_demand->read_f32("a"), a);
  EXPECT_EQ(*whole->read_f32("b"), b);
  std::filesystem::remove(path);
}

// Every number of the header is a whole number kept as int64 or uint64: the
// class of values that are none (or do not fit) is refused wherever it stands.
TEST(Safetensors, HeaderNumbersMustBeWholeAndFit) {
  for (const auto& number : testing::not_whole_numbers_that_fit())
    for (const char* header : {R"({"w":{"dtype":"F32","shape":[N],"data_offsets":[0,16]}})",
                               R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[N,16]}})",
                               R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,N]}})"}) {
      std::string text = header;
      text.replace(text.find('N'), 1, number.text);
      const Error e = rejected(image(text, 16));
      EXPECT_FALSE(e.message.empty()) << text;
    }
}

TEST(Safetensors, MissingFileIsNotFound) {
  auto file = SafetensorsFile::open("/nonexistent/cubeforge/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.error().code, ErrorCode::kNotFound);
  EXPECT_TRUE(mentions(file.error(), "model.safetensors"));
}

TEST(AtomicWrite, UnwritableDirectoryLeavesNothing) {
  Status s = write_file_atomically("/nonexistent-dir/out.bin", std::string_view("data"));
  ASSERT_FALSE(s.ok());
  EXPECT_TRUE(mentions(s.error(), "/nonexistent-dir/out.bin"));
  const auto dir = std::filesystem::temp_directory_path() / "cubeforge-atomic";
  std::filesystem::create_directories(dir);
  const auto path = dir / "file.txt";
  ASSERT_TRUE(write_file_atomically(path, std::string_view("first")).ok());
  // A writer that fails midway keeps the old contents and leaves no temporary.
  Status failed = write_file_atomically(path, [](const ByteSink& sink) -> Status {
    CUBEFORGE_TRY(sink(std::as_bytes(std::span<const char>("partial", 7))));
    return make_error(ErrorCode::kIo, "simulated failure");
  });
  EXPECT_FALSE(failed.ok());
  EXPECT_EQ(*read_file_text(path), "first");
  size_t entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir)) (void)e, ++entries;
  EXPECT_EQ(entries, 1u);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cubeforge
