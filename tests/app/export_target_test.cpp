// Export targets: "~" expanded, absolute paths, the format and extension
// agreeing, and what the panel must ask before writing.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>

#include "app/desktop/core/export_target.h"
#include "test_folder.h"

namespace cubeforge::app {
namespace {

TEST(ExportTarget, HomeIsExpandedAndPathsAreAbsolute) {
  const char* home = std::getenv("HOME");
  ASSERT_NE(home, nullptr);
  EXPECT_EQ(expand_home("~/models"), std::filesystem::path(home) / "models");
  EXPECT_EQ(expand_home("~"), std::filesystem::path(home) / "");
  EXPECT_EQ(expand_home("~other/x"), "~other/x");  // another user's home is not ours to guess
  EXPECT_EQ(expand_home("a/~/b"), "a/~/b");
  auto target = plan_export("~/cubeforge-exports-that-do-not-exist", "chair.glb");
  ASSERT_TRUE(target.ok()) << target.error().to_string();
  EXPECT_EQ(target->path, std::filesystem::path(home) / "cubeforge-exports-that-do-not-exist" / "chair.glb");
  EXPECT_TRUE(target->folder_missing);
  auto relative = plan_export(".", "chair.glb");
  ASSERT_TRUE(relative.ok());
  EXPECT_TRUE(relative->path.is_absolute());
  EXPECT_EQ(relative->path, (std::filesystem::current_path() / "chair.glb").lexically_normal());
}

TEST(ExportTarget, TheFormatAndTheExtensionNeverDisagree) {
  testing::TemporaryFolder folder;
  const std::string dir = folder.path().string();
  auto from_name = plan_export(dir, "chair.stl");
  ASSERT_TRUE(from_name.ok());
  EXPECT_EQ(from_name->format, MeshFileFormat::kStl);
  // A button replaces the name's extension: the file says what it holds.
  auto button = plan_export(dir, "chair.stl", ".obj");
  ASSERT_TRUE(button.ok());
  EXPECT_EQ(button->format, MeshFileFormat::kObj);
  EXPECT_EQ(button->path.filename(), "chair.obj");
  auto added = plan_export(dir, "chair", ".ply");
  ASSERT_TRUE(added.ok());
  EXPECT_EQ(added->path.filename(), "chair.ply");
  EXPECT_FALSE(plan_export(dir, "chair").ok());       // no format at all
  EXPECT_FALSE(plan_export(dir, "chair.txt").ok());   // not a mesh format
  EXPECT_FALSE(plan_export(dir, "sub/chair.glb").ok());  // folders go in the folder field
  EXPECT_FALSE(plan_export(dir, "").ok());
}

TEST(ExportTarget, AnExistingFileAndAMissingFolderAreNoticed) {
  testing::TemporaryFolder folder;
  std::ofstream(folder.path() / "chair.glb") << "old";
  auto existing = plan_export(folder.path().string(), "chair.glb");
  ASSERT_TRUE(existing.ok());
  EXPECT_TRUE(existing->exists);
  EXPECT_FALSE(existing->folder_missing);
  auto fresh = plan_export(folder.path().string(), "table.glb");
  ASSERT_TRUE(fresh.ok());
  EXPECT_FALSE(fresh->exists);
  auto missing = plan_export((folder.path() / "new" / "deeper").string(), "chair.glb");
  ASSERT_TRUE(missing.ok());
  EXPECT_TRUE(missing->folder_missing);
  EXPECT_FALSE(missing->exists);
}

}  // namespace
}  // namespace cubeforge::app
