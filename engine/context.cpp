// Instance, device selection with reasons, logical device, GPU timeline and
// deferred deletion.
#include "engine/context.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "engine/vk_check.h"

namespace cubeforge::engine {
namespace {

constexpr const char* kValidationLayer = "VK_LAYER_KHRONOS_validation";
constexpr const char* kNoDevicePhrase = "no Vulkan driver or device found";

VKAPI_ATTR VkBool32 VKAPI_CALL on_validation_message(VkDebugUtilsMessageSeverityFlagBitsEXT severity,
                                                     VkDebugUtilsMessageTypeFlagsEXT /*types*/,
                                                     const VkDebugUtilsMessengerCallbackDataEXT* data,
                                                     void* user) {
  auto* counter = static_cast<ValidationCounter*>(user);
  const char* level = "info";
  if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT) {
    counter->errors++;
    level = "error";
  } else if (severity & VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT) {
    counter->warnings++;
    level = "warning";
  }
  if (counter->print) std::fprintf(stderr, "vulkan validation %s: %s\n", level, data->pMessage);
  return VK_FALSE;
}

bool has_layer(const char* name) {
  uint32_t count = 0;
  vkEnumerateInstanceLayerProperties(&count, nullptr);
  std::vector<VkLayerProperties> layers(count);
  vkEnumerateInstanceLayerProperties(&count, layers.data());
  for (const auto& l : layers)
    if (std::strcmp(l.layerName, name) == 0) return true;
  return false;
}

bool has_instance_extension(const char* name, const char* layer = nullptr) {
  uint32_t count = 0;
  vkEnumerateInstanceExtensionProperties(layer, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateInstanceExtensionProperties(layer, &count, extensions.data());
  for (const auto& e : extensions)
    if (std::strcmp(e.extensionName, name) == 0) return true;
  return false;
}

std::vector<std::string> device_extensions(VkPhysicalDevice device) {
  uint32_t count = 0;
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, nullptr);
  std::vector<VkExtensionProperties> extensions(count);
  vkEnumerateDeviceExtensionProperties(device, nullptr, &count, extensions.data());
  std::vector<std::string> names;
  for (const auto& e : extensions) names.emplace_back(e.extensionName);
  return names;
}

bool contains(const std::vector<std::string>& names, const char* name) {
  return std::find(names.begin(), names.end(), name) != names.end();
}

const char* device_type_name(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return "discrete GPU";
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return "integrated GPU";
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return "virtual GPU";
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return "CPU";
    default: return "other";
  }
}

int type_score(VkPhysicalDeviceType type) {
  switch (type) {
    case VK_PHYSICAL_DEVICE_TYPE_DISCRETE_GPU: return 1000;
    case VK_PHYSICAL_DEVICE_TYPE_INTEGRATED_GPU: return 500;
    case VK_PHYSICAL_DEVICE_TYPE_VIRTUAL_GPU: return 200;
    case VK_PHYSICAL_DEVICE_TYPE_CPU: return 100;
    default: return 50;
  }
}

}  // namespace

bool is_no_vulkan_device(const Error& error) {
  return error.code == ErrorCode::kNotFound && error.message.find(kNoDevicePhrase) != std::string::npos;
}

Result<std::unique_ptr<Context>> Context::create(const ContextOptions& options) {
  std::unique_ptr<Context> context(new Context());
  context->validation_counter_ =
      options.validation_counter ? options.validation_counter : std::make_shared<ValidationCounter>();
  CUBEFORGE_TRY(context->create_instance(options));
  CUBEFORGE_TRY(context->choose_physical_device(options));
  CUBEFORGE_TRY(context->create_device());
  return context;
}

Status Context::create_instance(const ContextOptions& options) {
  uint32_t loader_version = VK_API_VERSION_1_0;
  if (vkEnumerateInstanceVersion(&loader_version) != VK_SUCCESS || loader_version < VK_API_VERSION_1_2)
    return make_error(ErrorCode::kUnsupported,
                      "instance: the Vulkan loader supports only Vulkan " +
                          std::to_string(VK_API_VERSION_MAJOR(loader_version)) + "." +
                          std::to_string(VK_API_VERSION_MINOR(loader_version)) +
                          "; cubeforge needs 1.2 (install a newer libvulkan1)");

  std::vector<const char*> layers;
  std::vector<const char*> extensions;
  for (const auto& e : options.instance_extensions) {
    if (!has_instance_extension(e.c_str()))
      return make_error(ErrorCode::kUnsupported, "instance: the window system needs instance extension " + e +
                                                     ", which the Vulkan loader does not offer");
    extensions.push_back(e.c_str());
    if (e == VK_KHR_SURFACE_EXTENSION_NAME) surface_enabled_ = true;
  }
  bool validation = false;
  if (options.validation != Validation::kOff) {
    if (has_layer(kValidationLayer) && has_instance_extension(VK_EXT_DEBUG_UTILS_EXTENSION_NAME)) {
      validation = true;
    } else if (options.validation == Validation::kRequired) {
      return make_error(ErrorCode::kNotFound, std::string("instance: ") + kValidationLayer +
                                                  " is required but not installed (apt install vulkan-validationlayers)");
    }
  }
  bool synchronization_validation = false;
  if (validation) {
    layers.push_back(kValidationLayer);
    extensions.push_back(VK_EXT_DEBUG_UTILS_EXTENSION_NAME);
    if (options.synchronization_validation &&
        has_instance_extension(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME, kValidationLayer)) {
      extensions.push_back(VK_EXT_VALIDATION_FEATURES_EXTENSION_NAME);
      synchronization_validation = true;
    }
  }

  VkApplicationInfo app{VK_STRUCTURE_TYPE_APPLICATION_INFO};
  app.pApplicationName = options.application_name.c_str();
  app.pEngineName = "cubeforge";
  app.apiVersion = VK_API_VERSION_1_2;

  VkDebugUtilsMessengerCreateInfoEXT messenger_info{VK_STRUCTURE_TYPE_DEBUG_UTILS_MESSENGER_CREATE_INFO_EXT};
  messenger_info.messageSeverity =
      VK_DEBUG_UTILS_MESSAGE_SEVERITY_WARNING_BIT_EXT | VK_DEBUG_UTILS_MESSAGE_SEVERITY_ERROR_BIT_EXT;
  messenger_info.messageType = VK_DEBUG_UTILS_MESSAGE_TYPE_GENERAL_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_VALIDATION_BIT_EXT |
                               VK_DEBUG_UTILS_MESSAGE_TYPE_PERFORMANCE_BIT_EXT;
  messenger_info.pfnUserCallback = on_validation_message;
  messenger_info.pUserData = validation_counter_.get();

  VkInstanceCreateInfo info{VK_STRUCTURE_TYPE_INSTANCE_CREATE_INFO};
  info.pApplicationInfo = &app;
  info.enabledLayerCount = static_cast<uint32_t>(layers.size());
  info.ppEnabledLayerNames = layers.data();
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  // Chained so that instance creation and destruction are validated too.
  if (validation) info.pNext = &messenger_info;
  VkValidationFeatureEnableEXT enables[] = {VK_VALIDATION_FEATURE_ENABLE_SYNCHRONIZATION_VALIDATION_EXT};
  VkValidationFeaturesEXT features{VK_STRUCTURE_TYPE_VALIDATION_FEATURES_EXT};
  features.enabledValidationFeatureCount = 1;
  features.pEnabledValidationFeatures = enables;
  if (synchronization_validation) {
    features.pNext = info.pNext;
    info.pNext = &features;
  }
  VkResult created = vkCreateInstance(&info, nullptr, &instance_);
  if (created == VK_ERROR_INCOMPATIBLE_DRIVER)
    return make_error(ErrorCode::kNotFound, std::string("instance: ") + kNoDevicePhrase +
                                                " (vkCreateInstance returned VK_ERROR_INCOMPATIBLE_DRIVER); install a "
                                                "driver, e.g. mesa-vulkan-drivers for lavapipe");
  VK_TRY("instance", created, "is a Vulkan driver installed? On Debian: apt install mesa-vulkan-drivers");

  if (validation) {
    auto create_messenger = reinterpret_cast<PFN_vkCreateDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkCreateDebugUtilsMessengerEXT"));
    CUBEFORGE_CHECK(create_messenger != nullptr, "VK_EXT_debug_utils was enabled but has no entry point");
    VK_TRY("instance", create_messenger(instance_, &messenger_info, nullptr, &messenger_), "");
  }
  return ok_status();
}

Status Context::choose_physical_device(const ContextOptions& options) {
  std::string filter = options.device_name_filter;
  if (filter.empty()) {
    if (const char* env = std::getenv("CUBEFORGE_VULKAN_DEVICE")) filter = env;
  }
  uint32_t count = 0;
  vkEnumeratePhysicalDevices(instance_, &count, nullptr);
  std::vector<VkPhysicalDevice> devices(count);
  vkEnumeratePhysicalDevices(instance_, &count, devices.data());

  int best_score = -1;
  for (VkPhysicalDevice device : devices) {
    VkPhysicalDeviceProperties props;
    vkGetPhysicalDeviceProperties(device, &props);
    DeviceCandidate candidate;
    candidate.name = props.deviceName;
    candidate.type = props.deviceType;

    VkPhysicalDeviceVulkan12Features features12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
    VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
    if (props.apiVersion >= VK_API_VERSION_1_2) {
      features.pNext = &features12;
      vkGetPhysicalDeviceFeatures2(device, &features);
    }
    uint32_t family_count = 0;
    vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, nullptr);
    std::vector<VkQueueFamilyProperties> families(family_count);
    vkGetPhysicalDeviceQueueFamilyProperties(device, &family_count, families.data());
    bool has_graphics = std::any_of(families.begin(), families.end(),
                                    [](const auto& f) { return (f.queueFlags & VK_QUEUE_GRAPHICS_BIT) != 0; });
    VkFormatProperties depth_props;
    vkGetPhysicalDeviceFormatProperties(device, VK_FORMAT_D32_SFLOAT, &depth_props);

    if (!filter.empty() && candidate.name.find(filter) == std::string::npos)
      candidate.rejection = "name does not contain \"" + filter + "\" (CUBEFORGE_VULKAN_DEVICE / device filter)";
    else if (props.apiVersion < VK_API_VERSION_1_2)
      candidate.rejection = "supports Vulkan " + std::to_string(VK_API_VERSION_MAJOR(props.apiVersion)) + "." +
                            std::to_string(VK_API_VERSION_MINOR(props.apiVersion)) + ", needs 1.2";
    else if (!features12.timelineSemaphore)
      candidate.rejection = "no timeline semaphores";
    else if (!has_graphics)
      candidate.rejection = "no graphics queue";
    else if (!(depth_props.optimalTilingFeatures & VK_FORMAT_FEATURE_DEPTH_STENCIL_ATTACHMENT_BIT))
      candidate.rejection = "D32_SFLOAT is not a depth attachment format";
    else
      candidate.score = type_score(props.deviceType);
    candidates_.push_back(candidate);
    if (candidate.rejection.empty() && candidate.score > best_score) {
      best_score = candidate.score;
      physical_device_ = device;
    }
  }
  if (physical_device_ == VK_NULL_HANDLE) {
    std::string message = "device selection: no usable Vulkan device";
    if (candidates_.empty())
      message += std::string(" (") + kNoDevicePhrase + "; install a driver, e.g. mesa-vulkan-drivers for lavapipe)";
    for (const auto& c : candidates_)
      message += "; " + c.name + " (" + device_type_name(c.type) + ") rejected: " + c.rejection;
    return make_error(ErrorCode::kNotFound, message);
  }
  return ok_status();
}

Status Context::create_device() {
  VkPhysicalDeviceIDProperties id_props{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceProperties2 props2{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2};
  props2.pNext = &id_props;
  vkGetPhysicalDeviceProperties2(physical_device_, &props2);
  properties_ = props2.properties;
  std::memcpy(device_uuid_.data(), id_props.deviceUUID, VK_UUID_SIZE);
  vkGetPhysicalDeviceMemoryProperties(physical_device_, &memory_properties_);

  VkSampleCountFlags counts =
      properties_.limits.framebufferColorSampleCounts & properties_.limits.framebufferDepthSampleCounts;
  for (VkSampleCountFlagBits s : {VK_SAMPLE_COUNT_8_BIT, VK_SAMPLE_COUNT_4_BIT, VK_SAMPLE_COUNT_2_BIT}) {
    if (counts & s) {
      max_samples_ = s;
      break;
    }
  }

  uint32_t family_count = 0;
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device_, &family_count, nullptr);
  std::vector<VkQueueFamilyProperties> families(family_count);
  vkGetPhysicalDeviceQueueFamilyProperties(physical_device_, &family_count, families.data());
  for (uint32_t i = 0; i < family_count; ++i) {
    if (families[i].queueFlags & VK_QUEUE_GRAPHICS_BIT) {
      queue_family_ = i;
      break;
    }
  }

  auto available = device_extensions(physical_device_);
  std::vector<const char*> extensions;
  // Swapchains need VK_KHR_surface on the instance: only windowed contexts ask for it.
  if (contains(available, VK_KHR_SWAPCHAIN_EXTENSION_NAME) && surface_enabled_) {
    extensions.push_back(VK_KHR_SWAPCHAIN_EXTENSION_NAME);
    has_swapchain_ = true;
  }
  if (contains(available, VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_EXTERNAL_MEMORY_FD_EXTENSION_NAME);
    has_external_memory_fd_ = true;
  }
  if (contains(available, VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME)) {
    extensions.push_back(VK_KHR_EXTERNAL_SEMAPHORE_FD_EXTENSION_NAME);
    has_external_semaphore_fd_ = true;
  }

  VkPhysicalDeviceFeatures supported;
  vkGetPhysicalDeviceFeatures(physical_device_, &supported);
  VkPhysicalDeviceVulkan12Features features12{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_VULKAN_1_2_FEATURES};
  features12.timelineSemaphore = VK_TRUE;
  VkPhysicalDeviceFeatures2 features{VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2};
  features.pNext = &features12;
  // Wireframe overlay draws with VK_POLYGON_MODE_LINE; without it the overlay is unavailable.
  features.features.fillModeNonSolid = supported.fillModeNonSolid;
  has_fill_mode_non_solid_ = supported.fillModeNonSolid == VK_TRUE;

  float priority = 1.0f;
  VkDeviceQueueCreateInfo queue_info{VK_STRUCTURE_TYPE_DEVICE_QUEUE_CREATE_INFO};
  queue_info.queueFamilyIndex = queue_family_;
  queue_info.queueCount = 1;
  queue_info.pQueuePriorities = &priority;

  VkDeviceCreateInfo info{VK_STRUCTURE_TYPE_DEVICE_CREATE_INFO};
  info.pNext = &features;
  info.queueCreateInfoCount = 1;
  info.pQueueCreateInfos = &queue_info;
  info.enabledExtensionCount = static_cast<uint32_t>(extensions.size());
  info.ppEnabledExtensionNames = extensions.data();
  VK_TRY("device", vkCreateDevice(physical_device_, &info, nullptr, &device_),
         std::string("creating a logical device on ") + properties_.deviceName);
  vkGetDeviceQueue(device_, queue_family_, 0, &queue_);

  VkSemaphoreTypeCreateInfo type_info{VK_STRUCTURE_TYPE_SEMAPHORE_TYPE_CREATE_INFO};
  type_info.semaphoreType = VK_SEMAPHORE_TYPE_TIMELINE;
  type_info.initialValue = 0;
  VkSemaphoreCreateInfo semaphore_info{VK_STRUCTURE_TYPE_SEMAPHORE_CREATE_INFO};
  semaphore_info.pNext = &type_info;
  VK_TRY("device", vkCreateSemaphore(device_, &semaphore_info, nullptr, &timeline_), "GPU timeline");

  VkCommandPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_COMMAND_POOL_CREATE_INFO};
  pool_info.flags = VK_COMMAND_POOL_CREATE_TRANSIENT_BIT;
  pool_info.queueFamilyIndex = queue_family_;
  VK_TRY("device", vkCreateCommandPool(device_, &pool_info, nullptr, &one_time_pool_), "one-time command pool");
  return ok_status();
}

Context::~Context() {
  if (device_ != VK_NULL_HANDLE) {
    vkDeviceWaitIdle(device_);
    for (auto& d : deletion_queue_) d.destroy();
    deletion_queue_.clear();
    vkDestroyCommandPool(device_, one_time_pool_, nullptr);
    vkDestroySemaphore(device_, timeline_, nullptr);
    vkDestroyDevice(device_, nullptr);
  }
  if (messenger_ != VK_NULL_HANDLE) {
    auto destroy_messenger = reinterpret_cast<PFN_vkDestroyDebugUtilsMessengerEXT>(
        vkGetInstanceProcAddr(instance_, "vkDestroyDebugUtilsMessengerEXT"));
    if (destroy_messenger) destroy_messenger(instance_, messenger_, nullptr);
  }
  if (instance_ != VK_NULL_HANDLE) vkDestroyInstance(instance_, nullptr);
}

int Context::find_memory_type(uint32_t type_bits, VkMemoryPropertyFlags required) const {
  for (uint32_t i = 0; i < memory_properties_.memoryTypeCount; ++i) {
    if ((type_bits & (1u << i)) && (memory_properties_.memoryTypes[i].propertyFlags & required) == required)
      return static_cast<int>(i);
  }
  return -1;
}

uint64_t Context::submit(const std::vector<VkCommandBuffer>& command_buffers, const std::vector<SemaphoreWait>& waits,
                         const std::vector<SemaphoreSignal>& signals) {
  uint64_t value = timeline_next_++;
  std::vector<VkSemaphore> wait_semaphores;
  std::vector<uint64_t> wait_values;
  std::vector<VkPipelineStageFlags> wait_stages;
  for (const auto& w : waits) {
    wait_semaphores.push_back(w.semaphore);
    wait_values.push_back(w.value);
    wait_stages.push_back(w.stage);
  }
  std::vector<VkSemaphore> signal_semaphores{timeline_};
  std::vector<uint64_t> signal_values{value};
  for (const auto& s : signals) {
    signal_semaphores.push_back(s.semaphore);
    signal_values.push_back(s.value);
  }
  VkTimelineSemaphoreSubmitInfo timeline_info{VK_STRUCTURE_TYPE_TIMELINE_SEMAPHORE_SUBMIT_INFO};
  timeline_info.waitSemaphoreValueCount = static_cast<uint32_t>(wait_values.size());
  timeline_info.pWaitSemaphoreValues = wait_values.data();
  timeline_info.signalSemaphoreValueCount = static_cast<uint32_t>(signal_values.size());
  timeline_info.pSignalSemaphoreValues = signal_values.data();

  VkSubmitInfo info{VK_STRUCTURE_TYPE_SUBMIT_INFO};
  info.pNext = &timeline_info;
  info.waitSemaphoreCount = static_cast<uint32_t>(wait_semaphores.size());
  info.pWaitSemaphores = wait_semaphores.data();
  info.pWaitDstStageMask = wait_stages.data();
  info.commandBufferCount = static_cast<uint32_t>(command_buffers.size());
  info.pCommandBuffers = command_buffers.data();
  info.signalSemaphoreCount = static_cast<uint32_t>(signal_semaphores.size());
  info.pSignalSemaphores = signal_semaphores.data();
  VK_CHECK(vkQueueSubmit(queue_, 1, &info, VK_NULL_HANDLE), "queue submission failed: device lost or out of memory");
  return value;
}

uint64_t Context::completed_value() const {
  uint64_t value = 0;
  VK_CHECK(vkGetSemaphoreCounterValue(device_, timeline_, &value), "reading the GPU timeline");
  return value;
}

void Context::wait_for(uint64_t value) const {
  if (value == 0) return;
  VkSemaphoreWaitInfo info{VK_STRUCTURE_TYPE_SEMAPHORE_WAIT_INFO};
  info.semaphoreCount = 1;
  info.pSemaphores = &timeline_;
  info.pValues = &value;
  VK_CHECK(vkWaitSemaphores(device_, &info, UINT64_MAX), "waiting on the GPU timeline: device lost?");
}

void Context::wait_idle() {
  VK_CHECK(vkDeviceWaitIdle(device_), "device lost");
  collect_garbage();
}

void Context::defer_destruction(std::function<void()> destroy) {
  deletion_queue_.push_back({last_submitted_value(), std::move(destroy)});
}

void Context::collect_garbage() {
  if (deletion_queue_.empty()) return;
  uint64_t done = completed_value();
  std::vector<DeferredDestruction> still_pending;
  for (auto& d : deletion_queue_) {
    if (d.after_value <= done)
      d.destroy();
    else
      still_pending.push_back(std::move(d));
  }
  deletion_queue_ = std::move(still_pending);
}

void Context::run_one_time(const std::function<void(VkCommandBuffer)>& record) {
  VkCommandBufferAllocateInfo alloc{VK_STRUCTURE_TYPE_COMMAND_BUFFER_ALLOCATE_INFO};
  alloc.commandPool = one_time_pool_;
  alloc.level = VK_COMMAND_BUFFER_LEVEL_PRIMARY;
  alloc.commandBufferCount = 1;
  VkCommandBuffer cmd;
  VK_CHECK(vkAllocateCommandBuffers(device_, &alloc, &cmd), "one-time command buffer");
  VkCommandBufferBeginInfo begin{VK_STRUCTURE_TYPE_COMMAND_BUFFER_BEGIN_INFO};
  begin.flags = VK_COMMAND_BUFFER_USAGE_ONE_TIME_SUBMIT_BIT;
  VK_CHECK(vkBeginCommandBuffer(cmd, &begin), "one-time command buffer");
  record(cmd);
  VK_CHECK(vkEndCommandBuffer(cmd), "one-time command buffer");
  wait_for(submit({cmd}));
  vkFreeCommandBuffers(device_, one_time_pool_, 1, &cmd);
}

}  // namespace cubeforge::engine
