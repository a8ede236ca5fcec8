// Strict JSON (a key given twice is an error, at any level), nesting bounded
// before anything recursive sees a value, and the input budgets' variables
// and messages.
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "inference/core/input_budgets.h"
#include "inference/core/strict_json.h"

namespace cubeforge {
namespace {

std::string nested(int depth) { return std::string(size_t(depth), '[') + "1" + std::string(size_t(depth), ']'); }

TEST(StrictJson, ParsesWhatNlohmannParses) {
  const std::string text = R"({"a": [1, -2, 3.5, "x", null, true, {"b": {}}], "c": {"d": 18446744073709551615}})";
  auto value = parse_json_strictly(text);
  ASSERT_TRUE(value.ok()) << value.error().message;
  EXPECT_EQ(*value, nlohmann::json::parse(text));
}

TEST(StrictJson, AKeyGivenTwiceIsAnErrorAtAnyLevel) {
  auto top = parse_json_strictly(R"({"a": 1, "b": 2, "a": 3})");
  ASSERT_FALSE(top.ok());
  EXPECT_EQ(top.error().message, "key 'a' appears twice in the top level (a JSON object holds each key once)");
  auto inner = parse_json_file_strictly(R"({"t": [0, {"x": {"k": 1, "k": 1}}]})", "f.json");
  ASSERT_FALSE(inner.ok());
  EXPECT_EQ(inner.error().code, ErrorCode::kCorruptFile);
  EXPECT_EQ(inner.error().message, "'f.json': key 'k' appears twice in t[1].x (a JSON object holds each key once)");
  // Equal keys in different objects are fine.
  EXPECT_TRUE(parse_json_strictly(R"({"a": {"a": 1}, "b": {"a": 2}})").ok());
}

// nlohmann's dump() and comparisons recurse per level: a value nested a
// hundred thousand levels deep ended them in SIGSEGV.
TEST(StrictJson, NestingIsBoundedBeforeAnythingRecursiveSeesIt) {
  EXPECT_TRUE(parse_json_strictly(nested(kMaxJsonDepth)).ok());
  auto deep = parse_json_strictly(nested(kMaxJsonDepth + 1));
  ASSERT_FALSE(deep.ok());
  EXPECT_NE(deep.error().message.find("nested more than 64 levels deep"), std::string::npos) << deep.error().message;
  auto very_deep = parse_json_strictly("{\"a\": " + nested(1000000) + "}", 3);
  ASSERT_FALSE(very_deep.ok());
  EXPECT_NE(very_deep.error().message.find("nested more than 3 levels deep (in a[0])"), std::string::npos)
      << very_deep.error().message;
}

TEST(StrictJson, InvalidJsonSaysSo) {
  for (const char* text : {"{", "{\"a\": 1} trailing", "", "{\"a\": \"\xff\"}"}) {
    auto value = parse_json_strictly(text);
    ASSERT_FALSE(value.ok()) << text;
    EXPECT_EQ(value.error().message.rfind("not valid JSON", 0), 0u) << value.error().message;
  }
}

TEST(StrictJson, ExcerptsAreShort) {
  EXPECT_EQ(json_excerpt(nlohmann::json(12)), "12");
  EXPECT_EQ(json_excerpt(nlohmann::json(std::string(100, 'x')), 10), "\"xxxxxxxxx...");
}

TEST(InputBudgets, DefaultsVariablesAndMessages) {
  ::unsetenv("CUBEFORGE_MAX_MESH_FACES");
  EXPECT_EQ(*input_budget(InputBudget::kMeshFaces), 2'000'000u);
  EXPECT_TRUE(check_input_budget(InputBudget::kMeshFaces, 2'000'000, "'m.obj'").ok());
  Status over = check_input_budget(InputBudget::kMeshFaces, 2'000'001, "'m.obj': the mesh");
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message,
            "'m.obj': the mesh needs 2000001 triangles, over the budget of 2000000 (CUBEFORGE_MAX_MESH_FACES); if the "
            "file is what you meant, set CUBEFORGE_MAX_MESH_FACES=2000001 or more to read it");
  ::setenv("CUBEFORGE_MAX_MESH_FACES", "5000000", 1);
  EXPECT_TRUE(check_input_budget(InputBudget::kMeshFaces, 2'000'001, "'m.obj'").ok());
  for (const char* bad : {"5e6", "-1", "0", "12abc"}) {
    ::setenv("CUBEFORGE_MAX_MESH_FACES", bad, 1);
    Status unreadable = check_input_budget(InputBudget::kMeshFaces, 1, "'m.obj'");
    ASSERT_FALSE(unreadable.ok()) << bad;
    EXPECT_NE(unreadable.error().message.find(std::string("CUBEFORGE_MAX_MESH_FACES is '") + bad), std::string::npos);
  }
  ::unsetenv("CUBEFORGE_MAX_MESH_FACES");
  Status saturated = check_input_budget(InputBudget::kMeshFaces, saturating_multiply(uint64_t(1) << 40, uint64_t(1) << 40),
                                        "'m.glb': the scene");
  ASSERT_FALSE(saturated.ok());
  EXPECT_NE(saturated.error().message.find("more than 2^64 triangles, over any budget"), std::string::npos);
  EXPECT_EQ(saturating_add(UINT64_MAX - 1, 5), UINT64_MAX);
  EXPECT_EQ(saturating_multiply(3, 5), 15u);
}

}  // namespace
}  // namespace cubeforge
