// Vulkan result checks.
//
// Two kinds of failure: those a user can meet (no device, out of memory, a
// window system that refuses a surface) travel as Result values with a message
// that says what to do; those only a bug can cause abort through VK_CHECK with
// the statement, its location and a hint, the way Vulkan samples do.
#pragma once

#include <vulkan/vulkan.h>

#include <string>

#include "inference/core/result.h"

namespace cubeforge::engine {

const char* vk_result_name(VkResult result);

// An Error for a Vulkan call that failed at a border: "<stage>: <call> returned
// VK_ERROR_X (<what to do>)". Out-of-memory results map to kOutOfMemory.
Error vulkan_error(const char* stage, const char* call, VkResult result, const std::string& advice = {});

}  // namespace cubeforge::engine

// Invariant: the call cannot fail unless the engine has a bug (or the driver
// is lost). Aborts with the statement, file:line and the hint.
#define VK_CHECK(expr, hint)                                                          \
  do {                                                                                \
    VkResult vk_check_result_ = (expr);                                               \
    if (vk_check_result_ != VK_SUCCESS) {                                             \
      std::string vk_check_hint_ = std::string(::cubeforge::engine::vk_result_name(   \
                                       vk_check_result_)) + ": " + (hint);            \
      ::cubeforge::check_failed(#expr, __FILE__, __LINE__, vk_check_hint_.c_str());   \
    }                                                                                 \
  } while (0)

// Border: return a Result error from the enclosing function when the call fails.
#define VK_TRY(stage, expr, advice)                                                   \
  do {                                                                                \
    VkResult vk_try_result_ = (expr);                                                 \
    if (vk_try_result_ != VK_SUCCESS)                                                 \
      return ::cubeforge::engine::vulkan_error(stage, #expr, vk_try_result_, advice); \
  } while (0)
