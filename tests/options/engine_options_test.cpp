// The engine's options: every value's name reads back as that value, every
// option key is one spelling, and each refusal names the option at fault.
#include "inference/options/engine_options.h"

#include <gtest/gtest.h>

#include <set>
#include <string>

namespace cubeforge {
namespace {

template <class Enum, class Name, class Parse>
void expect_names_round_trip(std::initializer_list<Enum> values, Name name, Parse parse) {
  std::set<std::string> seen;
  for (Enum value : values) {
    const std::string spelled(name(value));
    EXPECT_NE(spelled, "?");
    EXPECT_TRUE(seen.insert(spelled).second) << spelled << " names two values";
    auto parsed = parse(spelled);
    ASSERT_TRUE(bool(parsed)) << spelled;
    EXPECT_EQ(*parsed, value) << spelled;
  }
  EXPECT_FALSE(bool(parse("")));
  EXPECT_FALSE(bool(parse("no such value")));
}

TEST(EngineOptions, EveryNameReadsBackAsItsValue) {
  expect_names_round_trip({WeightFormat::kStored, WeightFormat::kBF16, WeightFormat::kQ8, WeightFormat::kQ4},
                          weight_format_name, weight_format_from_name);
  expect_names_round_trip({KvFormat::kF32, KvFormat::kBF16, KvFormat::kFp8, KvFormat::kInt8}, kv_format_name,
                          kv_format_from_name);
  expect_names_round_trip({BackendChoice::kAuto, BackendChoice::kCpu, BackendChoice::kCuda}, backend_choice_name,
                          [](std::string_view text) {
                            auto parsed = parse_backend_choice(text);
                            return parsed.ok() ? std::optional<BackendChoice>(*parsed) : std::nullopt;
                          });
  expect_names_round_trip({AttentionMode::kCausal, AttentionMode::kReference}, attention_mode_name,
                          parse_attention_mode);
  expect_names_round_trip({DecodingMode::kSequential, DecodingMode::kJacobi, DecodingMode::kDiffusion},
                          decoding_mode_name, parse_decoding_mode);
  expect_names_round_trip({DiffusionCache::kNone, DiffusionCache::kPrefix, DiffusionCache::kDual}, diffusion_cache_name,
                          parse_diffusion_cache);
}

TEST(EngineOptions, OptionKeysAreOneSpellingEach) {
  std::set<std::string> seen;
  for (int i = 0; i <= int(OptionKey::kTrace); ++i) {
    const OptionKey key = OptionKey(i);
    const std::string spelled = option_key(key);
    EXPECT_NE(spelled, "?") << i;
    EXPECT_TRUE(seen.insert(spelled).second) << spelled << " spells two options";
    EXPECT_EQ(option_key_from_name(spelled), key) << spelled;
  }
  EXPECT_FALSE(option_key_from_name("no_such_option"));
}

TEST(EngineOptions, AnOptionErrorSaysWhichOption) {
  const Error error = option_error(ErrorCode::kInvalidArgument, OptionKey::kKvRank, "too large");
  EXPECT_EQ(error_option(error), OptionKey::kKvRank);
  EXPECT_EQ(error.message, "too large");
  EXPECT_FALSE(error_option(make_error(ErrorCode::kIo, "disk full")));
}

OptionKey refused_option(const Status& status) {
  EXPECT_FALSE(status.ok());
  if (status.ok()) return OptionKey::kTrace;
  auto option = error_option(status.error());
  EXPECT_TRUE(option) << status.error().message;
  return option.value_or(OptionKey::kTrace);
}

TEST(EngineOptions, KvCacheRefusalsNameTheOption) {
  KvCacheOptions kv;
  EXPECT_TRUE(kv.exact());
  EXPECT_TRUE(check_kv_cache_options(kv).ok());
  kv.budget = 1;  // BOS alone
  EXPECT_EQ(refused_option(check_kv_cache_options(kv)), OptionKey::kKvBudget);
  kv.budget = -3;
  EXPECT_EQ(refused_option(check_kv_cache_options(kv)), OptionKey::kKvBudget);
  kv.budget = 8;
  EXPECT_TRUE(check_kv_cache_options(kv).ok());
  EXPECT_FALSE(kv.exact());
  kv.format = KvFormat::kInt8;  // int8 blocks stay as they are; eviction rewrites slots
  EXPECT_EQ(refused_option(check_kv_cache_options(kv)), OptionKey::kKvBudget);
  kv = KvCacheOptions{};
  kv.rank = kMaxKvSize + 1;
  EXPECT_EQ(refused_option(check_kv_cache_options(kv)), OptionKey::kKvRank);
  kv.rank = 16;
  EXPECT_TRUE(check_kv_cache_options(kv).ok());
  EXPECT_FALSE(kv.exact());
  EXPECT_EQ(kv.label(), "f32/rank 16");
}

TEST(EngineOptions, DecodeOptionsAreCheckedAgainstEachOther) {
  DecodeOptions decode;
  EXPECT_TRUE(check_decode_options(decode).ok());
  EXPECT_EQ(decode.batch(), 2);
  decode.guidance_scale = -0.5f;
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kGuidance);
  decode.guidance_scale = kMaxGuidance * 2;
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kGuidance);
  decode.guidance_scale = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kGuidance);
  decode.guidance_scale = kModelGuidance;
  EXPECT_TRUE(check_decode_options(decode).ok()) << "left to the model, settled when it is known";
  decode = DecodeOptions{};
  decode.sampling.greedy = false;
  decode.sampling.temperature = 0.f;
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kTemperature);
  decode.sampling.temperature = 1.f;
  decode.sampling.top_p = 0.f;
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kTopP);
  decode = DecodeOptions{};
  decode.attention = AttentionMode::kReference;
  EXPECT_TRUE(check_decode_options(decode).ok()) << "the quirk with the exact cache";
  decode.kv_cache.format = KvFormat::kFp8;
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kAttention);
  decode.attention = AttentionMode::kCausal;
  decode.use_kv_cache = false;  // nothing to store in fp8
  EXPECT_EQ(refused_option(check_decode_options(decode)), OptionKey::kKvCache);
}

TEST(EngineOptions, MeshingOptionsAreCheckedAgainstEachOther) {
  MeshingOptions meshing;
  EXPECT_TRUE(check_meshing_options(meshing).ok());
  for (int resolution : {kMinResolution - 1, kMaxResolution + 1}) {
    meshing.resolution = resolution;
    EXPECT_EQ(refused_option(check_meshing_options(meshing)), OptionKey::kResolution) << resolution;
  }
  meshing = MeshingOptions{};
  meshing.latent_top_k = 8;
  EXPECT_TRUE(check_meshing_options(meshing).ok());
  meshing.coarse_to_fine = false;  // a dense grid has no coarser level to choose latents from
  EXPECT_EQ(refused_option(check_meshing_options(meshing)), OptionKey::kLatentTopK);
}

}  // namespace
}  // namespace cubeforge
