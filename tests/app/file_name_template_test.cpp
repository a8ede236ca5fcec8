// Export file-name templates and prompt slugs.
#include <gtest/gtest.h>

#include "app/desktop/core/file_name_template.h"

namespace cubeforge::app {
namespace {

TEST(Slugify, LowerCaseWordsJoinedByOneDash) {
  EXPECT_EQ(slugify("A Red Dragon!"), "a-red-dragon");
  EXPECT_EQ(slugify("  many   spaces\tand\nlines  "), "many-spaces-and-lines");
  EXPECT_EQ(slugify("../../etc/passwd"), "etc-passwd");
  EXPECT_EQ(slugify("Ünïcode café 3D"), "n-code-caf-3d");
  EXPECT_EQ(slugify("?!"), "untitled");
  EXPECT_EQ(slugify(""), "untitled");
}

TEST(Slugify, BoundedLengthWithoutATrailingDash) {
  std::string slug = slugify("abcdefghij abcdefghij abcdefghij", 15);
  EXPECT_LE(slug.size(), 15u);
  EXPECT_EQ(slug, "abcdefghij-abcd");
  EXPECT_NE(slug.back(), '-');
  EXPECT_EQ(slugify("abcdefghij abcdefghij", 11), "abcdefghij");
}

TEST(FileNameTemplate, ExpandsEveryPlaceholder) {
  FileNameFields fields{"A red dragon", 42, 8, "20260101", "093000"};
  auto name = expand_file_name_template("{prompt}-{seed}.glb", fields);
  ASSERT_TRUE(name.ok()) << name.error().to_string();
  EXPECT_EQ(*name, "a-red-dragon-42.glb");
  auto full = expand_file_name_template("{date}_{time}_r{resolution}_{prompt}.obj", fields);
  ASSERT_TRUE(full.ok());
  EXPECT_EQ(*full, "20260101_093000_r8_a-red-dragon.obj");
}

TEST(FileNameTemplate, UnknownOrUnclosedPlaceholdersAreErrors) {
  FileNameFields fields{"cup", 1, 8, "d", "t"};
  auto unknown = expand_file_name_template("{promt}-{seed}.glb", fields);
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("{promt}"), std::string::npos);
  EXPECT_FALSE(expand_file_name_template("{prompt.glb", fields).ok());
  EXPECT_FALSE(expand_file_name_template("prompt}.glb", fields).ok());
  EXPECT_FALSE(expand_file_name_template("", fields).ok());
}

TEST(FileNameTemplate, FieldsNowFillsDateAndTime) {
  FileNameFields fields = fields_now("x", 3, 5);
  EXPECT_EQ(fields.date.size(), 8u);
  EXPECT_EQ(fields.time.size(), 6u);
  EXPECT_EQ(fields.seed, 3u);
}

}  // namespace
}  // namespace cubeforge::app
