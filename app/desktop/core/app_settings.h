// Everything the user can set in the app, kept between runs as JSON in the
// data folder (settings.json, written atomically).
//
// Reading is lenient about what is missing (a key added in a later version
// keeps its default) and strict about what is wrong (a value of the wrong
// type is an error naming the key). set_setting() is the same vocabulary for
// the script mode's `set KEY VALUE`.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <nlohmann/json_fwd.hpp>

#include "inference/core/result.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/pipeline/generation.h"

namespace cubeforge::app {

struct AppSettings {
  // Model
  std::string model_folder;                // empty: the built-in model, when there is one
  std::vector<std::string> recent_folders;  // most recent first, at most kMaxRecentFolders
  // Generation
  std::string prompt;  // blank: the loaded model's first example (its card.json)
  std::string backend = "auto";            // auto | cpu | cuda
  bool kv_cache = true;
  bool cuda_graphs = true;
  std::string attention = "causal";        // causal | reference
  // Smaller weights and cache (the engine's --weights, --kv-cache, --kv-budget,
  // --kv-rank); the defaults are exact. Changing the weights reloads the model.
  std::string weights = "stored";          // stored | bf16 | q8 | q4
  std::string kv_cache_format = "f32";     // f32 | bf16 | fp8 | int8
  int kv_budget = 0;                       // shape positions kept per layer; 0: every one
  int kv_rank = 0;                         // low-rank keys and values (the model folder's bases); 0: full rank
  float guidance = kModelGuidance;         // -1: the model's (its config.yaml's, else 3); 0: off
  uint64_t seed = 0;
  bool sampling = false;                   // off: greedy
  float temperature = 1.0f;
  int top_k = 0;
  float top_p = 1.0f;
  bool use_bbox = false;
  std::array<float, 3> bbox{1.f, 1.f, 1.f};
  int resolution = 8;
  // Whether the person chose the detail (the slider, a script's `set`); until
  // then it follows the machine's speed (core/detail_timing.h).
  bool resolution_chosen = false;
  // How long one generation at kDetailCalibrationResolution took on this
  // machine, measured once; 0: not yet.
  double detail_calibration_ms = 0;
  int64_t target_faces = 0;                // 0: automatic, < 0: no simplification
  // Parallel decoding: what the latency demo compares (sequential | jacobi |
  // diffusion), and block diffusion's confidence threshold, 0 for the model's
  // (a block-diffusion model always decodes by blocks).
  std::string latency_decoding = "jacobi";
  float diffusion_threshold = 0.f;
  // Progressive preview
  bool progressive_preview = true;
  int preview_every = 8;                   // tokens between previews
  int preview_resolution = 4;
  // Result: pieces under loose_piece_fraction of the largest's volume are
  // left out of the view and of exports (mesh_cleanup.h's rule).
  bool remove_loose_pieces = false;
  float loose_piece_fraction = kDefaultLoosePieceFraction;
  // Export. An empty folder is the desktop's documents folder
  // (documents_folder.h), found when exporting; a folder typed is kept.
  std::string export_folder;
  std::string export_template = "{prompt}-{seed}.glb";
  // Viewport
  bool wireframe = false;
  bool flat_shading = false;
  bool turntable = false;
  bool grid = true;
  // Window
  int window_width = 1280;
  int window_height = 800;

  static constexpr size_t kMaxRecentFolders = 8;
};

nlohmann::json settings_to_json(const AppSettings& settings);
Result<AppSettings> settings_from_json(const nlohmann::json& json);

// A missing file gives the defaults; an unreadable or malformed one an error.
Result<AppSettings> load_settings(const std::filesystem::path& path);
Status save_settings(const AppSettings& settings, const std::filesystem::path& path);

// `set KEY VALUE` with the JSON key names ("resolution", "seed", "kv_cache",
// "bbox" as "X Y Z", ...). Booleans take on/off/true/false/1/0.
Status set_setting(AppSettings& settings, const std::string& key, const std::string& value);

// Puts `folder` first in the recent list (no duplicates, bounded).
void remember_folder(AppSettings& settings, const std::string& folder);

// The generation request these settings describe, before planning
// (inference/planning/plan.h reads the KV rank's bases and opens the
// backend). Its KV cache options are the exact ones when the cache is off
// (there is nothing to store).
GenerationRequest make_request(const AppSettings& settings);
// The KV cache's storage, budget and rank chosen, whether or not the cache is
// on (the latency demo runs with and without it).
KvCacheOptions chosen_kv_options(const AppSettings& settings);

// Whether a generation decodes with the exact weights and KV cache (the
// cache's options do not apply when it is off).
bool engine_options_exact(const AppSettings& settings);
// Whether the KV cache is off or exact (f32, every position, full rank).
bool kv_cache_exact(const AppSettings& settings);

}  // namespace cubeforge::app
