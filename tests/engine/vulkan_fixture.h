// Test fixture: a Vulkan context with the Khronos validation layer required
// (synchronization validation included) and a debug messenger that counts its
// reports, plus a renderer. Any
// validation error, including those reported while the device is destroyed,
// fails the test. With no Vulkan device at all the test is skipped.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"

namespace cubeforge::engine::testing {

class VulkanTest : public ::testing::Test {
 protected:
  // Extra instance extensions (a window's) and renderer options, set by subclasses before SetUp.
  std::vector<std::string> instance_extensions_;
  Renderer::Options renderer_options_;

  void SetUp() override {
    validation_ = std::make_shared<ValidationCounter>();
    ContextOptions options;
    options.application_name = "cubeforge-tests";
    options.validation = Validation::kRequired;
    options.validation_counter = validation_;
    options.synchronization_validation = true;
    options.instance_extensions = instance_extensions_;
    auto context = Context::create(options);
    if (!context.ok()) {
      if (is_no_vulkan_device(context.error()))
        GTEST_SKIP() << "no Vulkan device at all: " << context.error().message;
      FAIL() << context.error().to_string();
    }
    context_ = std::move(context).value();
    ASSERT_TRUE(context_->validation_enabled());
    auto renderer = Renderer::create(*context_, renderer_options_);
    ASSERT_TRUE(renderer.ok()) << renderer.error().to_string();
    renderer_ = std::move(renderer).value();
  }

  void TearDown() override {
    renderer_.reset();
    context_.reset();
    if (validation_ && !IsSkipped()) {
      EXPECT_EQ(validation_->errors.load(), 0) << "the validation layer reported errors (see stderr)";
    }
  }

  std::unique_ptr<OffscreenTarget> make_offscreen(uint32_t width, uint32_t height,
                                                  VkSampleCountFlagBits samples = static_cast<VkSampleCountFlagBits>(0)) {
    OffscreenOptions options;
    options.width = width;
    options.height = height;
    options.samples = samples;
    auto target = OffscreenTarget::create(*renderer_, options);
    EXPECT_TRUE(target.ok()) << target.error().to_string();
    return target.ok() ? std::move(target).value() : nullptr;
  }

  std::shared_ptr<ValidationCounter> validation_;
  std::unique_ptr<Context> context_;
  std::unique_ptr<Renderer> renderer_;
};

// Settings for measurement renders: no grid, so alpha is exactly mesh coverage.
inline SceneSettings measurement_settings() {
  SceneSettings settings;
  settings.grid = false;
  return settings;
}

}  // namespace cubeforge::engine::testing
