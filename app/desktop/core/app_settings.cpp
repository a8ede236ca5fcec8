// App settings: JSON round trip, the `set` vocabulary, the request they make.
#include "app/desktop/core/app_settings.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <sstream>
#include <type_traits>
#include <vector>

#include "app/desktop/core/json_number.h"
#include "inference/core/file_io.h"
#include "inference/options/engine_options.h"

namespace cubeforge::app {

namespace {

// One table of fields drives the JSON writer, the reader and `set`, so a new
// setting cannot be written but forgotten on read.
template <class Visitor>
void visit_fields(AppSettings& s, Visitor&& visit) {
  visit("model_folder", s.model_folder);
  visit("recent_folders", s.recent_folders);
  visit("prompt", s.prompt);
  visit("backend", s.backend);
  visit("kv_cache", s.kv_cache);
  visit("cuda_graphs", s.cuda_graphs);
  visit("attention", s.attention);
  visit("weights", s.weights);
  visit("kv_cache_format", s.kv_cache_format);
  visit("kv_budget", s.kv_budget);
  visit("kv_rank", s.kv_rank);
  visit("guidance", s.guidance);
  visit("seed", s.seed);
  visit("sampling", s.sampling);
  visit("temperature", s.temperature);
  visit("top_k", s.top_k);
  visit("top_p", s.top_p);
  visit("use_bbox", s.use_bbox);
  visit("bbox", s.bbox);
  visit("resolution", s.resolution);
  visit("resolution_chosen", s.resolution_chosen);
  visit("detail_calibration_ms", s.detail_calibration_ms);
  visit("target_faces", s.target_faces);
  visit("latency_decoding", s.latency_decoding);
  visit("diffusion_threshold", s.diffusion_threshold);
  visit("progressive_preview", s.progressive_preview);
  visit("preview_every", s.preview_every);
  visit("preview_resolution", s.preview_resolution);
  visit("remove_loose_pieces", s.remove_loose_pieces);
  visit("loose_piece_fraction", s.loose_piece_fraction);
  visit("export_folder", s.export_folder);
  visit("export_template", s.export_template);
  visit("wireframe", s.wireframe);
  visit("flat_shading", s.flat_shading);
  visit("turntable", s.turntable);
  visit("grid", s.grid);
  visit("window_width", s.window_width);
  visit("window_height", s.window_height);
}

Status check_ranges(const AppSettings& s) {
  auto bad = [](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, what); };
  if (!parse_backend_choice(s.backend).ok())
    return bad("setting 'backend' must be auto, cpu or cuda, not '" + s.backend + "'");
  if (!parse_attention_mode(s.attention))
    return bad("setting 'attention' must be causal or reference, not '" + s.attention + "'");
  if (!weight_format_from_name(s.weights))
    return bad("setting 'weights' must be stored, bf16, q8 or q4, not '" + s.weights + "'");
  if (!kv_format_from_name(s.kv_cache_format))
    return bad("setting 'kv_cache_format' must be f32, bf16, fp8 or int8, not '" + s.kv_cache_format + "'");
  if (s.kv_budget < 0 || s.kv_budget > kMaxKvSize)
    return bad("setting 'kv_budget' must be 0 (every position) or a number of positions up to " +
               std::to_string(kMaxKvSize));
  if (s.kv_rank < 0 || s.kv_rank > kMaxKvSize)
    return bad("setting 'kv_rank' must be 0 (full rank) or a rank up to " + std::to_string(kMaxKvSize));
  // The engine's check of the decode options, worded as the setting at fault
  // (an option's key is its setting's name).
  DecodeOptions decode;
  decode.kv_cache = chosen_kv_options(s);
  decode.attention = parse_attention_mode(s.attention).value_or(AttentionMode::kCausal);
  if (Status checked = check_decode_options(decode); !checked.ok())
    return bad("setting '" + checked.error().option + "': " + checked.error().message);
  if (s.resolution < 2 || s.resolution > 10) return bad("setting 'resolution' must be in 2..10");
  if (!(s.detail_calibration_ms >= 0 && s.detail_calibration_ms < 1e7))
    return bad("setting 'detail_calibration_ms' must be 0 (not measured) or milliseconds below 1e7");
  if (!parse_decoding_mode(s.latency_decoding))
    return bad("setting 'latency_decoding' must be sequential, jacobi or diffusion, not '" + s.latency_decoding + "'");
  if (!(s.diffusion_threshold >= 0.f && s.diffusion_threshold <= 1.f))
    return bad("setting 'diffusion_threshold' must be in (0, 1], or 0 for the model's");
  if (s.preview_resolution < 2 || s.preview_resolution > 8) return bad("setting 'preview_resolution' must be in 2..8");
  if (s.preview_every < 1) return bad("setting 'preview_every' must be at least 1");
  if (!(s.guidance == kModelGuidance || (s.guidance >= 0.f && s.guidance <= kMaxGuidance)))
    return bad("setting 'guidance' must be in 0..100, or -1 for the model's");
  if (!(s.temperature > 0.f)) return bad("setting 'temperature' must be positive");
  if (s.top_k < 0) return bad("setting 'top_k' must be 0 (off) or positive");
  if (!(s.top_p > 0.f && s.top_p <= 1.f)) return bad("setting 'top_p' must be in (0, 1]");
  if (!(s.loose_piece_fraction > 0.f && s.loose_piece_fraction <= 0.5f))
    return bad("setting 'loose_piece_fraction' must be in (0, 0.5]: a share of the largest piece's volume");
  for (float side : s.bbox)
    if (!(side >= kMinBoundingBoxSide && side <= kMaxBoundingBoxSide)) {
      char range[96];
      std::snprintf(range, sizeof range, "setting 'bbox' needs three sizes from %g to %g",
                    double(kMinBoundingBoxSide), double(kMaxBoundingBoxSide));
      return bad(range);
    }
  return ok_status();
}

Result<bool> parse_bool(const std::string& key, const std::string& text) {
  if (text == "on" || text == "true" || text == "1" || text == "yes") return true;
  if (text == "off" || text == "false" || text == "0" || text == "no") return false;
  return make_error(ErrorCode::kInvalidArgument, "setting '" + key + "' takes on or off, not '" + text + "'");
}

// What a setting's value must be, for a person reading the error.
template <class T>
const char* kind_of(const T&) {
  if constexpr (std::is_same_v<T, bool>) return "true or false";
  else if constexpr (std::is_arithmetic_v<T>) return "a number";
  else if constexpr (std::is_same_v<T, std::string>) return "text";
  else return "a list of three numbers";
}

}  // namespace

nlohmann::json settings_to_json(const AppSettings& settings) {
  nlohmann::json json = nlohmann::json::object();
  AppSettings copy = settings;
  visit_fields(copy, [&](const char* key, auto& field) { json[key] = field; });
  return json;
}

Result<AppSettings> settings_from_json(const nlohmann::json& json) {
  if (!json.is_object()) return make_error(ErrorCode::kCorruptFile, "settings must be a JSON object");
  AppSettings settings;
  std::string failure;
  visit_fields(settings, [&](const char* key, auto& field) {
    auto found = json.find(key);
    if (found == json.end() || !failure.empty()) return;
    using Field = std::decay_t<decltype(field)>;
    const std::string name = std::string("setting '") + key + "'";
    auto wrong_kind = [&] {
      failure = name + " should be " + kind_of(field) + ", not " +
                (found->is_array() ? "a list of " + std::to_string(found->size()) + " values"
                                   : std::string(found->type_name()));
    };
    try {
      if constexpr (std::is_arithmetic_v<Field> && !std::is_same_v<Field, bool>) {
        if (!found->is_number()) return wrong_kind();
        // Narrowed to the field's type and checked there; the ranges of each setting follow in check_ranges.
        if (Status read = json_number(*found, field, name); !read.ok()) failure = read.error().message;
      } else if constexpr (std::is_same_v<Field, std::array<float, 3>>) {
        if (!found->is_array() || found->size() != 3) return wrong_kind();
        for (size_t i = 0; i < 3 && failure.empty(); ++i) {
          if (!(*found)[i].is_number()) return wrong_kind();
          if (Status read = json_number((*found)[i], field[i], name + "[" + std::to_string(i) + "]"); !read.ok())
            failure = read.error().message;
        }
      } else {
        found->get_to(field);
      }
    } catch (const nlohmann::json::exception&) {
      // In words, not the JSON library's exception text.
      failure = name + " should be " + kind_of(field) + ", not " + found->type_name();
    }
  });
  if (!failure.empty()) return make_error(ErrorCode::kCorruptFile, failure);
  // The working directory was the default export folder before the documents
  // folder: a "." saved then was never chosen, so it becomes the new default.
  if (settings.export_folder == ".") settings.export_folder.clear();
  if (settings.recent_folders.size() > AppSettings::kMaxRecentFolders)
    settings.recent_folders.resize(AppSettings::kMaxRecentFolders);
  CUBEFORGE_TRY(check_ranges(settings));
  return settings;
}

Result<AppSettings> load_settings(const std::filesystem::path& path) {
  CUBEFORGE_ASSIGN_OR_RETURN(FileKind kind, file_kind(path));
  if (kind == FileKind::kMissing) return AppSettings{};
  CUBEFORGE_ASSIGN_OR_RETURN(std::string text, read_file_text(path, uint64_t(16) << 20));
  nlohmann::json json = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded())
    return make_error(ErrorCode::kCorruptFile,
                      "settings file '" + path.string() + "' is not valid JSON; delete it to start from the defaults");
  auto settings = settings_from_json(json);
  if (!settings.ok())
    return make_error(ErrorCode::kCorruptFile, "settings file '" + path.string() + "': " + settings.error().message);
  return settings;
}

Status save_settings(const AppSettings& settings, const std::filesystem::path& path) {
  std::error_code ec;
  std::filesystem::create_directories(path.parent_path(), ec);
  return write_file_atomically(path, settings_to_json(settings).dump(2, ' ', false, nlohmann::json::error_handler_t::replace) + "\n");
}

Status set_setting(AppSettings& settings, const std::string& key, const std::string& value) {
  AppSettings updated = settings;
  bool known = false;
  std::string failure;
  visit_fields(updated, [&](const char* name, auto& field) {
    if (key != name) return;
    known = true;
    using Field = std::decay_t<decltype(field)>;
    if constexpr (std::is_same_v<Field, bool>) {
      auto parsed = parse_bool(key, value);
      if (parsed.ok()) field = *parsed;
      else failure = parsed.error().message;
    } else if constexpr (std::is_same_v<Field, std::string>) {
      field = value;
    } else if constexpr (std::is_same_v<Field, std::vector<std::string>>) {
      failure = "setting '" + key + "' cannot be set from a script";
    } else if constexpr (std::is_same_v<Field, std::array<float, 3>>) {
      std::istringstream in(value);
      std::vector<std::string> words;
      for (std::string word; in >> word;) words.push_back(word);
      if (words.size() != 3) {
        failure = "setting 'bbox' takes three numbers: X Y Z";
        return;
      }
      std::array<float, 3> parsed{};
      for (size_t i = 0; i < 3 && failure.empty(); ++i) {
        auto number = narrow_number_text<float>(words[i], {}, {"", "setting 'bbox' [" + std::to_string(i) + "]"});
        if (number.ok()) parsed[i] = *number;
        else failure = number.error().message;
      }
      if (failure.empty()) field = parsed;
    } else {
      // Narrowed to the field's type and checked there, as from the settings file.
      auto number = narrow_number_text<Field>(value, {}, {"", "setting '" + key + "'"});
      if (number.ok()) field = *number;
      else failure = number.error().message;
    }
  });
  if (!known) return make_error(ErrorCode::kInvalidArgument, "unknown setting '" + key + "'");
  if (!failure.empty()) return make_error(ErrorCode::kInvalidArgument, failure);
  if (key == "resolution") updated.resolution_chosen = true;  // as the slider does
  CUBEFORGE_TRY(check_ranges(updated));
  settings = std::move(updated);
  return ok_status();
}

void remember_folder(AppSettings& settings, const std::string& folder) {
  if (folder.empty()) return;
  auto& recent = settings.recent_folders;
  recent.erase(std::remove(recent.begin(), recent.end(), folder), recent.end());
  recent.insert(recent.begin(), folder);
  if (recent.size() > AppSettings::kMaxRecentFolders) recent.resize(AppSettings::kMaxRecentFolders);
}

GenerationRequest make_request(const AppSettings& s) {
  GenerationRequest request;
  request.prompt = s.prompt;
  request.seed = s.seed;
  request.guidance_scale = s.guidance;
  request.sampling.greedy = !s.sampling;  // the knobs shape sampling; the switch turns it on
  request.sampling.temperature = s.temperature;
  request.sampling.top_k = s.top_k;
  request.sampling.top_p = s.top_p;
  if (s.use_bbox) request.bbox = s.bbox;
  request.resolution = s.resolution;
  request.attention = parse_attention_mode(s.attention).value_or(AttentionMode::kCausal);
  request.use_kv_cache = s.kv_cache;
  if (s.kv_cache) request.kv_cache = chosen_kv_options(s);
  request.backend = parse_backend_choice(s.backend).ok() ? *parse_backend_choice(s.backend) : BackendChoice::kAuto;
  request.cuda_graphs = s.cuda_graphs;
  request.target_faces = s.target_faces;
  request.decoding.diffusion.threshold = s.diffusion_threshold;
  return request;
}

KvCacheOptions chosen_kv_options(const AppSettings& s) {
  KvCacheOptions kv;
  kv.format = kv_format_from_name(s.kv_cache_format).value_or(KvFormat::kF32);
  kv.budget = s.kv_budget;
  kv.rank = s.kv_rank;
  return kv;
}

bool kv_cache_exact(const AppSettings& s) {
  return !s.kv_cache || (s.kv_cache_format == "f32" && s.kv_budget == 0 && s.kv_rank == 0);
}

bool engine_options_exact(const AppSettings& s) { return s.weights == "stored" && kv_cache_exact(s); }

}  // namespace cubeforge::app
