// Device selection: the chosen device and the reasons others were rejected;
// "no usable device" is an error value, not a crash.
#include <gtest/gtest.h>

#include "engine/context.h"

namespace cubeforge::engine {
namespace {

TEST(VulkanContext, ChoosesADeviceAndRejectsWithReasons) {
  auto counter = std::make_shared<ValidationCounter>();
  ContextOptions options;
  options.validation = Validation::kRequired;
  options.validation_counter = counter;
  auto context = Context::create(options);
  if (!context.ok() && is_no_vulkan_device(context.error()))
    GTEST_SKIP() << "no Vulkan device at all: " << context.error().message;
  ASSERT_TRUE(context.ok()) << context.error().to_string();
  EXPECT_FALSE((*context)->device_name().empty());
  int usable = 0;
  for (const auto& c : (*context)->candidates()) usable += c.rejection.empty();
  EXPECT_GE(usable, 1);
  EXPECT_EQ((*context)->completed_value(), 0u);
  (*context)->run_one_time([](VkCommandBuffer) {});
  EXPECT_EQ((*context)->completed_value(), 1u);
  std::string chosen = (*context)->device_name();
  context = make_error(ErrorCode::kInternal, "released");

  // A filter no device matches: every device is rejected, with the reason.
  options.device_name_filter = "no-such-gpu-anywhere";
  auto none = Context::create(options);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.error().code, ErrorCode::kNotFound);
  EXPECT_NE(none.error().message.find("no usable Vulkan device"), std::string::npos);
  EXPECT_NE(none.error().message.find(chosen + " ("), std::string::npos) << none.error().message;
  EXPECT_NE(none.error().message.find("does not contain \"no-such-gpu-anywhere\""), std::string::npos);
  EXPECT_FALSE(is_no_vulkan_device(none.error())) << "devices exist; they were rejected";
  EXPECT_EQ(counter->errors.load(), 0);
}

}  // namespace
}  // namespace cubeforge::engine
