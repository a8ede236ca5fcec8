// Where the app keeps its data: flag, then $CUBEFORGE_DATA_DIR, then
// $XDG_DATA_HOME/cubeforge, then ~/.local/share/cubeforge.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <cstdlib>
#include <optional>
#include <string>

#include "app/desktop/core/data_folder.h"

namespace cubeforge::app {
namespace {

// Sets an environment variable for one scope and restores it afterwards.
class ScopedEnvironment {
 public:
  ScopedEnvironment(const char* name, const char* value) : name_(name) {
    if (const char* old = std::getenv(name)) old_ = old;
    if (value) setenv(name, value, 1);
    else unsetenv(name);
  }
  ~ScopedEnvironment() {
    if (old_) setenv(name_, old_->c_str(), 1);
    else unsetenv(name_);
  }

 private:
  const char* name_;
  std::optional<std::string> old_;
};

TEST(DataFolder, FlagThenEnvironmentThenXdgThenHome) {
  ScopedEnvironment data("CUBEFORGE_DATA_DIR", "/tmp/cf-data");
  ScopedEnvironment xdg("XDG_DATA_HOME", "/tmp/xdg");
  ScopedEnvironment home("HOME", "/tmp/home");
  EXPECT_EQ(resolve_data_folder("/tmp/flag"), "/tmp/flag");
  EXPECT_EQ(resolve_data_folder(), "/tmp/cf-data");
  {
    ScopedEnvironment no_data("CUBEFORGE_DATA_DIR", nullptr);
    EXPECT_EQ(resolve_data_folder(), "/tmp/xdg/cubeforge");
    ScopedEnvironment no_xdg("XDG_DATA_HOME", "");
    EXPECT_EQ(resolve_data_folder(), "/tmp/home/.local/share/cubeforge");
  }
}

TEST(DataFolder, ResidentMemoryIsPlausible) {
  const double mib = resident_memory_mib();
  EXPECT_GT(mib, 1.0);      // a running test binary holds more than a MiB
  EXPECT_LT(mib, 65536.0);
}

// The log and the window layout are opened only when they are regular files
// (or missing): a FIFO there would block the app at start.
TEST(DataFolder, OnlyRegularFilesOrNothingAreUsedForTheLogAndLayout) {
  const auto folder = std::filesystem::temp_directory_path() / ("cubeforge-data-file-" + std::to_string(::getpid()));
  std::filesystem::create_directories(folder);
  EXPECT_TRUE(check_data_file(folder / "missing.log").ok());
  std::ofstream(folder / "regular.log") << "x";
  EXPECT_TRUE(check_data_file(folder / "regular.log").ok());
  ASSERT_EQ(::mkfifo((folder / "fifo.ini").c_str(), 0644), 0);
  Status fifo = check_data_file(folder / "fifo.ini");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().message.find("FIFO"), std::string::npos);
  std::filesystem::create_directory(folder / "dir.log");
  EXPECT_FALSE(check_data_file(folder / "dir.log").ok());
  std::filesystem::create_symlink("loop.log", folder / "loop.log");
  EXPECT_FALSE(check_data_file(folder / "loop.log").ok());
  std::filesystem::remove_all(folder);
}

}  // namespace
}  // namespace cubeforge::app
