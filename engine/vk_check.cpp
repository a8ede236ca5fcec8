// Names for VkResult codes and the Error built from a failed Vulkan call.
#include "engine/vk_check.h"

namespace cubeforge::engine {

const char* vk_result_name(VkResult result) {
  switch (result) {
#define CUBEFORGE_VK_NAME(x) \
  case x: return #x;
    CUBEFORGE_VK_NAME(VK_SUCCESS)
    CUBEFORGE_VK_NAME(VK_NOT_READY)
    CUBEFORGE_VK_NAME(VK_TIMEOUT)
    CUBEFORGE_VK_NAME(VK_EVENT_SET)
    CUBEFORGE_VK_NAME(VK_EVENT_RESET)
    CUBEFORGE_VK_NAME(VK_INCOMPLETE)
    CUBEFORGE_VK_NAME(VK_ERROR_OUT_OF_HOST_MEMORY)
    CUBEFORGE_VK_NAME(VK_ERROR_OUT_OF_DEVICE_MEMORY)
    CUBEFORGE_VK_NAME(VK_ERROR_INITIALIZATION_FAILED)
    CUBEFORGE_VK_NAME(VK_ERROR_DEVICE_LOST)
    CUBEFORGE_VK_NAME(VK_ERROR_MEMORY_MAP_FAILED)
    CUBEFORGE_VK_NAME(VK_ERROR_LAYER_NOT_PRESENT)
    CUBEFORGE_VK_NAME(VK_ERROR_EXTENSION_NOT_PRESENT)
    CUBEFORGE_VK_NAME(VK_ERROR_FEATURE_NOT_PRESENT)
    CUBEFORGE_VK_NAME(VK_ERROR_INCOMPATIBLE_DRIVER)
    CUBEFORGE_VK_NAME(VK_ERROR_TOO_MANY_OBJECTS)
    CUBEFORGE_VK_NAME(VK_ERROR_FORMAT_NOT_SUPPORTED)
    CUBEFORGE_VK_NAME(VK_ERROR_FRAGMENTED_POOL)
    CUBEFORGE_VK_NAME(VK_ERROR_OUT_OF_POOL_MEMORY)
    CUBEFORGE_VK_NAME(VK_ERROR_INVALID_EXTERNAL_HANDLE)
    CUBEFORGE_VK_NAME(VK_ERROR_SURFACE_LOST_KHR)
    CUBEFORGE_VK_NAME(VK_ERROR_NATIVE_WINDOW_IN_USE_KHR)
    CUBEFORGE_VK_NAME(VK_SUBOPTIMAL_KHR)
    CUBEFORGE_VK_NAME(VK_ERROR_OUT_OF_DATE_KHR)
#undef CUBEFORGE_VK_NAME
    default: return "VK_ERROR_UNKNOWN";
  }
}

Error vulkan_error(const char* stage, const char* call, VkResult result, const std::string& advice) {
  ErrorCode code = ErrorCode::kInternal;
  if (result == VK_ERROR_OUT_OF_HOST_MEMORY || result == VK_ERROR_OUT_OF_DEVICE_MEMORY) code = ErrorCode::kOutOfMemory;
  if (result == VK_ERROR_EXTENSION_NOT_PRESENT || result == VK_ERROR_FEATURE_NOT_PRESENT ||
      result == VK_ERROR_FORMAT_NOT_SUPPORTED || result == VK_ERROR_INCOMPATIBLE_DRIVER ||
      result == VK_ERROR_LAYER_NOT_PRESENT)
    code = ErrorCode::kUnsupported;
  std::string message = std::string(stage) + ": " + call + " returned " + vk_result_name(result);
  if (!advice.empty()) message += " (" + advice + ")";
  return make_error(code, std::move(message));
}

}  // namespace cubeforge::engine
