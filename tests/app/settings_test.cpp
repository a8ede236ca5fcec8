// App settings: JSON round trip through the file, lenient about missing keys,
// strict about wrong types and ranges, and the script's `set` vocabulary.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <nlohmann/json.hpp>

#include "app/desktop/core/app_settings.h"
#include "inference/core/file_io.h"
#include "test_folder.h"

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
  settings.attention = "reference";
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
  settings.progressive_preview = true;
  settings.preview_every = 3;
  settings.export_template = "{seed}.stl";
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
  for (double threshold : {0.0, 1.5, -0.2}) {
    auto bad_threshold = settings_from_json(nlohmann::json{{"diffusion_threshold", threshold}});
    ASSERT_FALSE(bad_threshold.ok()) << threshold;
    EXPECT_NE(bad_threshold.error().message.find("diffusion_threshold"), std::string::npos);
  }

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

}  // namespace
}  // namespace cubeforge::app
