// The desktop app's window, panels and main loop: see desktop_app.h.
//
// Main loop in Dear ImGui's order: poll -> drain the worker's messages ->
// next script command when idle -> viewport mouse controls -> panels ->
// draw (scene + ImGui overlay) -> present. Everything here runs on the UI
// thread; only GenerationWorker's job runs elsewhere.
#include "app/desktop/desktop_app.h"

#include <imgui.h>
#include <imgui_stdlib.h>
#include <backends/imgui_impl_glfw.h>
#include <backends/imgui_impl_vulkan.h>

#include <algorithm>
#include <cfloat>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <deque>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <thread>
#include <cstdlib>
#include <unistd.h>

#include "app/desktop/core/app_settings.h"
#include "app/desktop/core/data_folder.h"
#include "app/desktop/core/file_name_template.h"
#include "app/desktop/core/generation_progress.h"
#include "app/desktop/core/generation_worker.h"
#include "app/desktop/core/history_store.h"
#include "app/desktop/core/script.h"
#include "app/desktop/thumbnail_mosaic.h"
#include "inference/core/untrusted_text.h"
#include "engine/context.h"
#include "engine/image_output.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"
#include "engine/window_target.h"
#include "inference/geometry/mesh_io.h"

namespace cubeforge::app {

namespace {

using Clock = std::chrono::steady_clock;

void abort_on_vulkan_error(VkResult result) {
  if (result != VK_SUCCESS) ::cubeforge::check_failed("ImGui Vulkan backend call", __FILE__, __LINE__, "VkResult");
}

double ms_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

struct FrameTimeSummary {
  int frames = 0;
  double mean_ms = 0, p95_ms = 0, max_ms = 0;
};

FrameTimeSummary summarise(std::vector<float> times) {
  FrameTimeSummary s;
  if (times.empty()) return s;
  s.frames = static_cast<int>(times.size());
  double sum = 0;
  for (float t : times) sum += t;
  s.mean_ms = sum / times.size();
  std::sort(times.begin(), times.end());
  s.p95_ms = times[std::min(times.size() - 1, static_cast<size_t>(std::ceil(0.95 * times.size())) - 1)];
  s.max_ms = times.back();
  return s;
}

// Tooltip on the last item, shown even when it is disabled (the reason it is).
// Default panel layout (first run; then imgui.ini): settings on the left,
// statistics and history on the right, export and view controls low in the
// middle, the log along the bottom, the viewport behind them all with its
// centre left free.
constexpr float kLogHeight = 110.f;
constexpr float kSideWidth = 300.f;
constexpr float kViewPanelHeight = 150.f;
constexpr int kThumbnailCells = 20;
constexpr double kFramePeriodMs = 1000.0 / 60.0;  // history thumbnails: 20x20 mosaic cells

void reason_tooltip(const std::string& text) {
  if (!text.empty() && ImGui::IsItemHovered(ImGuiHoveredFlags_AllowWhenDisabled)) ImGui::SetTooltip("%s", text.c_str());
}

struct LogLine {
  bool error = false;
  std::string text;
};

class DesktopApp {
 public:
  explicit DesktopApp(LaunchOptions options) : options_(std::move(options)) {}
  ~DesktopApp() { shutdown(); }
  int run();

 private:
  // --- start and stop ---
  bool start_window_and_engine();
  bool start_imgui();
  void shutdown();

  // --- log ---
  void log(const std::string& text) { add_log(false, text); }
  void log_error(const std::string& text) { add_log(true, text); }
  void add_log(bool error, const std::string& text);

  // --- actions ---
  void load_model(const std::string& folder);
  void start_generation();
  void start_latency_demo();
  Status export_current(const std::string& path);
  Status screenshot(const std::string& path);
  void show_mesh(const Mesh& mesh, bool frame_camera);
  void restore_history(const HistoryEntry& entry);
  void save_settings_now();

  // --- per frame ---
  void handle_messages();
  void handle_run_finished(worker_message::RunFinished& finished);
  void run_script_step();
  void handle_viewport_input(float frame_seconds);
  void draw_panels();
  void draw_generate_panel();
  void draw_settings();
  void draw_stats_panel();
  void draw_token_grid();
  void draw_history_panel();
  void draw_view_panel();
  void draw_log_panel();
  void draw_message_popup();

  LaunchOptions options_;
  std::filesystem::path data_folder_;
  std::string imgui_ini_path_;
  AppSettings settings_;
  std::ofstream log_file_;
  std::vector<LogLine> log_lines_;
  int errors_logged_ = 0;
  std::string popup_message_;
  bool popup_pending_ = false;

  // Engine
  GLFWwindow* window_ = nullptr;
  bool glfw_ready_ = false;
  std::shared_ptr<engine::ValidationCounter> validation_;
  std::unique_ptr<engine::Context> context_;
  // The 3D view fills the window behind the ImGui panels. (Debian's ImGui
  // 1.86 Vulkan backend binds only its font texture, so an offscreen view
  // cannot be shown through ImGui::Image.)
  std::unique_ptr<engine::Renderer> renderer_;
  std::unique_ptr<engine::WindowTarget> target_;
  std::unique_ptr<engine::OffscreenTarget> capture_target_;  // screenshots and thumbnails
  VkDescriptorPool imgui_pool_ = VK_NULL_HANDLE;
  bool imgui_ready_ = false;
  engine::OrbitCamera camera_;
  engine::SceneSettings scene_;
  uint32_t last_min_image_count_ = 0;

  // Model and generation
  GenerationWorker worker_;
  std::string loading_folder_;
  std::string model_folder_field_;  // the text field; becomes the model folder once it loads
  std::string load_step_;
  double load_fraction_ = 0;
  std::string model_status_;
  GenerationProgress progress_;
  std::string run_label_;
  bool generating_ = false;
  Mesh current_mesh_;
  std::string current_prompt_;
  uint64_t current_seed_ = 0;
  int preview_uploads_ = 0;
  PreviewCost last_preview_cost_;
  std::optional<double> last_decode_ms_without_preview_;
  std::optional<double> last_decode_ms_with_preview_;
  std::vector<worker_message::LatencyResult> latency_bars_;
  bool latency_running_ = false;

  // History and export
  std::optional<HistoryStore> history_;
  // Thumbnails read so far by entry id; empty when the PNG could not be read.
  std::map<std::string, ThumbnailMosaic> thumbnails_;
  std::string export_result_;
  bool export_failed_ = false;

  // Frame times
  std::deque<float> frame_ms_;              // the last kFrameWindow frames
  std::vector<float> generating_frame_ms_;  // frames while the current run generates
  FrameTimeSummary last_generation_frames_;
  static constexpr size_t kFrameWindow = 240;

  // Script
  std::vector<ScriptCommand> script_;
  size_t script_next_ = 0;
  int idle_frames_left_ = 0;
  std::vector<float> idle_frame_ms_;
  bool quit_ = false;
  bool script_mode_ = false;
};

void DesktopApp::add_log(bool error, const std::string& raw_text) {
  const std::string text = escape_untrusted(raw_text);  // messages quote names and contents of files
  log_lines_.push_back({error, text});
  if (log_lines_.size() > 2000) log_lines_.erase(log_lines_.begin(), log_lines_.begin() + 500);
  if (error) {
    ++errors_logged_;
    popup_message_ = text;
    popup_pending_ = true;
  }
  const char* tag = error ? "error: " : "";
  if (log_file_) log_file_ << tag << text << std::endl;
  std::fprintf(error ? stderr : stdout, "cubeforge: %s%s\n", tag, text.c_str());
}

bool DesktopApp::start_window_and_engine() {
  if (!glfwInit()) {
    log_error("cannot open a window: GLFW found no display (is DISPLAY set?). Use cubeforge-cli for generation "
              "without a display.");
    return false;
  }
  glfw_ready_ = true;
  auto extensions = engine::window_instance_extensions();
  if (!extensions.ok()) {
    log_error("no Vulkan window support: " + extensions.error().to_string());
    return false;
  }
  engine::ContextOptions context_options;
  context_options.application_name = "cubeforge";
  validation_ = std::make_shared<engine::ValidationCounter>();
  context_options.validation_counter = validation_;
  // Script runs (the tests) check that the validation layer stays silent.
  context_options.validation = script_mode_ ? engine::Validation::kIfAvailable : engine::Validation::kOff;
  // CUBEFORGE_SYNC_VALIDATION=1 adds hazard checks between commands and frames (slow; tests).
  if (const char* sync = std::getenv("CUBEFORGE_SYNC_VALIDATION"); sync && std::string(sync) == "1")
    context_options.synchronization_validation = true;
  context_options.instance_extensions = *extensions;
  auto context = engine::Context::create(context_options);
  if (!context.ok()) {
    log_error(std::string(engine::is_no_vulkan_device(context.error()) ? "no Vulkan device: " : "Vulkan: ") +
              context.error().to_string() + " (install a Vulkan driver; Mesa's lavapipe works without a GPU)");
    return false;
  }
  context_ = std::move(context).value();
  auto renderer = engine::Renderer::create(*context_);
  if (!renderer.ok()) {
    log_error("viewport renderer: " + renderer.error().to_string());
    return false;
  }
  renderer_ = std::move(renderer).value();

  int width = options_.width > 0 ? options_.width : settings_.window_width;
  int height = options_.height > 0 ? options_.height : settings_.window_height;
  glfwWindowHint(GLFW_CLIENT_API, GLFW_NO_API);
  window_ = glfwCreateWindow(width, height, "cubeforge", nullptr, nullptr);
  if (!window_) {
    log_error("cannot create a window of " + std::to_string(width) + "x" + std::to_string(height));
    return false;
  }
  engine::WindowOptions window_options;
  window_options.vsync = !script_mode_;  // scripts run as fast as the machine allows
  // On a software rasteriser (lavapipe) 4x MSAA of the whole window costs more
  // frame time than the UI can spare while generation shares the cores.
  if (context_->properties().deviceType == VK_PHYSICAL_DEVICE_TYPE_CPU)
    window_options.samples = VK_SAMPLE_COUNT_1_BIT;
  auto target = engine::WindowTarget::create(*renderer_, window_, window_options);
  if (!target.ok()) {
    log_error("window swapchain: " + target.error().to_string());
    return false;
  }
  target_ = std::move(target).value();
  log("viewport on " + context_->device_name() +
      (context_->validation_enabled() ? std::string(" (Vulkan validation layer on)") : std::string()));
  return true;
}

bool DesktopApp::start_imgui() {
  VkDescriptorPoolSize pool_size{VK_DESCRIPTOR_TYPE_COMBINED_IMAGE_SAMPLER, 16};
  VkDescriptorPoolCreateInfo pool_info{VK_STRUCTURE_TYPE_DESCRIPTOR_POOL_CREATE_INFO};
  pool_info.flags = VK_DESCRIPTOR_POOL_CREATE_FREE_DESCRIPTOR_SET_BIT;
  pool_info.maxSets = 16;
  pool_info.poolSizeCount = 1;
  pool_info.pPoolSizes = &pool_size;
  if (vkCreateDescriptorPool(context_->device(), &pool_info, nullptr, &imgui_pool_) != VK_SUCCESS) {
    log_error("cannot create the ImGui descriptor pool");
    return false;
  }
  IMGUI_CHECKVERSION();
  ImGui::CreateContext();
  imgui_ini_path_ = (data_folder_ / "imgui.ini").string();
  if (Status layout = check_data_file(imgui_ini_path_); layout.ok()) {
    ImGui::GetIO().IniFilename = imgui_ini_path_.c_str();
  } else {
    ImGui::GetIO().IniFilename = nullptr;  // the default layout, not saved
    log_error("window layout: " + layout.error().to_string());
  }
  ImGui::StyleColorsDark();
  ImGui::GetStyle().Alpha = 0.96f;
  ImGui_ImplGlfw_InitForVulkan(window_, true);
  engine::WindowVulkanHandles handles = target_->vulkan_handles();
  ImGui_ImplVulkan_InitInfo info{};
  info.Instance = handles.instance;
  info.PhysicalDevice = handles.physical_device;
  info.Device = handles.device;
  info.QueueFamily = handles.queue_family;
  info.Queue = handles.queue;
  info.DescriptorPool = imgui_pool_;
  info.MinImageCount = handles.min_image_count;
  info.ImageCount = handles.image_count;
  info.MSAASamples = handles.samples;
  info.CheckVkResultFn = abort_on_vulkan_error;
  ImGui_ImplVulkan_Init(&info, handles.render_pass);
  last_min_image_count_ = handles.min_image_count;
  bool fonts = false;
  context_->run_one_time([&](VkCommandBuffer cmd) { fonts = ImGui_ImplVulkan_CreateFontsTexture(cmd); });
  ImGui_ImplVulkan_DestroyFontUploadObjects();
  imgui_ready_ = true;
  if (!fonts) log_error("cannot upload the ImGui font texture");
  return fonts;
}

void DesktopApp::shutdown() {
  if (context_) context_->wait_idle();
  if (imgui_ready_) {
    ImGui_ImplVulkan_Shutdown();
    ImGui_ImplGlfw_Shutdown();
    ImGui::DestroyContext();
    imgui_ready_ = false;
  }
  if (imgui_pool_ != VK_NULL_HANDLE) {
    vkDestroyDescriptorPool(context_->device(), imgui_pool_, nullptr);
    imgui_pool_ = VK_NULL_HANDLE;
  }
  thumbnails_.clear();
  capture_target_.reset();
  target_.reset();
  renderer_.reset();
  context_.reset();
  if (window_) glfwDestroyWindow(window_);
  window_ = nullptr;
  if (glfw_ready_) glfwTerminate();
  glfw_ready_ = false;
}

// --- actions ---------------------------------------------------------------

void DesktopApp::load_model(const std::string& folder) {
  if (folder.empty()) {
    model_status_ = "No model folder. Point 'Model folder' at a Cube 3D model folder. ";
    model_status_ += kModelFolderHelp;
    return;
  }
  if (!worker_.load_model(folder)) {
    log_error("cannot load a model while a generation or another load runs; cancel it first");
    return;
  }
  loading_folder_ = folder;
  model_folder_field_ = folder;
  load_step_ = "starting";
  load_fraction_ = 0;
  log("loading model " + folder);
}

void DesktopApp::start_generation() {
  if (!worker_.has_model()) {
    log_error("no model loaded: choose a model folder in Settings first");
    return;
  }
  GenerationRequest request = make_request(settings_);
  PreviewOptions preview;
  preview.enabled = settings_.progressive_preview;
  preview.every_tokens = settings_.preview_every;
  preview.resolution = settings_.preview_resolution;
  if (!worker_.generate(request, preview)) {
    log_error("a job is already running; wait for it or cancel it");
    return;
  }
  generating_ = true;
  generating_frame_ms_.clear();
  preview_uploads_ = 0;
  log("generating \"" + request.prompt + "\" (seed " + std::to_string(request.seed) + ", resolution " +
      std::to_string(request.resolution) + ")");
}

void DesktopApp::start_latency_demo() {
  if (!worker_.has_model()) {
    log_error("no model loaded: choose a model folder in Settings first");
    return;
  }
  if (!worker_.run_latency_demo(make_request(settings_))) {
    log_error("a job is already running; wait for it or cancel it");
    return;
  }
  latency_bars_.clear();
  latency_running_ = true;
  generating_ = true;
  generating_frame_ms_.clear();
  log("latency demo: the same prompt without and with the KV cache");
}

Status DesktopApp::export_current(const std::string& path) {
  if (current_mesh_.empty())
    return make_error(ErrorCode::kInvalidArgument, "nothing to export yet: generate a shape or pick one from History");
  return export_mesh(current_mesh_, path);
}

Status DesktopApp::screenshot(const std::string& path) {
  VkExtent2D extent = target_->extent();
  if (extent.width == 0 || extent.height == 0) extent = {640, 480};
  if (!capture_target_) {
    engine::OffscreenOptions offscreen;
    offscreen.width = extent.width;
    offscreen.height = extent.height;
    CUBEFORGE_ASSIGN_OR_RETURN(capture_target_, engine::OffscreenTarget::create(*renderer_, offscreen));
  } else if (capture_target_->extent().width != extent.width || capture_target_->extent().height != extent.height) {
    CUBEFORGE_TRY(capture_target_->resize(extent.width, extent.height));
  }
  return engine::save_screenshot(*capture_target_, camera_, scene_, path);
}

void DesktopApp::show_mesh(const Mesh& mesh, bool frame_camera) {
  Status uploaded = renderer_->meshes().upload(mesh);
  if (!uploaded.ok()) {
    log_error("viewport upload: " + uploaded.error().to_string());
    return;
  }
  if (frame_camera && !mesh.empty()) {
    VkExtent2D extent = target_->extent();
    float aspect = extent.height > 0 ? float(extent.width) / float(extent.height) : 1.f;
    camera_.frame(renderer_->mesh_bounds(), aspect);
  }
}

void DesktopApp::restore_history(const HistoryEntry& entry) {
  auto mesh = history_->load_mesh(entry);
  if (!mesh.ok()) {
    log_error("history entry " + entry.id + ": " + mesh.error().to_string());
    return;
  }
  auto restored = settings_from_json(entry.settings);
  if (restored.ok()) {
    // Keep what is about this machine and window, take what made the shape.
    AppSettings merged = *restored;
    merged.model_folder = settings_.model_folder;
    merged.recent_folders = settings_.recent_folders;
    merged.export_folder = settings_.export_folder;
    merged.export_template = settings_.export_template;
    merged.window_width = settings_.window_width;
    merged.window_height = settings_.window_height;
    settings_ = merged;
  } else {
    log_error("history entry " + entry.id + " has settings this version cannot read: " + restored.error().message);
  }
  current_mesh_ = std::move(*mesh);
  current_prompt_ = entry.prompt;
  current_seed_ = entry.seed;
  show_mesh(current_mesh_, true);
  log("restored " + entry.id + ": \"" + entry.prompt + "\"");
}

void DesktopApp::save_settings_now() {
  Status saved = save_settings(settings_, data_folder_ / "settings.json");
  if (!saved.ok()) log_error("settings: " + saved.error().to_string());
}

// --- worker messages -------------------------------------------------------

void DesktopApp::handle_messages() {
  for (WorkerMessage& message : worker_.drain()) {
    std::visit(
        [&](auto& m) {
          using M = std::decay_t<decltype(m)>;
          if constexpr (std::is_same_v<M, worker_message::LoadProgress>) {
            load_step_ = m.step;
            load_fraction_ = m.fraction;
          } else if constexpr (std::is_same_v<M, worker_message::ModelLoaded>) {
            loading_folder_.clear();
            settings_.model_folder = m.summary.folder;
            remember_folder(settings_, m.summary.folder);
            char line[256];
            std::snprintf(line, sizeof line, "model loaded in %.0f ms: %d shape tokens", m.summary.load_ms,
                          m.summary.shape_tokens);
            model_status_ = line;
            log(model_status_ + " (" + m.summary.folder + ")");
          } else if constexpr (std::is_same_v<M, worker_message::LoadFailed>) {
            std::string folder = loading_folder_;
            loading_folder_.clear();
            if (m.error.code == ErrorCode::kCancelled) {
              model_status_ = "loading cancelled";
              log("loading " + folder + " cancelled");
            } else {
              model_status_ = "could not load " + folder;
              log_error("model folder '" + folder + "': " + m.error.to_string());
            }
          } else if constexpr (std::is_same_v<M, worker_message::RunStarted>) {
            progress_.reset();
            run_label_ = m.label;
          } else if constexpr (std::is_same_v<M, worker_message::Event>) {
            progress_.apply(m.event, m.elapsed_ms);
          } else if constexpr (std::is_same_v<M, worker_message::Preview>) {
            show_mesh(m.mesh, preview_uploads_ == 0 && current_mesh_.empty());
            ++preview_uploads_;
          } else if constexpr (std::is_same_v<M, worker_message::RunFinished>) {
            handle_run_finished(m);
          } else if constexpr (std::is_same_v<M, worker_message::LatencyResult>) {
            latency_bars_.push_back(m);
            if (m.available) {
              char line[200];
              std::snprintf(line, sizeof line, "latency demo, %s: TPOT %.2f ms, first token %.1f ms, total %.0f ms",
                            m.label.c_str(), m.mean_tpot_ms, m.time_to_first_token_ms, m.total_ms);
              log(line);
            } else {
              log("latency demo, " + m.label + ": not run (" + m.unavailable_reason + ")");
            }
          } else if constexpr (std::is_same_v<M, worker_message::LatencyDemoFinished>) {
            latency_running_ = false;
            generating_ = false;
          } else if constexpr (std::is_same_v<M, worker_message::Log>) {
            add_log(m.error, m.text);
          }
        },
        message);
  }
}

void DesktopApp::handle_run_finished(worker_message::RunFinished& finished) {
  if (!latency_running_) generating_ = false;
  last_generation_frames_ = summarise(generating_frame_ms_);
  if (last_generation_frames_.frames > 0) {
    char line[200];
    std::snprintf(line, sizeof line, "frame times while generating: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d frames)",
                  last_generation_frames_.mean_ms, last_generation_frames_.p95_ms, last_generation_frames_.max_ms,
                  last_generation_frames_.frames);
    log(line);
  }
  if (!finished.result.ok()) {
    if (finished.result.error().code == ErrorCode::kCancelled) log("generation cancelled");
    else log_error("generation failed: " + finished.result.error().to_string());
    // A cancelled or failed run leaves the last finished mesh on screen, not a preview.
    if (preview_uploads_ > 0) show_mesh(current_mesh_, false);
    return;
  }
  GenerationResult& result = *finished.result;
  if (!result.stats.has_surface) {
    log_error("the decoded shape has no surface at resolution " + std::to_string(finished.request.resolution) +
              "; try another seed or prompt");
    if (preview_uploads_ > 0) show_mesh(current_mesh_, false);
    return;
  }
  const bool first_mesh = current_mesh_.empty();
  current_mesh_ = std::move(result.mesh);
  current_prompt_ = finished.request.prompt;
  current_seed_ = finished.request.seed;
  auto upload_started = Clock::now();
  show_mesh(current_mesh_, first_mesh || preview_uploads_ > 0);
  progress_.set_upload_ms(ms_between(upload_started, Clock::now()));

  if (finished.preview.previews > 0 || finished.preview.skipped > 0) {
    last_preview_cost_ = finished.preview;
    last_decode_ms_with_preview_ = result.timings.decode_ms;
  } else {
    last_decode_ms_without_preview_ = result.timings.decode_ms;
  }
  char line[256];
  std::snprintf(line, sizeof line,
                "%s done: %lld faces, total %.0f ms, first token %.1f ms, %.1f tokens/s, TPOT %.2f ms",
                finished.label.c_str(), static_cast<long long>(result.stats.faces), finished.wall_ms,
                result.time_to_first_token_ms, result.tokens_per_second, progress_.mean_tpot_ms());
  log(line);

  if (!history_) return;
  HistoryEntry entry;
  entry.prompt = finished.request.prompt;
  entry.seed = finished.request.seed;
  AppSettings used = settings_;
  used.prompt = finished.request.prompt;
  used.seed = finished.request.seed;
  used.kv_cache = finished.request.use_kv_cache;
  entry.settings = settings_to_json(used);
  entry.timings.total_ms = finished.wall_ms;
  entry.timings.time_to_first_token_ms = result.time_to_first_token_ms;
  entry.timings.mean_tpot_ms = progress_.mean_tpot_ms();
  entry.timings.tokens_per_second = result.tokens_per_second;
  for (int s = 0; s < kAppStageCount; ++s)
    if (progress_.stage_ms()[s]) entry.timings.stages_ms[app_stage_name(AppStage(s))] = *progress_.stage_ms()[s];
  entry.settings["run"] = finished.label;
  auto added = history_->add(entry, current_mesh_);
  if (!added.ok()) {
    log_error("history: " + added.error().to_string());
    return;
  }
  // The thumbnail: a small offscreen render of the framed mesh.
  auto thumbnail = engine::OffscreenTarget::create(*renderer_, engine::OffscreenOptions{128, 128});
  if (thumbnail.ok()) {
    engine::OrbitCamera view;
    view.yaw_degrees = 30.f;
    view.pitch_degrees = 20.f;
    view.frame(renderer_->mesh_bounds(), 1.f);
    Status written = engine::save_screenshot(**thumbnail, view, scene_, history_->thumbnail_path(*added).string());
    if (!written.ok()) log_error("history thumbnail: " + written.error().to_string());
  } else {
    log_error("history thumbnail: " + thumbnail.error().to_string());
  }
  save_settings_now();
}

// --- script ----------------------------------------------------------------

void DesktopApp::run_script_step() {
  if (script_next_ >= script_.size()) return;
  const ScriptCommand command = script_[script_next_++];
  const std::string where = "script line " + std::to_string(command.line) + ": ";
  switch (command.kind) {
    case ScriptCommand::Kind::kModel: {
      std::filesystem::path folder = command.argument;
      if (folder.is_relative()) folder = std::filesystem::path(options_.script).parent_path() / folder;
      load_model(folder.lexically_normal().string());
      break;
    }
    case ScriptCommand::Kind::kPrompt:
      settings_.prompt = command.argument;
      break;
    case ScriptCommand::Kind::kSet: {
      size_t space = command.argument.find_first_of(" \t");
      std::string key = command.argument.substr(0, space);
      std::string value = command.argument.substr(command.argument.find_first_not_of(" \t", space));
      Status set = set_setting(settings_, key, value);
      if (!set.ok()) log_error(where + set.error().message);
      break;
    }
    case ScriptCommand::Kind::kGenerate:
      start_generation();
      break;
    case ScriptCommand::Kind::kLatency:
      start_latency_demo();
      break;
    case ScriptCommand::Kind::kCancel:
      worker_.cancel();
      break;
    case ScriptCommand::Kind::kWait:
      break;
    case ScriptCommand::Kind::kIdle:
      idle_frames_left_ = std::stoi(command.argument);
      idle_frame_ms_.clear();
      break;
    case ScriptCommand::Kind::kExport: {
      Status exported = export_current(command.argument);
      if (exported.ok()) log("exported " + command.argument);
      else log_error(where + "export: " + exported.error().to_string());
      break;
    }
    case ScriptCommand::Kind::kScreenshot: {
      Status shot = screenshot(command.argument);
      if (shot.ok()) log("screenshot " + command.argument);
      else log_error(where + "screenshot: " + shot.error().to_string());
      break;
    }
    case ScriptCommand::Kind::kQuit:
      quit_ = true;
      break;
  }
}

// --- input -----------------------------------------------------------------

void DesktopApp::handle_viewport_input(float frame_seconds) {
  ImGuiIO& io = ImGui::GetIO();
  if (!io.WantCaptureMouse) {
    ImVec2 delta = io.MouseDelta;
    float height = std::max(1.f, io.DisplaySize.y);
    if (ImGui::IsMouseDown(ImGuiMouseButton_Left)) camera_.orbit(-delta.x * 0.4f, delta.y * 0.4f);
    if (ImGui::IsMouseDown(ImGuiMouseButton_Right) || ImGui::IsMouseDown(ImGuiMouseButton_Middle))
      camera_.pan(-delta.x / height, delta.y / height);
    if (io.MouseWheel != 0.f) camera_.zoom(io.MouseWheel);
  }
  if (settings_.turntable) camera_.orbit(30.f * frame_seconds, 0.f);
  // Ctrl+Enter anywhere but in a text field (the prompt box handles its own).
  if (!ImGui::IsAnyItemActive() && io.KeyCtrl && ImGui::IsKeyPressed(ImGui::GetKeyIndex(ImGuiKey_Enter), false) &&
      !worker_.busy() && worker_.has_model())
    start_generation();
}

// --- panels ----------------------------------------------------------------

void DesktopApp::draw_panels() {
  draw_generate_panel();
  draw_stats_panel();
  draw_history_panel();
  draw_view_panel();
  draw_log_panel();
  draw_message_popup();
}

void DesktopApp::draw_generate_panel() {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(8, 8), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(kSideWidth, display.y - kLogHeight - 24), ImGuiCond_FirstUseEver);
  ImGui::Begin("Generate");
  const bool busy = worker_.busy();
  ImGui::TextUnformatted("Prompt (Ctrl+Enter generates)");
  if (ImGui::InputTextMultiline("##prompt", &settings_.prompt, ImVec2(-1, ImGui::GetTextLineHeight() * 4),
                                ImGuiInputTextFlags_EnterReturnsTrue) &&
      !busy)
    start_generation();
  ImGui::BeginDisabled(busy || !worker_.has_model());
  if (ImGui::Button("Generate")) start_generation();
  ImGui::EndDisabled();
  if (!worker_.has_model()) reason_tooltip("load a model first (Settings > Model folder)");
  ImGui::SameLine();
  ImGui::BeginDisabled(!busy);
  if (ImGui::Button("Cancel")) worker_.cancel();
  ImGui::EndDisabled();
  ImGui::SameLine();
  ImGui::BeginDisabled(busy || !worker_.has_model());
  if (ImGui::Button("Latency demo")) start_latency_demo();
  ImGui::EndDisabled();
  reason_tooltip("Runs this prompt without the KV cache, with it, and with CUDA graphs when available, "
                 "and compares TPOT and total time");

  if (!loading_folder_.empty()) {
    ImGui::Text("Loading %s", loading_folder_.c_str());
    ImGui::ProgressBar(static_cast<float>(load_fraction_), ImVec2(-1, 0), load_step_.c_str());
  } else if (!model_status_.empty()) {
    ImGui::TextWrapped("%s", model_status_.c_str());
  }
  ImGui::Separator();
  draw_settings();
  ImGui::End();
}

void DesktopApp::draw_settings() {
  const bool busy = worker_.busy();
  if (ImGui::CollapsingHeader("Model", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::InputText("Model folder", &model_folder_field_);
    if (default_model_folder().empty())
      reason_tooltip("This build has no built-in model. Point this at a Cube 3D model folder: shape_gpt.safetensors, "
                     "shape_tokenizer.safetensors, config.yaml and clip/ (the reference fixture "
                     "../shared/oracle/cube3d-v05 beside the project is a tiny valid one).");
    ImGui::BeginDisabled(busy);
    if (ImGui::Button("Load")) load_model(model_folder_field_);
    ImGui::EndDisabled();
    ImGui::SameLine();
    ImGui::BeginDisabled(loading_folder_.empty());
    if (ImGui::Button("Cancel loading")) worker_.cancel();
    ImGui::EndDisabled();
    if (!settings_.recent_folders.empty() && ImGui::BeginCombo("Recent", "choose a recent folder")) {
      for (const auto& recent : settings_.recent_folders)
        if (ImGui::Selectable(recent.c_str())) model_folder_field_ = recent;
      ImGui::EndCombo();
    }
    if (!worker_.has_model() && loading_folder_.empty()) {
      ImGui::TextWrapped("No model loaded. This build has no built-in model: enter a Cube 3D model folder "
                         "(shape_gpt.safetensors, shape_tokenizer.safetensors, config.yaml, clip/) and press Load.");
      // The reference fixture beside the source tree is a tiny valid model
      // (random weights): enough to try every part of the app.
      const auto fixture =
          (std::filesystem::path(CUBEFORGE_SOURCE_DIR) / ".." / "shared" / "oracle" / "cube3d-v05").lexically_normal();
      if (std::error_code ec; std::filesystem::exists(fixture / "shape_gpt.safetensors", ec)) {
        ImGui::BeginDisabled(busy);
        if (ImGui::Button("Use the test fixture model")) load_model(fixture.string());
        ImGui::EndDisabled();
        reason_tooltip(fixture.string() + ": a tiny model with random weights; shapes are not meaningful");
      }
    }
  }
  if (ImGui::CollapsingHeader("Backend and speed", ImGuiTreeNodeFlags_DefaultOpen)) {
    const std::string cuda_reason = cuda_generation_unavailable_reason();
    int backend = settings_.backend == "cuda" ? 1 : 0;
    if (!cuda_reason.empty()) backend = 0;
    ImGui::RadioButton("CPU", &backend, 0);
    ImGui::SameLine();
    ImGui::BeginDisabled(!cuda_reason.empty());
    ImGui::RadioButton("CUDA", &backend, 1);
    ImGui::EndDisabled();
    reason_tooltip(cuda_reason);
    settings_.backend = backend == 1 ? "cuda" : "cpu";
    ImGui::Checkbox("KV cache", &settings_.kv_cache);
    ImGui::SameLine();
    ImGui::BeginDisabled(!cuda_reason.empty());
    bool graphs = settings_.cuda_graphs && cuda_reason.empty();
    if (ImGui::Checkbox("CUDA graphs", &graphs)) settings_.cuda_graphs = graphs;
    ImGui::EndDisabled();
    reason_tooltip(cuda_reason.empty() ? "" : "CUDA graphs need the CUDA backend: " + cuda_reason);
    int attention = settings_.attention == "reference" ? 1 : 0;
    ImGui::RadioButton("causal", &attention, 0);
    reason_tooltip("Correct causal attention (identical to recomputing the whole sequence)");
    ImGui::SameLine();
    ImGui::RadioButton("reference", &attention, 1);
    reason_tooltip("Reproduces the reference implementation's KV-cache decode quirk");
    settings_.attention = attention == 1 ? "reference" : "causal";
  }
  if (ImGui::CollapsingHeader("Sampling", ImGuiTreeNodeFlags_DefaultOpen)) {
    ImGui::SliderFloat("Guidance", &settings_.guidance, 0.f, 10.f, "%.2f");
    // Button first, then a field sized to what is left, so both fit the panel.
    if (ImGui::Button("Randomise")) settings_.seed = std::random_device{}() % 1000000;
    ImGui::SameLine();
    ImGui::SetNextItemWidth(ImGui::GetContentRegionAvail().x - ImGui::CalcTextSize("Seed").x -
                            ImGui::GetStyle().ItemInnerSpacing.x);
    int64_t seed = static_cast<int64_t>(settings_.seed);
    if (ImGui::InputScalar("Seed", ImGuiDataType_S64, &seed) && seed >= 0) settings_.seed = static_cast<uint64_t>(seed);
    ImGui::Checkbox("Sample (off: greedy)", &settings_.sampling);
    ImGui::BeginDisabled(!settings_.sampling);
    ImGui::SliderFloat("Temperature", &settings_.temperature, 0.05f, 2.f, "%.2f");
    ImGui::SliderInt("Top-k (0: off)", &settings_.top_k, 0, 256);
    ImGui::SliderFloat("Top-p (1: off)", &settings_.top_p, 0.05f, 1.f, "%.2f");
    ImGui::EndDisabled();
  }
  if (ImGui::CollapsingHeader("Shape")) {
    ImGui::Checkbox("Bounding box", &settings_.use_bbox);
    ImGui::BeginDisabled(!settings_.use_bbox);
    ImGui::SliderFloat3("Size X Y Z", settings_.bbox.data(), 0.1f, 2.f, "%.2f");
    struct Preset {
      const char* name;
      std::array<float, 3> size;
    };
    static const Preset presets[] = {{"Cube", {1, 1, 1}}, {"Tall", {1, 2, 1}}, {"Wide", {2, 1, 1}},
                                     {"Flat", {2, 0.5f, 2}}};
    for (const Preset& preset : presets) {
      if (ImGui::Button(preset.name)) settings_.bbox = preset.size;
      ImGui::SameLine();
    }
    ImGui::NewLine();
    ImGui::EndDisabled();
    ImGui::SliderInt("Mesh resolution", &settings_.resolution, 4, 9);
    reason_tooltip("Grid of (2^R + 1)^3 points; each step up costs about 8x the occupancy time");
    int faces = static_cast<int>(settings_.target_faces);
    if (ImGui::InputInt("Target faces", &faces, 1000, 10000)) settings_.target_faces = std::max(-1, faces);
    reason_tooltip("0: automatic (max(10000, 10% of faces)); -1: no simplification");
  }
  if (ImGui::CollapsingHeader("Progressive preview")) {
    ImGui::Checkbox("Preview while decoding", &settings_.progressive_preview);
    reason_tooltip("Every k tokens the shape decoder runs at low resolution on the tokens so far. It needs all N "
                   "tokens, so the missing ones repeat the most recent token. Previews are skipped when they would "
                   "slow decoding by more than 10%.");
    ImGui::SliderInt("Every k tokens", &settings_.preview_every, 1, 32);
    ImGui::SliderInt("Preview resolution", &settings_.preview_resolution, 3, 5);
  }
}

void DesktopApp::draw_token_grid() {
  const auto& slots = progress_.token_slots();
  if (slots.empty()) return;
  const int columns = std::min<int>(32, static_cast<int>(slots.size()));
  const float cell = 9.f;
  ImVec2 origin = ImGui::GetCursorScreenPos();
  ImDrawList* draw = ImGui::GetWindowDrawList();
  const int rows = (static_cast<int>(slots.size()) + columns - 1) / columns;
  for (size_t i = 0; i < slots.size(); ++i) {
    float x = origin.x + (i % columns) * (cell + 1);
    float y = origin.y + (i / columns) * (cell + 1);
    ImU32 colour = IM_COL32(60, 60, 66, 255);
    if (slots[i] >= 0) {
      // Golden-ratio hue steps keep neighbouring ids apart.
      float hue = std::fmod(slots[i] * 0.61803398875f, 1.f);
      colour = ImColor::HSV(hue, 0.65f, 0.95f);
    }
    draw->AddRectFilled(ImVec2(x, y), ImVec2(x + cell, y + cell), colour);
  }
  ImGui::Dummy(ImVec2(columns * (cell + 1), rows * (cell + 1)));
  if (ImGui::IsItemHovered()) {
    ImVec2 mouse = ImGui::GetIO().MousePos;
    int column = static_cast<int>((mouse.x - origin.x) / (cell + 1));
    int row = static_cast<int>((mouse.y - origin.y) / (cell + 1));
    size_t index = static_cast<size_t>(row * columns + column);
    if (column >= 0 && column < columns && index < slots.size()) {
      if (slots[index] >= 0) ImGui::SetTooltip("token %zu: id %d", index, slots[index]);
      else ImGui::SetTooltip("token %zu: not yet", index);
    }
  }
}

void DesktopApp::draw_stats_panel() {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(display.x - kSideWidth - 8, 8), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(kSideWidth, (display.y - kLogHeight - 24) * 0.62f), ImGuiCond_FirstUseEver);
  ImGui::Begin("Live statistics");
  const int done = progress_.tokens_done(), count = progress_.token_count();
  char overlay[64];
  std::snprintf(overlay, sizeof overlay, "%d/%d tokens", done, count);
  ImGui::ProgressBar(count > 0 ? float(done) / count : 0.f, ImVec2(-1, 0), overlay);
  if (progress_.current_stage() == AppStage::kOccupancy)
    ImGui::ProgressBar(static_cast<float>(progress_.occupancy_fraction()), ImVec2(-1, 0), "occupancy");
  if (auto ttft = progress_.time_to_first_token_ms()) ImGui::Text("Time to first token: %.1f ms", *ttft);
  else ImGui::TextDisabled("Time to first token: -");
  const auto& tpot = progress_.tpot_ms();
  const auto& rate = progress_.tokens_per_second();
  char label[64];
  std::snprintf(label, sizeof label, "TPOT %.2f ms", tpot.empty() ? 0.f : tpot.back());
  ImGui::PlotLines("##tpot", tpot.data(), static_cast<int>(tpot.size()), 0, label, 0.f, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 48));
  std::snprintf(label, sizeof label, "%.1f tokens/s", rate.empty() ? 0.f : rate.back());
  ImGui::PlotLines("##rate", rate.data(), static_cast<int>(rate.size()), 0, label, 0.f, FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x, 48));
  draw_token_grid();
  if (ImGui::BeginTable("stages", 2, ImGuiTableFlags_RowBg | ImGuiTableFlags_SizingStretchProp)) {
    for (int s = 0; s < kAppStageCount; ++s) {
      ImGui::TableNextRow();
      ImGui::TableNextColumn();
      ImGui::TextUnformatted(app_stage_name(AppStage(s)));
      ImGui::TableNextColumn();
      if (const auto& ms = progress_.stage_ms()[s]) ImGui::Text("%.1f ms", *ms);
      else if (progress_.current_stage() == AppStage(s)) ImGui::TextUnformatted("running");
      else ImGui::TextDisabled("-");
    }
    ImGui::EndTable();
  }
  ImGui::Text("Memory (RSS): %.0f MiB", resident_memory_mib());
  if (last_preview_cost_.previews > 0 || last_preview_cost_.skipped > 0) {
    ImGui::Text("Preview: %d decodes (%d skipped), %.0f ms = %.1f%% of decode", last_preview_cost_.previews,
                last_preview_cost_.skipped, last_preview_cost_.preview_ms, 100.0 * last_preview_cost_.overhead());
    if (last_preview_cost_.without_estimate)
      ImGui::TextWrapped("Previews start once their cost is known (after one finished generation).");
    if (last_decode_ms_without_preview_ && last_decode_ms_with_preview_)
      ImGui::Text("Decode: %.0f ms with preview, %.0f ms without", *last_decode_ms_with_preview_,
                  *last_decode_ms_without_preview_);
  }
  std::vector<float> frames(frame_ms_.begin(), frame_ms_.end());
  FrameTimeSummary recent = summarise(frames);
  // When nothing runs, frames wait for input, so only frames while working say much.
  std::snprintf(label, sizeof label, "frame %.1f ms (max %.1f)", recent.mean_ms, recent.max_ms);
  ImGui::PlotLines("##frames", frames.data(), static_cast<int>(frames.size()), 0, label, 0.f, 50.f, ImVec2(ImGui::GetContentRegionAvail().x, 40));
  if (last_generation_frames_.frames > 0)
    ImGui::Text("While generating: mean %.1f ms, p95 %.1f ms, max %.1f ms", last_generation_frames_.mean_ms,
                last_generation_frames_.p95_ms, last_generation_frames_.max_ms);
  if (!latency_bars_.empty()) {
    ImGui::Separator();
    ImGui::TextUnformatted("Latency demo");
    std::vector<float> tpot_bars, total_bars;
    for (const auto& bar : latency_bars_) {
      tpot_bars.push_back(bar.available ? static_cast<float>(bar.mean_tpot_ms) : 0.f);
      total_bars.push_back(bar.available ? static_cast<float>(bar.total_ms) : 0.f);
    }
    ImGui::PlotHistogram("TPOT ms", tpot_bars.data(), static_cast<int>(tpot_bars.size()), 0, nullptr, 0.f, FLT_MAX,
                         ImVec2(ImGui::GetContentRegionAvail().x - 70, 50));
    ImGui::PlotHistogram("total ms", total_bars.data(), static_cast<int>(total_bars.size()), 0, nullptr, 0.f,
                         FLT_MAX, ImVec2(ImGui::GetContentRegionAvail().x - 70, 50));
    for (const auto& bar : latency_bars_) {
      if (bar.available)
        ImGui::Text("%-24s TPOT %7.2f ms  total %7.0f ms", bar.label.c_str(), bar.mean_tpot_ms, bar.total_ms);
      else
        ImGui::TextDisabled("%-24s n/a: %s", bar.label.c_str(), bar.unavailable_reason.c_str());
    }
  }
  ImGui::End();
}

void DesktopApp::draw_history_panel() {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  const float column = display.y - kLogHeight - 24, stats = column * 0.62f;
  ImGui::SetNextWindowPos(ImVec2(display.x - kSideWidth - 8, 16 + stats), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(kSideWidth, column - stats - 8), ImGuiCond_FirstUseEver);
  ImGui::Begin("History");
  if (!history_) {
    ImGui::TextDisabled("history unavailable (see Log)");
  } else if (history_->entries().empty()) {
    ImGui::TextDisabled("generations appear here");
  } else {
    const auto& entries = history_->entries();
    std::optional<HistoryEntry> chosen;
    std::optional<std::string> removed;
    bool loaded_one = false;  // at most one thumbnail read per frame keeps frames short
    const float thumb = 40.f;
    for (auto it = entries.rbegin(); it != entries.rend(); ++it) {
      ImGui::PushID(it->id.c_str());
      auto found = thumbnails_.find(it->id);
      if (found == thumbnails_.end() && !loaded_one) {
        loaded_one = true;
        auto loaded = load_thumbnail_mosaic(history_->thumbnail_path(*it), kThumbnailCells);
        found = thumbnails_.emplace(it->id, loaded.ok() ? std::move(*loaded) : ThumbnailMosaic{}).first;
      }
      ImVec2 origin = ImGui::GetCursorScreenPos();
      if (found != thumbnails_.end() && found->second.cells > 0) {
        const ThumbnailMosaic& mosaic = found->second;
        const float cell = thumb / mosaic.cells;
        ImDrawList* draw = ImGui::GetWindowDrawList();
        for (int y = 0; y < mosaic.cells; ++y)
          for (int x = 0; x < mosaic.cells; ++x)
            draw->AddRectFilled(ImVec2(origin.x + x * cell, origin.y + y * cell),
                                ImVec2(origin.x + (x + 1) * cell, origin.y + (y + 1) * cell),
                                mosaic.colors[size_t(y) * mosaic.cells + x]);
      }
      ImGui::Dummy(ImVec2(thumb, thumb));
      ImGui::SameLine();
      char line[160];
      // Latency-demo runs say which variant they were.
      const std::string run = it->settings.value("run", std::string("generate"));
      std::snprintf(line, sizeof line, "%s\nseed %llu  %.0f ms%s%s", it->prompt.c_str(),
                    static_cast<unsigned long long>(it->seed), it->timings.total_ms,
                    run == "generate" ? "" : "  ", run == "generate" ? "" : run.c_str());
      if (ImGui::Selectable(line, false, 0, ImVec2(0, thumb))) chosen = *it;
      if (ImGui::IsItemHovered())
        ImGui::SetTooltip("%s\n%lld faces, first token %.1f ms, TPOT %.2f ms\nthumbnail: %s", it->created.c_str(),
                          static_cast<long long>(it->faces), it->timings.time_to_first_token_ms,
                          it->timings.mean_tpot_ms, history_->thumbnail_path(*it).c_str());
      if (ImGui::BeginPopupContextItem()) {
        if (ImGui::MenuItem("Delete")) removed = it->id;
        ImGui::EndPopup();
      }
      ImGui::PopID();
    }
    if (chosen && !worker_.busy()) restore_history(*chosen);
    if (removed) {
      thumbnails_.erase(*removed);
      Status status = history_->remove(*removed);
      if (!status.ok()) log_error("history: " + status.error().to_string());
    }
  }
  ImGui::End();
}

void DesktopApp::draw_view_panel() {
  const ImVec2 display = ImGui::GetIO().DisplaySize;
  ImGui::SetNextWindowPos(ImVec2(kSideWidth + 16, display.y - kLogHeight - 16 - kViewPanelHeight),
                          ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(display.x - 2 * kSideWidth - 32, kViewPanelHeight), ImGuiCond_FirstUseEver);
  ImGui::Begin("Export and view");
  ImGui::InputText("Folder", &settings_.export_folder);
  ImGui::InputText("Name", &settings_.export_template);
  reason_tooltip("{prompt} (slugified), {seed}, {resolution}, {date}, {time}; the extension picks the format: "
                 ".glb .obj .stl .ply");
  auto name = expand_file_name_template(settings_.export_template,
                                        fields_now(current_prompt_.empty() ? settings_.prompt : current_prompt_,
                                                   current_mesh_.empty() ? settings_.seed : current_seed_,
                                                   settings_.resolution));
  std::filesystem::path path = std::filesystem::path(settings_.export_folder) / (name.ok() ? *name : "");
  for (const char* extension : {".glb", ".obj", ".stl", ".ply"}) {
    if (ImGui::Button(extension)) {
      Status status = name.ok() ? export_current(path.replace_extension(extension).string()) : Status(name.error());
      export_failed_ = !status.ok();
      export_result_ = status.ok() ? "wrote " + path.string() : status.error().to_string();
      if (status.ok()) log(export_result_);
      else log_error("export: " + export_result_);
    }
    ImGui::SameLine();
  }
  ImGui::NewLine();
  if (!export_result_.empty()) {
    if (export_failed_) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.4f, 1.f), "%s", export_result_.c_str());
    else ImGui::TextWrapped("%s", export_result_.c_str());
  }
  ImGui::Separator();
  ImGui::BeginDisabled(!renderer_->supports_wireframe());
  ImGui::Checkbox("Wireframe", &settings_.wireframe);
  ImGui::EndDisabled();
  if (!renderer_->supports_wireframe()) reason_tooltip("this Vulkan device has no fillModeNonSolid");
  ImGui::SameLine();
  ImGui::Checkbox("Flat", &settings_.flat_shading);
  ImGui::SameLine();
  ImGui::Checkbox("Turntable", &settings_.turntable);
  ImGui::Checkbox("Grid", &settings_.grid);
  ImGui::SameLine();
  if (ImGui::Button("Reset camera")) {
    camera_ = engine::OrbitCamera{};
    camera_.pitch_degrees = 20.f;
    VkExtent2D extent = target_->extent();
    if (!renderer_->mesh_bounds().empty && extent.height > 0)
      camera_.frame(renderer_->mesh_bounds(), float(extent.width) / extent.height);
  }
  ImGui::SameLine();
  if (ImGui::Button("Screenshot")) {
    auto shot_name = expand_file_name_template("{prompt}-{seed}-{time}.png",
                                               fields_now(current_prompt_, current_seed_, settings_.resolution));
    std::string shot = (std::filesystem::path(settings_.export_folder) / (shot_name.ok() ? *shot_name : "shot.png"))
                           .string();
    Status status = screenshot(shot);
    export_failed_ = !status.ok();
    export_result_ = status.ok() ? "wrote " + shot : status.error().to_string();
    if (status.ok()) log(export_result_);
    else log_error("screenshot: " + export_result_);
  }
  ImGui::End();
}

void DesktopApp::draw_log_panel() {
  ImGuiIO& io = ImGui::GetIO();
  ImGui::SetNextWindowPos(ImVec2(8, io.DisplaySize.y - kLogHeight - 8), ImGuiCond_FirstUseEver);
  ImGui::SetNextWindowSize(ImVec2(io.DisplaySize.x - 16, kLogHeight), ImGuiCond_FirstUseEver);
  ImGui::Begin("Log");
  for (const LogLine& line : log_lines_) {
    if (line.error) ImGui::TextColored(ImVec4(1.f, 0.45f, 0.4f, 1.f), "%s", line.text.c_str());
    else ImGui::TextUnformatted(line.text.c_str());
  }
  if (ImGui::GetScrollY() >= ImGui::GetScrollMaxY() - 4) ImGui::SetScrollHereY(1.f);
  ImGui::End();
}

void DesktopApp::draw_message_popup() {
  // Scripts log errors and go on; a person gets a message box as well.
  if (popup_pending_ && !script_mode_) {
    ImGui::OpenPopup("Error");
    popup_pending_ = false;
  }
  if (ImGui::BeginPopupModal("Error", nullptr, ImGuiWindowFlags_AlwaysAutoResize)) {
    ImGui::PushTextWrapPos(480.f);
    ImGui::TextUnformatted(popup_message_.c_str());
    ImGui::PopTextWrapPos();
    if (ImGui::Button("OK")) ImGui::CloseCurrentPopup();
    ImGui::EndPopup();
  }
}

// --- main loop -------------------------------------------------------------

int DesktopApp::run() {
  script_mode_ = !options_.script.empty();
  data_folder_ = resolve_data_folder(options_.data_folder);
  std::error_code ec;
  std::filesystem::create_directories(data_folder_, ec);
  Status log_usable = check_data_file(data_folder_ / "cubeforge.log");
  if (log_usable.ok()) log_file_.open(data_folder_ / "cubeforge.log", std::ios::trunc);
  if (!log_file_)
    std::fprintf(stderr, "cubeforge: cannot write the log in '%s'%s\n", escape_untrusted(data_folder_.string()).c_str(),
                 log_usable.ok() ? "" : (": " + log_usable.error().to_string()).c_str());

  auto settings = load_settings(data_folder_ / "settings.json");
  if (settings.ok()) settings_ = *settings;
  else log_error(settings.error().to_string() + " (starting from the defaults)");
  if (!options_.prompt.empty()) settings_.prompt = options_.prompt;

  if (script_mode_) {
    auto script = load_script(options_.script);
    if (!script.ok()) {
      log_error(script.error().to_string());
      return 2;
    }
    script_ = std::move(*script);
  }
  if (!start_window_and_engine() || !start_imgui()) return 2;

  auto history = HistoryStore::open(data_folder_ / "history");
  if (history.ok()) history_ = std::move(*history);
  else log_error(history.error().to_string());

  scene_.shading = settings_.flat_shading ? engine::ShadingMode::kFlat : engine::ShadingMode::kSmooth;
  camera_.pitch_degrees = 20.f;
  camera_.yaw_degrees = 30.f;
  if (!script_mode_) {
    std::string folder = !options_.model_folder.empty() ? options_.model_folder : settings_.model_folder;
    if (folder.empty()) folder = default_model_folder().string();
    load_model(folder);
  } else if (!options_.model_folder.empty()) {
    load_model(options_.model_folder);
  }

  auto last_frame = Clock::now();
  while (!glfwWindowShouldClose(window_) && !quit_) {
    // A person's idle app waits for input (at most a tenth of a second) instead
    // of drawing frames nobody needs; anything running keeps frames coming.
    const bool nothing_moves = !script_mode_ && !worker_.busy() && !settings_.turntable && !popup_pending_;
    if (nothing_moves) glfwWaitEventsTimeout(0.1);
    else glfwPollEvents();
    auto now = Clock::now();
    const float frame_ms = static_cast<float>(ms_between(last_frame, now));
    last_frame = now;
    frame_ms_.push_back(frame_ms);
    if (frame_ms_.size() > kFrameWindow) frame_ms_.pop_front();
    if (generating_ && worker_.busy()) generating_frame_ms_.push_back(frame_ms);

    const bool idle = !worker_.busy();
    handle_messages();
    if (idle_frames_left_ > 0) {
      idle_frame_ms_.push_back(frame_ms);
      if (--idle_frames_left_ == 0) {
        FrameTimeSummary s = summarise(idle_frame_ms_);
        char line[200];
        std::snprintf(line, sizeof line, "frame times while idle: mean %.1f ms, p95 %.1f ms, max %.1f ms (%d frames)",
                      s.mean_ms, s.p95_ms, s.max_ms, s.frames);
        log(line);
      }
    } else if (script_mode_ && idle) {
      if (script_next_ < script_.size()) run_script_step();
      else quit_ = true;
    }

    if (target_->min_image_count() != last_min_image_count_) {
      last_min_image_count_ = target_->min_image_count();
      ImGui_ImplVulkan_SetMinImageCount(last_min_image_count_);
    }
    ImGui_ImplVulkan_NewFrame();
    ImGui_ImplGlfw_NewFrame();
    ImGui::NewFrame();
    handle_viewport_input(frame_ms / 1000.f);
    draw_panels();
    scene_.wireframe = settings_.wireframe && renderer_->supports_wireframe();
    scene_.shading = settings_.flat_shading ? engine::ShadingMode::kFlat : engine::ShadingMode::kSmooth;
    scene_.grid = settings_.grid;
    ImGui::Render();
    ImDrawData* draw_data = ImGui::GetDrawData();
    auto status = target_->draw_frame(camera_, scene_,
                                      [&](VkCommandBuffer cmd) { ImGui_ImplVulkan_RenderDrawData(draw_data, cmd); });
    if (!status.ok()) {
      log_error("drawing the window: " + status.error().to_string());
      break;
    }
    if (*status == engine::FrameStatus::kMinimised) glfwWaitEventsTimeout(0.05);
    // Without vsync (scripts) frames are paced to 60 per second as a display
    // would, so the UI does not take cores from generation for frames nobody sees.
    if (script_mode_) {
      const double spent_ms = ms_between(now, Clock::now());
      if (spent_ms < kFramePeriodMs)
        std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(kFramePeriodMs - spent_ms));
    }
  }

  worker_.cancel();
  if (context_) context_->wait_idle();
  FrameTimeSummary recent = summarise(std::vector<float>(frame_ms_.begin(), frame_ms_.end()));
  char line[200];
  std::snprintf(line, sizeof line, "frame times of the last %d frames: mean %.1f ms, p95 %.1f ms, max %.1f ms",
                recent.frames, recent.mean_ms, recent.p95_ms, recent.max_ms);
  log(line);
  int width = 0, height = 0;
  glfwGetWindowSize(window_, &width, &height);
  if (!script_mode_ && width > 0 && height > 0) {
    settings_.window_width = width;
    settings_.window_height = height;
  }
  save_settings_now();
  if (validation_ && validation_->errors.load() > 0)
    log_error("the Vulkan validation layer reported " + std::to_string(validation_->errors.load()) + " errors");
  if (script_mode_ && script_next_ < script_.size())
    log_error("the window closed before the script finished (line " + std::to_string(script_[script_next_].line) +
              ")");
  return script_mode_ && errors_logged_ > 0 ? 1 : 0;
}

}  // namespace

int run_desktop_app(const LaunchOptions& options) {
  DesktopApp app(options);
  return app.run();
}

}  // namespace cubeforge::app
