// Export targets: "~" expanded, absolute paths, the format and extension
// agreeing, and what the panel must ask before writing; the documents folder
// exports go to until one is chosen.
#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <vector>
#include <utility>
#include <string>
#include <optional>

#include "app/desktop/core/documents_folder.h"
#include "app/desktop/core/export_target.h"
#include "test_folder.h"

namespace cubeforge::app {
namespace {

// Sets environment variables for one test and puts them back after it.
class ScopedEnvironment {
 public:
  void set(const char* name, const std::string& value) {
    remember(name);
    ::setenv(name, value.c_str(), 1);
  }
  void unset(const char* name) {
    remember(name);
    ::unsetenv(name);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) ::setenv(name.c_str(), value->c_str(), 1);
      else ::unsetenv(name.c_str());
    }
  }

 private:
  void remember(const char* name) {
    for (const auto& [saved, value] : saved_)
      if (saved == name) return;
    const char* value = std::getenv(name);
    saved_.emplace_back(name, value ? std::optional<std::string>(value) : std::nullopt);
  }
  std::vector<std::pair<std::string, std::optional<std::string>>> saved_;
};

TEST(DocumentsFolder, FollowsTheDesktopsUserDirectoriesThenTheHome) {
  testing::TemporaryFolder folder;
  const auto home = folder.path() / "home";
  std::filesystem::create_directories(home);
  ScopedEnvironment environment;
  environment.set("HOME", home.string());
  environment.unset("XDG_CONFIG_HOME");
  // No user-dirs.dirs: ~/Documents, not made by asking.
  EXPECT_EQ(documents_folder(), home / "Documents");
  EXPECT_FALSE(std::filesystem::exists(home / "Documents"));
  // The desktop's name for it, in ~/.config/user-dirs.dirs ($HOME expanded; the last line wins).
  std::filesystem::create_directories(home / ".config");
  std::ofstream(home / ".config" / "user-dirs.dirs") << "# comment\nXDG_DESKTOP_DIR=\"$HOME/Desktop\"\n"
                                                     << "XDG_DOCUMENTS_DIR=\"$HOME/Old\"\n"
                                                     << "XDG_DOCUMENTS_DIR=\"$HOME/Dokumente\"\n";
  EXPECT_EQ(documents_folder(), home / "Dokumente");
  EXPECT_EQ(export_folder_or_documents(""), home / "Dokumente");
  EXPECT_EQ(export_folder_or_documents("~/mine"), home / "mine") << "a folder chosen wins";
  auto target = plan_export("", "chair.glb");
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->path, home / "Dokumente" / "chair.glb");
  EXPECT_TRUE(target->folder_missing);
  // $XDG_CONFIG_HOME, when set, is where the file is; an absolute path there is taken as it is.
  const auto config = folder.path() / "config";
  std::filesystem::create_directories(config);
  std::ofstream(config / "user-dirs.dirs") << "XDG_DOCUMENTS_DIR=\"/srv/shared docs\"\n";
  environment.set("XDG_CONFIG_HOME", config.string());
  EXPECT_EQ(documents_folder(), "/srv/shared docs");
  // Set to the home itself, the desktop has no documents folder: the home.
  std::ofstream(config / "user-dirs.dirs") << "XDG_DOCUMENTS_DIR=\"$HOME/\"\n";
  EXPECT_EQ(documents_folder(), home);
  // Not set there, and a file where ~/Documents would be: the home.
  std::ofstream(config / "user-dirs.dirs") << "XDG_MUSIC_DIR=\"$HOME/Music\"\n";
  std::ofstream(home / "Documents") << "not a folder\n";
  EXPECT_EQ(documents_folder(), home);
}

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
