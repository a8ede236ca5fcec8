// cubeforge-bench-viewport: how fast the viewport draws and takes new meshes.
//
// Prints, for a UV sphere of about --triangles triangles (1 M by default):
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
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "engine/context.h"
#include "engine/image_output.h"
#include "engine/offscreen_target.h"
#include "engine/renderer.h"

namespace cubeforge::engine {
namespace {

struct Options {
  size_t triangles = 1'000'000;
  size_t update_triangles = 100'000;
  uint32_t width = 512, height = 512;
  int frames = 5;
  int uploads = 5;
  int updates = 10;
  bool json = false;
  bool interop = true;
  std::string device;
  std::string screenshot;  // also write the benchmark view as PNG
};

void usage() {
  std::printf(
      "usage: cubeforge-bench-viewport [--triangles N] [--update-triangles N] [--size WxH] [--frames N]\n"
      "                              [--uploads N] [--updates N] [--no-interop] [--device NAME]\n"
      "                              [--screenshot FILE.png] [--json]\n");
}

bool parse(int argc, char** argv, Options& o) {
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char* { return i + 1 < argc ? argv[++i] : nullptr; };
    const char* v = nullptr;
    if (a == "--json") o.json = true;
    else if (a == "--no-interop") o.interop = false;
    else if (a == "--help" || a == "-h") return false;
    else if ((v = next()) == nullptr) return false;
    else if (a == "--triangles") o.triangles = std::strtoull(v, nullptr, 10);
    else if (a == "--update-triangles") o.update_triangles = std::strtoull(v, nullptr, 10);
    else if (a == "--frames") o.frames = std::atoi(v);
    else if (a == "--uploads") o.uploads = std::atoi(v);
    else if (a == "--updates") o.updates = std::atoi(v);
    else if (a == "--device") o.device = v;
    else if (a == "--screenshot") o.screenshot = v;
    else if (a == "--size") {
      if (std::sscanf(v, "%ux%u", &o.width, &o.height) != 2) return false;
    } else return false;
  }
  return o.triangles >= 8 && o.update_triangles >= 8 && o.frames > 0 && o.uploads > 0 && o.updates > 0 &&
         o.width > 0 && o.height > 0;
}

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
      float n[3] = {float(std::sin(theta) * std::cos(phi)), float(std::cos(theta)), float(std::sin(theta) * std::sin(phi))};
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

std::string json_escape(const std::string& text) {
  std::string out;
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    if (static_cast<unsigned char>(c) >= 0x20) out += c;
  }
  return out;
}

double now_seconds() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct PathResult {
  std::string path;
  double upload_gbps = 0;
  double upload_ms = 0;
  double update_hz = 0;       // upload + frame per update
  double update_frame_ms = 0;
  double update_upload_ms = 0;  // the upload alone (until the GPU has it), per update
};

int run(const Options& options) {
  ContextOptions context_options;
  context_options.validation = Validation::kOff;
  context_options.device_name_filter = options.device;
  auto context = Context::create(context_options);
  if (!context.ok()) {
    std::fprintf(stderr, "cubeforge-bench-viewport: %s\n", context.error().to_string().c_str());
    return is_no_vulkan_device(context.error()) ? 3 : 1;
  }
  Context& ctx = **context;
  Mesh mesh = make_sphere(options.triangles);
  Mesh update_mesh = make_sphere(options.update_triangles);
  const double mesh_bytes = double(mesh.positions.size() + mesh.normals.size() + mesh.indices.size()) * 4.0;

  std::vector<bool> paths{false};
  if (options.interop) paths.insert(paths.begin(), true);
  std::vector<PathResult> results;
  double frame_ms_mean = 0, frame_ms_min = 1e30;
  std::string interop_note;
  bool frame_measured = false;
  for (bool prefer_interop : paths) {
    auto renderer = Renderer::create(ctx, Renderer::Options{prefer_interop});
    if (!renderer.ok()) {
      std::fprintf(stderr, "cubeforge-bench-viewport: %s\n", renderer.error().to_string().c_str());
      return 1;
    }
    Renderer& r = **renderer;
    if (prefer_interop && !r.meshes().interop_active()) {
      interop_note = r.meshes().statistics().interop_unavailable_reason;
      continue;  // the staging renderer below measures this path
    }
    OffscreenOptions target_options;
    target_options.width = options.width;
    target_options.height = options.height;
    auto target = OffscreenTarget::create(r, target_options);
    if (!target.ok()) {
      std::fprintf(stderr, "cubeforge-bench-viewport: %s\n", target.error().to_string().c_str());
      return 1;
    }
    OrbitCamera camera;
    camera.yaw_degrees = 30.f;
    camera.pitch_degrees = 20.f;
    camera.frame(mesh.bounds(), float(options.width) / float(options.height));
    SceneSettings settings;

    PathResult result;
    result.path = upload_path_name(r.meshes().statistics().path);
    // Uploads: the first one sizes the buffers; later ones reuse them (both slots).
    for (int warm = 0; warm < 2; ++warm) {
      if (auto s = r.meshes().upload(mesh); !s.ok()) {
        std::fprintf(stderr, "cubeforge-bench-viewport: %s\n", s.error().to_string().c_str());
        return 1;
      }
      auto frame = (*target)->render(camera, settings);  // waits on the mesh-ready semaphore
      if (!frame.ok()) return 1;
      ctx.wait_for(*frame);
    }
    // Upload time: from the call until the GPU (or CUDA) has the bytes.
    double upload_seconds = 0;
    for (int i = 0; i < options.uploads; ++i) {
      double start = now_seconds();
      if (!r.meshes().upload(mesh).ok() || !r.meshes().finish().ok()) return 1;
      upload_seconds += now_seconds() - start;
    }
    double frame_total = 0;
    double frame_min = 1e30;
    for (int i = 0; i < options.frames; ++i) {
      double start = now_seconds();
      auto frame = (*target)->render(camera, settings);
      if (!frame.ok()) return 1;
      ctx.wait_for(*frame);
      double t = now_seconds() - start;
      frame_total += t;
      frame_min = std::min(frame_min, t);
    }
    double frame_mean = frame_total / options.frames;
    if (!options.screenshot.empty() && !frame_measured) {
      SceneSettings shot = settings;
      shot.wireframe = mesh.face_count() <= 20000;  // a denser wireframe is a grey blur
      if (auto s = save_screenshot(**target, camera, shot, options.screenshot); !s.ok()) {
        std::fprintf(stderr, "cubeforge-bench-viewport: %s\n", s.error().to_string().c_str());
        return 1;
      }
    }
    if (!frame_measured) {
      frame_ms_mean = frame_mean * 1e3;
      frame_ms_min = frame_min * 1e3;
      frame_measured = true;
    }
    double per_upload = upload_seconds / options.uploads;
    result.upload_ms = per_upload * 1e3;
    result.upload_gbps = mesh_bytes / per_upload / 1e9;

    // Generation-like updates: a new mesh and a frame per update.
    OrbitCamera update_camera = camera;
    update_camera.frame(update_mesh.bounds(), float(options.width) / float(options.height));
    double start = now_seconds();
    uint64_t last = 0;
    for (int i = 0; i < options.updates; ++i) {
      if (!r.meshes().upload(update_mesh).ok()) return 1;
      auto frame = (*target)->render(update_camera, settings);
      if (!frame.ok()) return 1;
      last = *frame;
    }
    ctx.wait_for(last);
    double update_seconds = now_seconds() - start;
    result.update_hz = options.updates / update_seconds;
    result.update_frame_ms = update_seconds / options.updates * 1e3;
    double upload_only = 0;
    for (int i = 0; i < options.updates; ++i) {
      double t0 = now_seconds();
      if (!r.meshes().upload(update_mesh).ok() || !r.meshes().finish().ok()) return 1;
      upload_only += now_seconds() - t0;
    }
    result.update_upload_ms = upload_only / options.updates * 1e3;
    results.push_back(result);
  }

  const size_t triangles = mesh.face_count();
  if (options.json) {
    std::printf("{\"device\": \"%s\", \"width\": %u, \"height\": %u, \"samples\": %d, \"triangles\": %zu,\n",
                json_escape(ctx.device_name()).c_str(), options.width, options.height,
                int(choose_samples(ctx, static_cast<VkSampleCountFlagBits>(0))), triangles);
    std::printf(" \"frame_ms\": {\"mean\": %.3f, \"min\": %.3f, \"frames\": %d},\n", frame_ms_mean, frame_ms_min,
                options.frames);
    std::printf(" \"mesh_bytes\": %.0f, \"update_triangles\": %zu,\n", mesh_bytes, update_mesh.face_count());
    std::printf(" \"interop_unavailable\": \"%s\",\n", json_escape(interop_note).c_str());
    std::printf(" \"uploads\": [");
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("%s{\"path\": \"%s\", \"gb_per_s\": %.3f, \"ms\": %.3f, \"update_hz\": %.2f, \"update_ms\": %.3f, "
                  "\"update_upload_ms\": %.3f}",
                  i ? ", " : "", results[i].path.c_str(), results[i].upload_gbps, results[i].upload_ms,
                  results[i].update_hz, results[i].update_frame_ms, results[i].update_upload_ms);
    std::printf("]}\n");
  } else {
    std::printf("device            : %s\n", ctx.device_name().c_str());
    std::printf("mesh              : %zu triangles, %.1f MB (positions + normals + indices)\n", triangles,
                mesh_bytes / 1e6);
    std::printf("offscreen frame   : %.2f ms mean, %.2f ms min over %d frames at %ux%u, %dx MSAA\n", frame_ms_mean,
                frame_ms_min, options.frames, options.width, options.height,
                int(choose_samples(ctx, static_cast<VkSampleCountFlagBits>(0))));
    if (!interop_note.empty()) std::printf("cuda interop      : unavailable (%s)\n", interop_note.c_str());
    for (const auto& r : results) {
      std::printf("upload (%s) : %.2f GB/s (%.2f ms per %zu-triangle mesh)\n", r.path.c_str(), r.upload_gbps,
                  r.upload_ms, triangles);
      std::printf("updates (%s): %.1f updates/s with a frame each (%zu triangles, %.1f ms per update)\n",
                  r.path.c_str(), r.update_hz, update_mesh.face_count(), r.update_frame_ms);
      std::printf("update upload (%s): %.2f ms per %zu-triangle mesh (the rest of an update is the frame)\n",
                  r.path.c_str(), r.update_upload_ms, update_mesh.face_count());
    }
  }
  return 0;
}

}  // namespace
}  // namespace cubeforge::engine

int main(int argc, char** argv) {
  cubeforge::engine::Options options;
  if (!cubeforge::engine::parse(argc, argv, options)) {
    cubeforge::engine::usage();
    return 2;
  }
  return cubeforge::engine::run(options);
}
