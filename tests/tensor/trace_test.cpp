// The trace hook and trace files: names are formatted only with a sink, a
// trace round-trips through safetensors in recording order, and the
// comparison finds nothing in a trace against itself and names the first
// tensor that differs when one is perturbed.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <unistd.h>

#include "inference/tensor/trace_file.h"

namespace cubeforge {
namespace {

// Files written here go to a folder removed when the tests end.
struct ScratchFolder {
  std::filesystem::path path =
      std::filesystem::temp_directory_path() / ("cubeforge-trace-test-" + std::to_string(::getpid()));
  ~ScratchFolder() { std::filesystem::remove_all(path); }
};
ScratchFolder g_scratch;

std::filesystem::path scratch_file(const std::string& name) {
  std::filesystem::create_directories(g_scratch.path);
  return g_scratch.path / name;
}

TEST(TracePrefix, JoinsThePartsThatAreThere) {
  EXPECT_EQ((TracePrefix{"dual", 3, "x"}.name("ln_1")), "dual.3.x.ln_1");
  EXPECT_EQ((TracePrefix{"single", 0, {}}.name("q")), "single.0.q");
  EXPECT_EQ((TracePrefix{"occupancy", -1, {}}.name("attn")), "occupancy.attn");
  EXPECT_EQ((TracePrefix{}.name("logits")), "logits");
}

TEST(Trace, NullSinkRecordsNothingAndAScopePrefixesNames) {
  const float values[6] = {1, 2, 3, 4, 5, 6};
  trace_tensor(nullptr, "ignored", values, {2, 3});  // must not crash or record anywhere

  TraceRecorder recorder;
  ScopedTraceSink step(recorder, "decode.4");
  trace_tensor(&step, TracePrefix{"dual", 1, "x"}, "attn", values, {1, 2, 3});
  // Two rows of 2 values, 3 values apart, from the second: {2, 3} and {5, 6}.
  trace_rows(&step, TracePrefix{"single", 0, {}}, "k", values + 1, 2, 2, 3, {2, 2});
  ASSERT_EQ(recorder.tensors().size(), 2u);
  const TraceRecorder::Tensor* attn = recorder.find("decode.4.dual.1.x.attn");
  ASSERT_NE(attn, nullptr);
  EXPECT_EQ(attn->dtype, DType::kF32);
  EXPECT_EQ(attn->shape, (std::vector<int64_t>{1, 2, 3}));
  EXPECT_EQ(attn->data.size(), 6 * sizeof(float));
  const TraceRecorder::Tensor* k = recorder.find("decode.4.single.0.k");
  ASSERT_NE(k, nullptr);
  std::vector<float> gathered(4);
  std::memcpy(gathered.data(), k->data.data(), k->data.size());
  EXPECT_EQ(gathered, (std::vector<float>{2, 3, 5, 6}));
}

// A small trace whose names sort differently from their recording order.
TraceRecorder sample_trace() {
  TraceRecorder recorder;
  const std::vector<float> a = {1.f, -2.f, 3.f, 0.5f};
  const std::vector<float> b = {0.25f, 0.75f};
  const std::vector<float> c = {10.f, 20.f, 30.f};
  trace_tensor(&recorder, "z.first", a.data(), {2, 2});
  trace_tensor(&recorder, "m.second", b.data(), {2});
  trace_tensor(&recorder, "a.third", c.data(), {1, 3});
  return recorder;
}

SafetensorsFile written(const TraceRecorder& recorder, const std::string& name) {
  const auto path = scratch_file(name);
  Status status = recorder.write(path);
  EXPECT_TRUE(status.ok()) << status.error().to_string();
  auto file = SafetensorsFile::open(path);
  EXPECT_TRUE(file.ok()) << file.error().to_string();
  return std::move(*file);
}

TEST(TraceFile, KeepsRecordingOrderShapesAndValues) {
  const SafetensorsFile file = written(sample_trace(), "order.safetensors");
  std::vector<std::string> order;
  for (const TensorEntry* e : entries_in_file_order(file)) order.push_back(e->name);
  EXPECT_EQ(order, (std::vector<std::string>{"z.first", "m.second", "a.third"}));
  auto first = file.get("z.first");
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->shape(), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(*file.read_f32("a.third"), (std::vector<float>{10.f, 20.f, 30.f}));
}

TEST(TraceFile, ANameRecordedTwiceIsAnErrorNamingIt) {
  TraceRecorder recorder;
  const float one = 1.f;
  trace_tensor(&recorder, "logits", &one, {1});
  trace_tensor(&recorder, "logits", &one, {1});
  Status status = recorder.write(scratch_file("twice.safetensors"));
  ASSERT_FALSE(status.ok());
  EXPECT_NE(status.error().message.find("logits"), std::string::npos) << status.error().message;
}

TEST(CompareTraces, ATraceAgainstItselfIsExactlyEqual) {
  const SafetensorsFile file = written(sample_trace(), "self.safetensors");
  auto c = compare_traces(file, file, 1e-4);
  ASSERT_TRUE(c.ok()) << c.error().to_string();
  ASSERT_EQ(c->tensors.size(), 3u);
  for (const TensorComparison& t : c->tensors) {
    EXPECT_EQ(t.relative_error, 0.0) << t.name;
    EXPECT_EQ(t.max_abs_difference, 0.0) << t.name;
    EXPECT_TRUE(t.within_tolerance) << t.name;
  }
  EXPECT_FALSE(c->first_over_tolerance.has_value());
  EXPECT_TRUE(c->only_in_a.empty() && c->only_in_b.empty());
  EXPECT_EQ(c->tensors[0].first_a, (std::vector<float>{1.f, -2.f, 3.f, 0.5f}));
}

TEST(CompareTraces, NamesTheFirstPerturbedTensorInRecordingOrder) {
  const SafetensorsFile reference = written(sample_trace(), "reference.safetensors");
  // Perturb the second and third tensors: the second is the first over.
  TraceRecorder perturbed;
  const std::vector<float> a = {1.f, -2.f, 3.f, 0.5f};
  const std::vector<float> b = {0.25f, 0.76f};
  const std::vector<float> c = {10.f, 20.f, 31.f};
  trace_tensor(&perturbed, "z.first", a.data(), {2, 2});
  trace_tensor(&perturbed, "m.second", b.data(), {2});
  trace_tensor(&perturbed, "a.third", c.data(), {1, 3});
  trace_tensor(&perturbed, "extra", c.data(), {3});
  const SafetensorsFile file = written(perturbed, "perturbed.safetensors");

  auto result = compare_traces(file, reference, 1e-4);
  ASSERT_TRUE(result.ok());
  ASSERT_TRUE(result->first_over_tolerance.has_value());
  const TensorComparison& first = result->tensors[*result->first_over_tolerance];
  EXPECT_EQ(first.name, "m.second");
  // ‖(0, 0.01)‖ / ‖(0.25, 0.75)‖
  EXPECT_NEAR(first.relative_error, 0.01 / std::sqrt(0.25 * 0.25 + 0.75 * 0.75), 1e-6);
  EXPECT_NEAR(first.max_abs_difference, 0.01, 1e-6);
  EXPECT_TRUE(result->tensors[0].within_tolerance);
  EXPECT_FALSE(result->tensors[2].within_tolerance);
  EXPECT_EQ(result->only_in_a, (std::vector<std::string>{"extra"}));
  // A looser tolerance lets the small change through but not the large one.
  auto loose = compare_traces(file, reference, 0.02);
  ASSERT_TRUE(loose.ok());
  EXPECT_EQ(loose->tensors[*loose->first_over_tolerance].name, "a.third");
}

TEST(CompareTraces, SizesThatDifferOrNaNsAreOverAnyTolerance) {
  TraceRecorder left, right;
  const std::vector<float> three = {1.f, 2.f, 3.f}, two = {1.f, 2.f};
  const std::vector<float> with_nan = {1.f, NAN, 3.f};
  trace_tensor(&left, "sizes", three.data(), {3});
  trace_tensor(&right, "sizes", two.data(), {2});
  trace_tensor(&left, "nan", with_nan.data(), {3});
  trace_tensor(&right, "nan", three.data(), {3});
  trace_tensor(&left, "reshaped", three.data(), {1, 3});
  trace_tensor(&right, "reshaped", three.data(), {3});
  const SafetensorsFile a = written(left, "left.safetensors"), b = written(right, "right.safetensors");
  auto c = compare_traces(a, b, 1e30);
  ASSERT_TRUE(c.ok());
  ASSERT_EQ(c->tensors.size(), 3u);
  EXPECT_FALSE(c->tensors[0].comparable);
  EXPECT_FALSE(c->tensors[0].within_tolerance);
  EXPECT_TRUE(std::isnan(c->tensors[1].relative_error));
  EXPECT_TRUE(std::isnan(c->tensors[1].max_abs_difference));
  EXPECT_FALSE(c->tensors[1].within_tolerance);
  EXPECT_TRUE(c->tensors[2].comparable);  // same values, shapes [1, 3] and [3]
  EXPECT_TRUE(c->tensors[2].within_tolerance);
  EXPECT_EQ(c->tensors[*c->first_over_tolerance].name, "sizes");
}

}  // namespace
}  // namespace cubeforge
