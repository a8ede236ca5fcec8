// `cubeforge-lab bench-viewport` (built with Vulkan only): how fast the
// viewport draws and takes new meshes. For a UV sphere of about --triangles
// triangles (1 M by default):
//   - offscreen frame time (render + wait, no readback) at --size,
//   - upload throughput in GB/s (vertex + index bytes, until the GPU has them)
//     for each available path (staging, and CUDA interop when it runs),
//   - update rate when uploading a generation-sized mesh and drawing a frame
//     per update, as the desktop app does while tokens stream in.
// Keep --frames small on software rasterisers such as lavapipe.
// Exit status: 0 done, 1 failed, 2 bad arguments, 3 no Vulkan driver or device.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "app/lab/commands.h"
#include "app/lab/lab_options.h"
#include "app/lab/lab_report.h"
#include "engine/context.h"
#include "engine/image_output.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"

namespace cubeforge::cli {

namespace {

constexpr const char* kViewportCommand = "bench-viewport";
constexpr int kNoVulkanDevice = 3;

struct ViewportBenchOptions {
  LabOptions lab;
  size_t triangles = 1'000'000;
  size_t update_triangles = 100'000;
  std::string size = "512x512";
  uint32_t width = 512, height = 512;
  int frames = 5;
  int uploads = 5;
  int updates = 10;
  bool interop = true;
  std::string device;
  std::string screenshot;  // also write the benchmark view as PNG
};

// UV sphere with about `triangles` triangles (2 * stacks * slices, slices = 2 * stacks).
Mesh make_sphere(size_t triangles) {
  int stacks = std::max(2, int(std::lround(std::sqrt(triangles / 4.0))));
  int slices = 2 * stacks;
  Mesh mesh;
  mesh.positions.reserve(size_t(stacks + 1) * (slices + 1) * 3);
  mesh.normals.reserve(mesh.positions.capacity());
  for (int i = 0; i <= stacks; ++i) {
    double theta = M_PI * i / stacks;
    for (int j = 0; j <= slices; ++j) {
      double phi = 2.0 * M_PI * j / slices;
      float n[3] = {float(std::sin(theta) * std::cos(phi)), float(std::cos(theta)),
                    float(std::sin(theta) * std::sin(phi))};
      mesh.positions.insert(mesh.positions.end(), {n[0], n[1], n[2]});
      mesh.normals.insert(mesh.normals.end(), {n[0], n[1], n[2]});
    }
  }
  mesh.indices.reserve(size_t(stacks) * slices * 6);
  for (int i = 0; i < stacks; ++i)
    for (int j = 0; j < slices; ++j) {
      uint32_t a = i * (slices + 1) + j, b = a + slices + 1;
      mesh.indices.insert(mesh.indices.end(), {a, b, a + 1, a + 1, b, b + 1});
    }
  return mesh;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// The two meshes every path draws and uploads.
struct ViewportScene {
  Mesh mesh, update_mesh;
  double mesh_bytes = 0;
};

struct ViewportFrameFigures {
  double mean_ms = 0, min_ms = 0;
};

struct UploadPathFigures {
  std::string path;
  double upload_gbps = 0;
  double upload_ms = 0;
  double update_hz = 0;  // upload + frame per update
  double update_frame_ms = 0;
  double update_upload_ms = 0;  // the upload alone (until the GPU has it), per update
  ViewportFrameFigures frame;
};

Status render_and_wait(engine::Context& ctx, engine::OffscreenTarget& target, const engine::OrbitCamera& camera,
                       const engine::SceneSettings& settings) {
  CUBEFORGE_ASSIGN_OR_RETURN(uint64_t frame, target.render(camera, settings));
  ctx.wait_for(frame);
  return ok_status();
}

// Uploads, frames and generation-like updates on one renderer's upload path.
Result<UploadPathFigures> measure_path(engine::Context& ctx, engine::Renderer& r, const ViewportScene& scene,
                                       const ViewportBenchOptions& o, bool screenshot) {
  engine::OffscreenOptions target_options;
  target_options.width = o.width;
  target_options.height = o.height;
  CUBEFORGE_ASSIGN_OR_RETURN(auto target, engine::OffscreenTarget::create(r, target_options));
  engine::OrbitCamera camera;
  camera.yaw_degrees = 30.f;
  camera.pitch_degrees = 20.f;
  camera.frame(scene.mesh.bounds(), float(o.width) / float(o.height));
  const engine::SceneSettings settings;
  UploadPathFigures f;
  f.path = engine::upload_path_name(r.meshes().statistics().path);
  // The first upload sizes the buffers; later ones reuse them (both slots).
  for (int warm = 0; warm < 2; ++warm) {
    CUBEFORGE_TRY(r.meshes().upload(scene.mesh));
    CUBEFORGE_TRY(render_and_wait(ctx, *target, camera, settings));  // waits on the mesh-ready semaphore
  }
  // Upload time: from the call until the GPU (or CUDA) has the bytes.
  double upload_seconds = 0;
  for (int i = 0; i < o.uploads; ++i) {
    const double start = now_seconds();
    CUBEFORGE_TRY(r.meshes().upload(scene.mesh));
    CUBEFORGE_TRY(r.meshes().finish());
    upload_seconds += now_seconds() - start;
  }
  double frame_total = 0, frame_min = 1e30;
  for (int i = 0; i < o.frames; ++i) {
    const double start = now_seconds();
    CUBEFORGE_TRY(render_and_wait(ctx, *target, camera, settings));
    const double t = now_seconds() - start;
    frame_total += t;
    frame_min = std::min(frame_min, t);
  }
  f.frame = {frame_total / o.frames * 1e3, frame_min * 1e3};
  if (screenshot) {
    engine::SceneSettings shot = settings;
    shot.wireframe = scene.mesh.face_count() <= 20000;  // a denser wireframe is a grey blur
    CUBEFORGE_TRY(engine::save_screenshot(*target, camera, shot, o.screenshot));
  }
  const double per_upload = upload_seconds / o.uploads;
  f.upload_ms = per_upload * 1e3;
  f.upload_gbps = scene.mesh_bytes / per_upload / 1e9;

  // Generation-like updates: a new mesh and a frame per update.
  engine::OrbitCamera update_camera = camera;
  update_camera.frame(scene.update_mesh.bounds(), float(o.width) / float(o.height));
  const double start = now_seconds();
  uint64_t last = 0;
  for (int i = 0; i < o.updates; ++i) {
    CUBEFORGE_TRY(r.meshes().upload(scene.update_mesh));
    CUBEFORGE_ASSIGN_OR_RETURN(last, target->render(update_camera, settings));
  }
  ctx.wait_for(last);
  const double update_seconds = now_seconds() - start;
  f.update_hz = o.updates / update_seconds;
  f.update_frame_ms = update_seconds / o.updates * 1e3;
  double upload_only = 0;
  for (int i = 0; i < o.updates; ++i) {
    const double t0 = now_seconds();
    CUBEFORGE_TRY(r.meshes().upload(scene.update_mesh));
    CUBEFORGE_TRY(r.meshes().finish());
    upload_only += now_seconds() - t0;
  }
  f.update_upload_ms = upload_only / o.updates * 1e3;
  return f;
}

struct ViewportFigures {
  std::vector<UploadPathFigures> paths;  // the first path's frames are the ones reported
  std::string interop_unavailable;
};

// CUDA interop first when asked (skipped, with the reason, when it does not
// run), then the staging path.
Result<ViewportFigures> measure_viewport(engine::Context& ctx, const ViewportScene& scene,
                                         const ViewportBenchOptions& o) {
  ViewportFigures figures;
  std::vector<bool> paths{false};
  if (o.interop) paths.insert(paths.begin(), true);
  for (bool prefer_interop : paths) {
    CUBEFORGE_ASSIGN_OR_RETURN(auto renderer, engine::Renderer::create(ctx, engine::Renderer::Options{prefer_interop}));
    if (prefer_interop && !renderer->meshes().interop_active()) {
      figures.interop_unavailable = renderer->meshes().statistics().interop_unavailable_reason;
      continue;  // the staging renderer measures this path
    }
    const bool screenshot = !o.screenshot.empty() && figures.paths.empty();
    CUBEFORGE_ASSIGN_OR_RETURN(UploadPathFigures path, measure_path(ctx, *renderer, scene, o, screenshot));
    figures.paths.push_back(std::move(path));
  }
  return figures;
}

void report_viewport(const ViewportBenchOptions& o, engine::Context& ctx, const ViewportScene& scene,
                     const ViewportFigures& figures) {
  const size_t triangles = scene.mesh.face_count();
  const int samples = int(engine::choose_samples(ctx, static_cast<VkSampleCountFlagBits>(0)));
  const ViewportFrameFigures& frame = figures.paths.front().frame;
  if (o.lab.json) {
    nlohmann::json uploads = nlohmann::json::array();
    for (const UploadPathFigures& p : figures.paths)
      uploads.push_back({{"path", p.path},
                         {"gb_per_s", p.upload_gbps},
                         {"ms", p.upload_ms},
                         {"update_hz", p.update_hz},
                         {"update_ms", p.update_frame_ms},
                         {"update_upload_ms", p.update_upload_ms}});
    print_lab_report(kViewportCommand,
                     {{"device", escape_untrusted(ctx.device_name())},
                      {"width", o.width},
                      {"height", o.height},
                      {"samples", samples},
                      {"triangles", triangles},
                      {"frame_ms", {{"mean", frame.mean_ms}, {"min", frame.min_ms}, {"frames", o.frames}}},
                      {"mesh_bytes", scene.mesh_bytes},
                      {"update_triangles", scene.update_mesh.face_count()},
                      {"interop_unavailable", escape_untrusted(figures.interop_unavailable)},
                      {"uploads", uploads}});
    return;
  }
  std::printf("device            : %s\n", readable_untrusted(ctx.device_name()).c_str());
  std::printf("mesh              : %zu triangles, %.1f MB (positions + normals + indices)\n", triangles,
              scene.mesh_bytes / 1e6);
  std::printf("offscreen frame   : %.2f ms mean, %.2f ms min over %d frames at %ux%u, %dx MSAA\n", frame.mean_ms,
              frame.min_ms, o.frames, o.width, o.height, samples);
  if (!figures.interop_unavailable.empty())
    std::printf("cuda interop      : unavailable (%s)\n", figures.interop_unavailable.c_str());
  for (const UploadPathFigures& p : figures.paths) {
    std::printf("upload (%s) : %.2f GB/s (%.2f ms per %zu-triangle mesh)\n", p.path.c_str(), p.upload_gbps, p.upload_ms,
                triangles);
    std::printf("updates (%s): %.1f updates/s with a frame each (%zu triangles, %.1f ms per update)\n", p.path.c_str(),
                p.update_hz, scene.update_mesh.face_count(), p.update_frame_ms);
    std::printf("update upload (%s): %.2f ms per %zu-triangle mesh (the rest of an update is the frame)\n",
                p.path.c_str(), p.update_upload_ms, scene.update_mesh.face_count());
  }
}

int run_viewport_bench(ViewportBenchOptions o) {
  if (std::sscanf(o.size.c_str(), "%ux%u", &o.width, &o.height) != 2 || o.width == 0 || o.height == 0 ||
      o.width > 16384 || o.height > 16384) {
    std::fprintf(stderr, "%s: --size takes WIDTHxHEIGHT from 1x1 to 16384x16384, not '%s'\n", kViewportCommand,
                 readable_untrusted(o.size).c_str());
    return 2;
  }
  engine::ContextOptions context_options;
  context_options.validation = engine::Validation::kOff;
  context_options.device_name_filter = o.device;
  auto context = engine::Context::create(context_options);
  if (!context.ok()) {
    print_error(kViewportCommand, context.error());
    return engine::is_no_vulkan_device(context.error()) ? kNoVulkanDevice : 1;
  }
  engine::Context& ctx = **context;
  ViewportScene scene;
  scene.mesh = make_sphere(o.triangles);
  scene.update_mesh = make_sphere(o.update_triangles);
  scene.mesh_bytes = double(scene.mesh.positions.size() + scene.mesh.normals.size() + scene.mesh.indices.size()) * 4.0;
  auto figures = measure_viewport(ctx, scene, o);
  if (!figures.ok()) {
    print_error(kViewportCommand, figures.error());
    return 1;
  }
  report_viewport(o, ctx, scene, *figures);
  return 0;
}

}  // namespace

Action add_viewport_bench_command(CLI::App& app) {
  auto o = std::make_shared<ViewportBenchOptions>();
  CLI::App* cmd = app.add_subcommand(kViewportCommand, "Measure the viewport's frame time and mesh uploads (Vulkan)");
  add_lab_options(cmd, o->lab, kJsonOption);
  cmd->add_option("--triangles", o->triangles, "Triangles of the sphere drawn and uploaded")
      ->check(whole_number_in(8, 100'000'000, "about this many, as a UV sphere"));
  cmd->add_option("--update-triangles", o->update_triangles, "Triangles of the mesh each update uploads")
      ->check(whole_number_in(8, 100'000'000, "a generation-sized mesh"));
  cmd->add_option("--size", o->size, "Offscreen image size, WIDTHxHEIGHT");
  cmd->add_option("--frames", o->frames, "Frames timed")
      ->check(whole_number_in(1, 100000, "keep it small on lavapipe"));
  cmd->add_option("--uploads", o->uploads, "Uploads timed")->check(whole_number_in(1, 100000, "uploads per path"));
  cmd->add_option("--updates", o->updates, "Updates (upload + frame) timed")
      ->check(whole_number_in(1, 100000, "updates per path"));
  cmd->add_flag("!--no-interop", o->interop, "Measure the staging path only");
  cmd->add_option("--device", o->device, "Use the Vulkan device whose name contains this");
  cmd->add_option("--screenshot", o->screenshot, "Also write the benchmark view to this PNG file");
  return [cmd, o]() -> int { return cmd->parsed() ? run_viewport_bench(*o) : -1; };
}

}  // namespace cubeforge::cli
