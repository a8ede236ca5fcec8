// The Vulkan instance, the chosen physical device, the logical device and its
// queue: everything the engine's targets and the desktop app's ImGui backend
// share.
//
// Device selection follows vk-bootstrap: every physical device is inspected,
// the ones that cannot serve are rejected with a reason, and the best of the
// rest is chosen (discrete > integrated > virtual > CPU such as Mesa's
// lavapipe). "No usable Vulkan device" is an Error listing the reasons, never
// a crash.
//
// The context also owns the GPU timeline: one timeline semaphore that every
// submission signals with the next value, so "is the GPU done with X" is a
// number comparison, and a deletion queue keyed on those numbers releases what
// frames in flight may still read.
#pragma once

#include <vulkan/vulkan.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "inference/core/result.h"

namespace cubeforge::engine {

enum class Validation {
  kOff,
  kIfAvailable,  // use VK_LAYER_KHRONOS_validation when it is installed
  kRequired,     // fail context creation when it is not (tests)
};

// Counts what the validation layer reports. Shared so a test can read the
// counts after the context (whose destruction may still report) is gone.
struct ValidationCounter {
  std::atomic<int> errors{0};
  std::atomic<int> warnings{0};
  bool print = true;  // echo messages to stderr
};

struct ContextOptions {
  std::string application_name = "cubeforge";
  Validation validation = Validation::kIfAvailable;
  std::shared_ptr<ValidationCounter> validation_counter;  // created when null
  // With validation: also check hazards between commands, submissions and
  // frames (slower; the tests turn it on).
  bool synchronization_validation = false;
  // Instance extensions a window system needs (glfwGetRequiredInstanceExtensions).
  std::vector<std::string> instance_extensions;
  // Only devices whose name contains this text are considered (empty: all).
  // The CUBEFORGE_VULKAN_DEVICE environment variable sets it when empty.
  std::string device_name_filter;
};

struct DeviceCandidate {
  std::string name;
  VkPhysicalDeviceType type = VK_PHYSICAL_DEVICE_TYPE_OTHER;
  std::string rejection;  // empty when the device can serve
  int score = 0;
};

// Live GPU objects made by the engine's RAII wrappers: buffers, images and
// memory allocations, and the bytes they hold. Leak tests compare these to a
// baseline.
struct ResourceCounters {
  std::atomic<int64_t> buffers{0};
  std::atomic<int64_t> images{0};
  std::atomic<int64_t> allocations{0};
  std::atomic<int64_t> allocated_bytes{0};
};

struct SemaphoreWait {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;  // ignored for binary semaphores
  VkPipelineStageFlags stage = VK_PIPELINE_STAGE_ALL_COMMANDS_BIT;
};

struct SemaphoreSignal {
  VkSemaphore semaphore = VK_NULL_HANDLE;
  uint64_t value = 0;  // ignored for binary semaphores
};

// True for the errors that mean "this machine has no Vulkan driver or device
// at all" (as opposed to devices that exist but were all rejected).
bool is_no_vulkan_device(const Error& error);

class Context {
 public:
  static Result<std::unique_ptr<Context>> create(const ContextOptions& options);
  ~Context();
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  VkInstance instance() const { return instance_; }
  VkPhysicalDevice physical_device() const { return physical_device_; }
  VkDevice device() const { return device_; }
  VkQueue queue() const { return queue_; }
  uint32_t queue_family() const { return queue_family_; }
  const VkPhysicalDeviceProperties& properties() const { return properties_; }
  const std::array<uint8_t, VK_UUID_SIZE>& device_uuid() const { return device_uuid_; }
  const std::vector<DeviceCandidate>& candidates() const { return candidates_; }
  std::string device_name() const { return properties_.deviceName; }

  bool validation_enabled() const { return messenger_ != VK_NULL_HANDLE; }
  const std::shared_ptr<ValidationCounter>& validation_counter() const { return validation_counter_; }
  bool has_swapchain() const { return has_swapchain_; }
  bool surface_enabled() const { return surface_enabled_; }  // VK_KHR_surface on the instance
  bool has_fill_mode_non_solid() const { return has_fill_mode_non_solid_; }
  // VK_KHR_external_memory_fd + VK_KHR_external_semaphore_fd: needed for CUDA interop.
  bool has_external_fd_interop() const { return has_external_memory_fd_ && has_external_semaphore_fd_; }
  bool has_external_memory_fd() const { return has_external_memory_fd_; }
  bool has_external_semaphore_fd() const { return has_external_semaphore_fd_; }
  VkSampleCountFlagBits max_samples() const { return max_samples_; }
  VkFormat depth_format() const { return VK_FORMAT_D32_SFLOAT; }

  // Memory type with all `required` properties among `type_bits`, or -1.
  int find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required) const;

  ResourceCounters& counters() { return counters_; }

  // --- GPU timeline ---------------------------------------------------------
  // Submits command buffers that signal the GPU timeline with the returned
  // value (plus any extra signals). Queue submission failing means the device
  // is lost: an invariant for this engine.
  uint64_t submit(const std::vector<VkCommandBuffer>& command_buffers, const std::vector<SemaphoreWait>& waits = {},
                  const std::vector<SemaphoreSignal>& signals = {});
  uint64_t completed_value() const;
  void wait_for(uint64_t value) const;
  void wait_idle();
  VkSemaphore timeline() const { return timeline_; }
  uint64_t last_submitted_value() const { return timeline_next_ - 1; }

  // Runs `destroy` once the GPU has finished everything submitted so far.
  void defer_destruction(std::function<void()> destroy);
  // Runs the deferred destructions whose submissions have finished.
  void collect_garbage();
  size_t pending_destructions() const { return deletion_queue_.size(); }

  // Records with `record`, submits, waits. For setup work (font uploads, tests).
  void run_one_time(const std::function<void(VkCommandBuffer)>& record);

 private:
  Context() = default;
  Status create_instance(const ContextOptions& options);
  Status choose_physical_device(const ContextOptions& options);
  Status create_device();

  VkInstance instance_ = VK_NULL_HANDLE;
  VkDebugUtilsMessengerEXT messenger_ = VK_NULL_HANDLE;
  VkPhysicalDevice physical_device_ = VK_NULL_HANDLE;
  VkDevice device_ = VK_NULL_HANDLE;
  VkQueue queue_ = VK_NULL_HANDLE;
  uint32_t queue_family_ = 0;
  VkPhysicalDeviceProperties properties_{};
  VkPhysicalDeviceMemoryProperties memory_properties_{};
  std::array<uint8_t, VK_UUID_SIZE> device_uuid_{};
  std::vector<DeviceCandidate> candidates_;
  std::shared_ptr<ValidationCounter> validation_counter_;
  bool surface_enabled_ = false;
  bool has_swapchain_ = false;
  bool has_fill_mode_non_solid_ = false;
  bool has_external_memory_fd_ = false;
  bool has_external_semaphore_fd_ = false;
  VkSampleCountFlagBits max_samples_ = VK_SAMPLE_COUNT_1_BIT;
  ResourceCounters counters_;

  VkSemaphore timeline_ = VK_NULL_HANDLE;
  uint64_t timeline_next_ = 1;
  VkCommandPool one_time_pool_ = VK_NULL_HANDLE;
  struct DeferredDestruction {
    uint64_t after_value;
    std::function<void()> destroy;
  };
  std::vector<DeferredDestruction> deletion_queue_;
};

}  // namespace cubeforge::engine
