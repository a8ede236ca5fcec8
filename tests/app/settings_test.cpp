// App settings: JSON round trip through the file, lenient about missing keys,
// strict about wrong types and ranges, and the script's `set` vocabulary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "app/desktop/core/app_settings.h"
#include "inference/core/file_io.h"
#include "test_folder.h"
#include "tests/support/hostile_numbers.h"

namespace cubeforge::app {
namespace {

TEST(AppSettings, RoundTripThroughTheFileKeepsEveryField) {
  testing::TemporaryFolder folder;
  AppSettings settings;
  settings.model_folder = "/models/cube";
  remember_folder(settings, "/models/a");
  remember_folder(settings, "/models/b");
  settings.prompt = "a teapot\nwith a lid";
  settings.kv_cache = false;
  settings.guidance = 4.5f;
  settings.seed = 1234567890123ull;
  settings.sampling = true;
  settings.temperature = 0.7f;
  settings.top_k = 12;
  settings.top_p = 0.9f;
  settings.use_bbox = true;
  settings.bbox = {1.f, 2.f, 0.5f};
  settings.resolution = 6;
  settings.target_faces = -1;
  settings.latency_decoding = "diffusion";
  settings.diffusion_threshold = 0.75f;
  settings.weights = "q4";
  settings.kv_cache_format = "fp8";
  settings.kv_budget = 24;
  settings.kv_rank = 16;
  settings.progressive_preview = true;
  settings.preview_every = 3;
  settings.export_template = "{seed}.stl";
  settings.export_folder = "~/shapes";
  settings.remove_loose_pieces = true;
  settings.loose_piece_fraction = 0.1f;
  settings.wireframe = true;
  settings.window_width = 960;
  const auto path = folder.path() / "sub" / "settings.json";
  ASSERT_TRUE(save_settings(settings, path).ok());
  auto loaded = load_settings(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(settings_to_json(*loaded), settings_to_json(settings));
  EXPECT_EQ(loaded->seed, 1234567890123ull);
  EXPECT_EQ(loaded->prompt, "a teapot\nwith a lid");
  EXPECT_EQ(loaded->recent_folders, (std::vector<std::string>{"/models/b", "/models/a"}));
  EXPECT_EQ(loaded->weights, "q4");
  EXPECT_EQ(loaded->kv_cache_format, "fp8");
  EXPECT_EQ(loaded->kv_budget, 24);
  EXPECT_EQ(loaded->kv_rank, 16);
  // The exact attention quirk round-trips with the exact cache.
  settings.attention = "reference";
  settings.kv_cache_format = "f32";
  settings.kv_budget = settings.kv_rank = 0;
  ASSERT_TRUE(save_settings(settings, path).ok());
  loaded = load_settings(path);
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->attention, "reference");
}

TEST(AppSettings, MissingFileGivesDefaultsAndMissingKeysKeepThem) {
  testing::TemporaryFolder folder;
  auto missing = load_settings(folder.path() / "none.json");
  ASSERT_TRUE(missing.ok());
  EXPECT_EQ(settings_to_json(*missing), settings_to_json(AppSettings{}));
  auto partial = settings_from_json(nlohmann::json{{"resolution", 5}});
  ASSERT_TRUE(partial.ok());
  EXPECT_EQ(partial->resolution, 5);
  EXPECT_EQ(partial->guidance, AppSettings{}.guidance);
  // A settings file from before the smaller weights and caches: the exact defaults.
  EXPECT_EQ(partial->weights, "stored");
  EXPECT_EQ(partial->kv_cache_format, "f32");
  EXPECT_EQ(partial->kv_budget, 0);
  EXPECT_EQ(partial->kv_rank, 0);
  EXPECT_TRUE(engine_options_exact(*partial));
  // From before the documents folder: the working directory, saved as the old
  // default, becomes the new default; a folder chosen stays.
  auto old_default = settings_from_json(nlohmann::json{{"export_folder", "."}});
  ASSERT_TRUE(old_default.ok());
  EXPECT_EQ(old_default->export_folder, "");
  auto chosen = settings_from_json(nlohmann::json{{"export_folder", "./exports"}});
  ASSERT_TRUE(chosen.ok());
  EXPECT_EQ(chosen->export_folder, "./exports");
  EXPECT_FALSE(partial->remove_loose_pieces);
  EXPECT_FALSE(settings_from_json(nlohmann::json{{"loose_piece_fraction", 0}}).ok());
}

// Each value the engine does not take, and each combination it refuses, is an
// error naming the setting; the app then starts from the defaults.
TEST(AppSettings, WeightsAndKvCacheValuesAreChecked) {
  struct Bad {
    const char* json;
    const char* named;
  };
  for (const Bad& bad : {Bad{R"({"weights": "q2"})", "'weights'"},
                         Bad{R"({"weights": 8})", "'weights'"},
                         Bad{R"({"kv_cache_format": "int4"})", "'kv_cache_format'"},
                         Bad{R"({"kv_cache_format": true})", "'kv_cache_format'"},
                         Bad{R"({"kv_budget": -4})", "'kv_budget'"},
                         Bad{R"({"kv_budget": 2e6})", "'kv_budget'"},
                         Bad{R"({"kv_budget": "all"})", "'kv_budget'"},
                         Bad{R"({"kv_budget": 1})", "setting 'kv_budget': a KV budget keeps BOS"},
                         Bad{R"({"kv_rank": -1})", "'kv_rank'"},
                         Bad{R"({"kv_rank": 1.5})", "'kv_rank'"},
                         Bad{R"({"kv_cache_format": "int8", "kv_budget": 32})", "INT8"},
                         Bad{R"({"attention": "reference", "kv_cache_format": "bf16"})", "setting 'attention': "},
                         Bad{R"({"attention": "reference", "kv_budget": 16})", "exact KV cache"},
                         Bad{R"({"attention": "reference", "kv_rank": 8})", "exact KV cache"}}) {
    auto parsed = settings_from_json(nlohmann::json::parse(bad.json));
    ASSERT_FALSE(parsed.ok()) << bad.json;
    EXPECT_NE(parsed.error().message.find(bad.named), std::string::npos) << bad.json << ": " << parsed.error().message;
    EXPECT_EQ(parsed.error().message.find("json.exception"), std::string::npos) << parsed.error().message;
  }
  // Through the file: an error naming the file and the setting, never a crash.
  testing::TemporaryFolder folder;
  const auto path = folder.path() / "settings.json";
  ASSERT_TRUE(write_file_atomically(path, std::string_view(R"({"resolution": 5, "weights": "q3"})")).ok());
  auto loaded = load_settings(path);
  ASSERT_FALSE(loaded.ok());
  EXPECT_EQ(loaded.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(loaded.error().message.find("settings.json"), std::string::npos) << loaded.error().message;
  EXPECT_NE(loaded.error().message.find("must be stored, bf16, q8 or q4, not 'q3'"), std::string::npos)
      << loaded.error().message;

  // What the engine takes: every format alone, a budget with every storage but int8, a rank with any.
  for (const char* weights : {"stored", "bf16", "q8", "q4"})
    for (const char* format : {"f32", "bf16", "fp8", "int8"}) {
      nlohmann::json json = {{"weights", weights}, {"kv_cache_format", format}, {"kv_rank", 8}};
      if (std::string(format) != "int8") json["kv_budget"] = 16;
      auto fine = settings_from_json(json);
      EXPECT_TRUE(fine.ok()) << json.dump() << ": " << fine.error().to_string();
    }
}

TEST(AppSettings, WrongTypesAndRangesAreErrorsNamingTheKey) {
  auto wrong_type = settings_from_json(nlohmann::json{{"resolution", "high"}});
  ASSERT_FALSE(wrong_type.ok());
  EXPECT_NE(wrong_type.error().message.find("resolution"), std::string::npos);
  // Said in words, never as the JSON library's exception text.
  EXPECT_NE(wrong_type.error().message.find("should be a number, not string"), std::string::npos)
      << wrong_type.error().message;
  EXPECT_EQ(wrong_type.error().message.find("json.exception"), std::string::npos) << wrong_type.error().message;
  auto out_of_range = settings_from_json(nlohmann::json{{"top_p", 1.5}});
  ASSERT_FALSE(out_of_range.ok());
  EXPECT_NE(out_of_range.error().message.find("top_p"), std::string::npos);
  auto unknown_decoding = settings_from_json(nlohmann::json{{"latency_decoding", "speculative"}});
  ASSERT_FALSE(unknown_decoding.ok());
  EXPECT_NE(unknown_decoding.error().message.find("latency_decoding"), std::string::npos);
  for (double threshold : {1.5, -0.2}) {
    auto bad_threshold = settings_from_json(nlohmann::json{{"diffusion_threshold", threshold}});
    ASSERT_FALSE(bad_threshold.ok()) << threshold;
    EXPECT_NE(bad_threshold.error().message.find("diffusion_threshold"), std::string::npos);
  }
  // 0 leaves the threshold to the model (its config.yaml's, else the engine's default).
  auto models_own = settings_from_json(nlohmann::json{{"diffusion_threshold", 0.0}});
  ASSERT_TRUE(models_own.ok()) << models_own.error().message;
  EXPECT_EQ(models_own->diffusion_threshold, 0.f);

  testing::TemporaryFolder folder;
  ASSERT_TRUE(write_file_atomically(folder.path() / "bad.json", std::string_view("{not json")).ok());
  auto corrupt = load_settings(folder.path() / "bad.json");
  ASSERT_FALSE(corrupt.ok());
  EXPECT_EQ(corrupt.error().code, ErrorCode::kCorruptFile);
}

TEST(AppSettings, SetTakesTheSettingsNames) {
  AppSettings settings;
  ASSERT_TRUE(set_setting(settings, "resolution", "5").ok());
  ASSERT_TRUE(set_setting(settings, "kv_cache", "off").ok());
  ASSERT_TRUE(set_setting(settings, "guidance", "0.5").ok());
  ASSERT_TRUE(set_setting(settings, "bbox", "1 2 3").ok());
  ASSERT_TRUE(set_setting(settings, "seed", "42").ok());
  ASSERT_TRUE(set_setting(settings, "attention", "reference").ok());
  EXPECT_EQ(settings.resolution, 5);
  EXPECT_FALSE(settings.kv_cache);
  EXPECT_FLOAT_EQ(settings.guidance, 0.5f);
  EXPECT_EQ(settings.bbox, (std::array<float, 3>{1, 2, 3}));
  EXPECT_EQ(settings.seed, 42u);

  EXPECT_FALSE(set_setting(settings, "resolution", "12").ok());  // out of range
  EXPECT_EQ(settings.resolution, 5);                             // unchanged on error
  EXPECT_FALSE(set_setting(settings, "resolution", "5x").ok());
  EXPECT_FALSE(set_setting(settings, "kv_cache", "maybe").ok());
  EXPECT_FALSE(set_setting(settings, "no_such_key", "1").ok());
  EXPECT_FALSE(set_setting(settings, "attention", "sideways").ok());

  // The smaller weights and caches; a refused combination leaves the settings as they were.
  settings.attention = "causal";
  ASSERT_TRUE(set_setting(settings, "weights", "q8").ok());
  ASSERT_TRUE(set_setting(settings, "kv_cache_format", "int8").ok());
  ASSERT_TRUE(set_setting(settings, "kv_rank", "4").ok());
  EXPECT_EQ(settings.weights, "q8");
  EXPECT_EQ(settings.kv_cache_format, "int8");
  EXPECT_EQ(settings.kv_rank, 4);
  EXPECT_FALSE(engine_options_exact(settings));
  EXPECT_FALSE(set_setting(settings, "weights", "q5").ok());
  EXPECT_EQ(settings.weights, "q8");
  Status evicting_int8 = set_setting(settings, "kv_budget", "32");
  ASSERT_FALSE(evicting_int8.ok());
  EXPECT_NE(evicting_int8.error().message.find("INT8"), std::string::npos) << evicting_int8.error().message;
  EXPECT_EQ(settings.kv_budget, 0);
  EXPECT_FALSE(set_setting(settings, "attention", "reference").ok());
  EXPECT_EQ(settings.attention, "causal");
  ASSERT_TRUE(set_setting(settings, "kv_cache_format", "fp8").ok());
  ASSERT_TRUE(set_setting(settings, "kv_budget", "32").ok());
  EXPECT_EQ(settings.kv_budget, 32);
  EXPECT_FALSE(set_setting(settings, "kv_budget", "1").ok());
  EXPECT_FALSE(set_setting(settings, "kv_rank", "-2").ok());
  EXPECT_FALSE(set_setting(settings, "kv_budget", "lots").ok());
}

// Guidance is the model's until chosen; -1 says so in the file and in `set`,
// and the request leaves it to the model (planning settles it).
TEST(AppSettings, GuidanceIsTheModelsUntilChosen) {
  AppSettings settings;
  EXPECT_EQ(settings.guidance, kModelGuidance);
  EXPECT_EQ(make_request(settings).guidance_scale, kModelGuidance);
  ASSERT_TRUE(set_setting(settings, "guidance", "2.5").ok());
  EXPECT_EQ(make_request(settings).guidance_scale, 2.5f);
  ASSERT_TRUE(set_setting(settings, "guidance", "0").ok());
  EXPECT_EQ(make_request(settings).batch(), 1) << "0 turns guidance off";
  ASSERT_TRUE(set_setting(settings, "guidance", "-1").ok());
  EXPECT_EQ(settings.guidance, kModelGuidance);
  for (const char* bad : {"-2", "-0.5", "101", "nan"}) {
    const Status refused = set_setting(settings, "guidance", bad);
    ASSERT_FALSE(refused.ok()) << bad;
    EXPECT_NE(refused.error().message.find("guidance"), std::string::npos) << refused.error().message;
    EXPECT_EQ(settings.guidance, kModelGuidance) << "unchanged on error";
  }
}

TEST(AppSettings, RecentFoldersAreUniqueMostRecentFirstAndBounded) {
  AppSettings settings;
  for (int i = 0; i < 12; ++i) remember_folder(settings, "/m/" + std::to_string(i));
  remember_folder(settings, "/m/9");
  ASSERT_EQ(settings.recent_folders.size(), AppSettings::kMaxRecentFolders);
  EXPECT_EQ(settings.recent_folders[0], "/m/9");
  EXPECT_EQ(settings.recent_folders[1], "/m/11");
  EXPECT_EQ(std::count(settings.recent_folders.begin(), settings.recent_folders.end(), "/m/9"), 1);
}

TEST(AppSettings, RequestCarriesTheSettings) {
  AppSettings settings;
  settings.prompt = "a chair";
  settings.seed = 7;
  settings.sampling = true;
  settings.top_k = 5;
  settings.use_bbox = true;
  settings.bbox = {1, 2, 1};
  settings.kv_cache = false;
  settings.attention = "reference";
  settings.resolution = 5;
  settings.diffusion_threshold = 0.8f;
  GenerationRequest request = make_request(settings);
  EXPECT_EQ(request.prompt, "a chair");
  EXPECT_EQ(request.seed, 7u);
  EXPECT_FALSE(request.sampling.greedy);
  EXPECT_EQ(request.sampling.top_k, 5);
  ASSERT_TRUE(request.bbox.has_value());
  EXPECT_EQ((*request.bbox)[1], 2.f);
  EXPECT_FALSE(request.use_kv_cache);
  EXPECT_EQ(request.attention, AttentionMode::kReference);
  EXPECT_EQ(request.resolution, 5);
  // Generate decodes token by token (a block-diffusion model by blocks, at this threshold).
  EXPECT_EQ(request.decoding.mode, DecodingMode::kSequential);
  EXPECT_FLOAT_EQ(request.decoding.diffusion.threshold, 0.8f);
  settings.use_bbox = false;
  EXPECT_FALSE(make_request(settings).bbox.has_value());
}

// The KV cache options reach the request when the cache is on; without the
// cache there is nothing to store, and the request keeps the exact options
// (the engine refuses KV options without a cache). Planning reads the rank's bases.
TEST(AppSettings, RequestCarriesTheKvCacheOptionsWhenTheCacheIsOn) {
  AppSettings settings;
  EXPECT_TRUE(make_request(settings).kv_cache.exact());
  settings.kv_cache_format = "bf16";
  settings.kv_budget = 12;
  settings.kv_rank = 6;
  GenerationRequest request = make_request(settings);
  EXPECT_TRUE(request.use_kv_cache);
  EXPECT_EQ(request.kv_cache.format, KvFormat::kBF16);
  EXPECT_EQ(request.kv_cache.budget, 12);
  EXPECT_EQ(request.kv_cache.rank, 6);
  EXPECT_EQ(request.kv_cache.low_rank, nullptr);
  EXPECT_FALSE(engine_options_exact(settings));
  settings.kv_cache = false;
  request = make_request(settings);
  EXPECT_FALSE(request.use_kv_cache);
  EXPECT_TRUE(request.kv_cache.exact());
  EXPECT_TRUE(engine_options_exact(settings)) << "without the cache only the weights can differ";
  settings.weights = "bf16";
  EXPECT_FALSE(engine_options_exact(settings));
  EXPECT_EQ(chosen_kv_options(settings).format, KvFormat::kBF16) << "the latency demo's chosen cache";
  EXPECT_EQ(chosen_kv_options(settings).budget, 12);
}

TEST(AppSettings, ASettingsFileThatIsNotAFileIsAnErrorNotAWaitOrDefaults) {
  testing::TemporaryFolder folder;
  ASSERT_EQ(::mkfifo((folder.path() / "fifo.json").c_str(), 0644), 0);
  auto fifo = load_settings(folder.path() / "fifo.json");
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().message.find("FIFO"), std::string::npos) << fifo.error().message;
  std::filesystem::create_symlink("loop.json", folder.path() / "loop.json");
  auto loop = load_settings(folder.path() / "loop.json");  // was silently the defaults
  ASSERT_FALSE(loop.ok());
  EXPECT_NE(loop.error().message.find("loop of symbolic links"), std::string::npos) << loop.error().message;
}

// A prompt given on the command line can hold any bytes; saving it made
// nlohmann-json throw (an abort when the app closed).
TEST(AppSettings, APromptThatIsNotUtf8IsSavedNotAborted) {
  testing::TemporaryFolder folder;
  AppSettings settings;
  settings.prompt = "a tall chair \xff\xfe";
  ASSERT_TRUE(save_settings(settings, folder.path() / "settings.json").ok());
  auto loaded = load_settings(folder.path() / "settings.json");
  ASSERT_TRUE(loaded.ok()) << loaded.error().to_string();
  EXPECT_EQ(loaded->prompt.substr(0, 13), "a tall chair ");
}

// Found by fuzzing: a number of the wrong kind was cast into the field
// (3e19 into an int, 1e300 into a float: undefined behaviour, caught by UBSan).
TEST(AppSettings, NumbersMustFitTheirSettings) {
  for (const char* text : {R"({"resolution": 3.3e19})", R"({"seed": 1.5})", R"({"temperature": 1e300})",
                           R"({"bbox": [1, 2, 1e300]})", R"({"top_k": -1e10})", R"({"window_width": 4294967296})"}) {
    auto parsed = settings_from_json(nlohmann::json::parse(text));
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_EQ(parsed.error().code, ErrorCode::kCorruptFile) << text;
  }
  auto fine = settings_from_json(nlohmann::json::parse(R"({"seed": 18446744073709551615, "temperature": 0.7})"));
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  EXPECT_EQ(fine->seed, UINT64_MAX);
}

// The class of clip/config.json's 1e-0256 in the settings file and in a
// script's `set`: every setting that needs a positive number refuses each way
// a number can fail as a float (1e-40 was a denormal temperature; 1e-256 a
// temperature of 0), and a bounding box of 3e38 (whose normalisation
// overflows) is out of range. The diffusion threshold's exact 0 is the one
// exception: it leaves the threshold to the model.
TEST(AppSettings, NumbersAreCheckedAfterNarrowing) {
  testing::TemporaryFolder folder;
  const auto path = folder.path() / "settings.json";
  for (const char* key : {"temperature", "top_p", "diffusion_threshold", "bbox"})
    for (const auto& number : ::cubeforge::testing::not_positive_normal_floats()) {
      if (std::string(key) == "diffusion_threshold" && number.text == "0") continue;
      const bool bbox = std::string(key) == "bbox";
      const std::string value = bbox ? "[1, " + number.text + ", 1]" : number.text;
      ASSERT_TRUE(write_file_atomically(path, "{\"" + std::string(key) + "\": " + value + "}").ok());
      auto loaded = load_settings(path);
      ASSERT_FALSE(loaded.ok()) << key << " = " << value;
      EXPECT_NE(loaded.error().message.find(path.string()), std::string::npos) << loaded.error().message;
      if (number.json) {
        EXPECT_NE(loaded.error().message.find(std::string("setting '") + key + "'"), std::string::npos)
            << loaded.error().message;
      }
      AppSettings settings;
      const std::string text = bbox ? "1 " + number.text + " 1" : number.text;
      Status set = set_setting(settings, key, text);
      ASSERT_FALSE(set.ok()) << key << " " << text;
      EXPECT_NE(set.error().message.find(std::string("setting '") + key + "'"), std::string::npos)
          << set.error().message;
    }
  for (const char* huge : {R"({"use_bbox": true, "bbox": [3e38, 1, 1]})", R"({"bbox": [1e-30, 1, 1]})"}) {
    auto refused = settings_from_json(nlohmann::json::parse(huge));
    ASSERT_FALSE(refused.ok()) << huge;
    EXPECT_NE(refused.error().message.find("'bbox' needs three sizes from 1e-06 to 1e+06"), std::string::npos)
        << refused.error().message;
  }
  AppSettings settings;
  EXPECT_FALSE(set_setting(settings, "bbox", "3e38 1 1").ok());
  ASSERT_TRUE(set_setting(settings, "bbox", "2000 500 300").ok());  // millimetres are fine
  EXPECT_EQ(settings.bbox, (std::array<float, 3>{2000, 500, 300}));
  ASSERT_TRUE(set_setting(settings, "temperature", "1e-30").ok());  // small, but a normal float
  EXPECT_EQ(settings.temperature, 1e-30f);
}

}  // namespace
}  // namespace cubeforge::app
