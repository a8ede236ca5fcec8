// Where the app keeps its data: flag, then $CUBEFORGE_DATA_DIR, then
// $XDG_DATA_HOME/cubeforge, then ~/.local/share/cubeforge.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace cubeforge::app
