// cubeforge-cli's weight and KV cache options as a user runs them: quantize
// writes a folder that decodes exactly as converting at load does;
// calibrate-kv writes bases that are exact at full rank; compare measures
// each option against the exact run; bench times every combination it is
// given; options that cannot run say why.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "inference/tensor/safetensors.h"
#include "tests/app/run_cli.h"
#include "tests/support/hostile_files.h"
#include "tests/support/oracle.h"
#include "tests/support/run_command.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;
using testing::run_cli;

nlohmann::json json_of(const testing::CommandOutput& r) { return nlohmann::json::parse(r.out.substr(r.out.find('{'))); }

// The built-in model: trained weights, whose meshes have a surface.
const std::filesystem::path kBuiltin = testing::builtin_model_dir();

TEST(CliEngineOptions, QuantizedFolderDecodesAsConversionAtLoad) {
  testing::ScratchFolder scratch("engine-options");
  const auto folder = scratch / "q4";
  auto q = run_cli("quantize --model '" + kBuiltin.string() + "' --out '" + folder.string() +
               "' --weights q4 --q4-group 64 --json");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  const auto report = json_of(q);
  EXPECT_GT(report["matrices_converted"].get<int>(), 0);
  EXPECT_LT(report["quantized_decode_weight_bytes"].get<double>(), 0.2 * report["decode_weight_bytes"].get<double>());
  EXPECT_LT(report["quantized_gpt_file_bytes"].get<double>(), report["gpt_file_bytes"].get<double>());
  EXPECT_TRUE(std::filesystem::exists(folder / "clip" / "vocab.json"));
  // Copies, not links: nothing done to the new folder reaches the model.
  EXPECT_EQ(std::filesystem::hard_link_count(folder / "clip" / "vocab.json"), 1u);
  const std::string common = " --prompt 'a tall chair' --resolution 5 --json --out ";
  auto from_folder = run_cli("generate --model '" + folder.string() + "'" + common + "'" + (scratch / "a.ply").string() + "'");
  auto at_load = run_cli("generate --model '" + kBuiltin.string() + "' --weights q4 --q4-group 64" + common + "'" +
                     (scratch / "b.ply").string() + "'");
  auto exact = run_cli("generate --model '" + kBuiltin.string() + "'" + common + "'" + (scratch / "c.ply").string() + "'");
  ASSERT_EQ(from_folder.exit_code, 0) << from_folder.out;
  ASSERT_EQ(at_load.exit_code, 0) << at_load.out;
  ASSERT_EQ(exact.exit_code, 0) << exact.out;
  EXPECT_EQ(json_of(from_folder)["tokens"], json_of(at_load)["tokens"]);
  EXPECT_EQ(json_of(from_folder)["mesh"]["faces"], json_of(at_load)["mesh"]["faces"]);
  EXPECT_NE(json_of(from_folder)["tokens"], json_of(exact)["tokens"]);  // 4 bits do change the tokens
  // Not onto the model itself, and not as it is.
  EXPECT_EQ(run_cli("quantize --model '" + folder.string() + "' --out '" + folder.string() + "' --weights q8").exit_code, 1);
  EXPECT_NE(run_cli("quantize --model '" + kBuiltin.string() + "' --out '" + (scratch / "x").string() + "' --weights stored")
                .exit_code,
            0);
  // Nor over a model already there, unless asked.
  auto again = run_cli("quantize --model '" + kBuiltin.string() + "' --out '" + folder.string() + "' --weights q8");
  EXPECT_EQ(again.exit_code, 1);
  EXPECT_NE(again.out.find("--force"), std::string::npos) << again.out;
  EXPECT_EQ(run_cli("quantize --model '" + kBuiltin.string() + "' --out '" + folder.string() + "' --weights q8 --force")
                .exit_code,
            0);
}

TEST(CliEngineOptions, CalibratedBasesAtFullRankAreExact) {
  // A copy of the built-in model, to write the bases beside.
  testing::ScratchFolder scratch("engine-options");
  const auto folder = scratch / "calibrated";
  testing::copy_builtin_model(folder);
  auto c = run_cli("calibrate-kv --model '" + folder.string() + "' -p 'a tall chair' -p 'a round table' --json");
  ASSERT_EQ(c.exit_code, 0) << c.out;
  const auto calibration = testing::lab_results(c, "calibrate-kv");
  const int width = calibration["rank"].get<int>();
  EXPECT_EQ(width, 128);
  EXPECT_GT(calibration["rows_per_layer"].get<int>(), 2 * 64);
  const auto& kept = calibration["energy_kept"];
  EXPECT_NEAR(kept.back()["keys"].get<double>(), 1.0, 1e-9);
  EXPECT_LT(kept.front()["keys"].get<double>(), 0.9);
  EXPECT_TRUE(std::filesystem::exists(folder / "kv_bases.safetensors"));
  // Against the exact run: the exact options themselves, full rank, rank 8, 8-bit weights.
  auto r = run_cli("compare --model '" + folder.string() + "' -p 'a short mug' --resolution 5 --iou-resolution 5 " +
               "--weights stored,q8 --kv-rank 0," + std::to_string(width) + ",8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto variants = testing::lab_results(r, "compare")["variants"];
  ASSERT_EQ(variants.size(), 6u);
  EXPECT_EQ(variants[0]["logit_relative_error_mean"].get<double>(), 0.0);
  EXPECT_EQ(variants[0]["token_agreement_mean"].get<double>(), 1.0);
  EXPECT_EQ(variants[0]["first_divergence_min"].get<double>(), 64.0);
  EXPECT_EQ(variants[0]["mesh_iou_min"].get<double>(), 1.0);
  EXPECT_GT(variants[1]["logit_relative_error_mean"].get<double>(), 0.0);
  EXPECT_LT(variants[1]["logit_relative_error_mean"].get<double>(), 1e-4);
  EXPECT_GT(variants[2]["logit_relative_error_mean"].get<double>(), 1e-2);
  EXPECT_EQ(variants[3]["weights"], "q8");
  EXPECT_GT(variants[3]["logit_relative_error_mean"].get<double>(), 1e-4);
  EXPECT_LT(variants[3]["logit_relative_error_mean"].get<double>(), 0.1);
  EXPECT_LT(variants[3]["decode_weight_bytes"].get<double>(), 0.3 * variants[0]["decode_weight_bytes"].get<double>());
  // generate reads the bases beside the model.
  auto g = run_cli("generate --model '" + folder.string() + "' --prompt 'a mug' --kv-rank 16 --resolution 4 --out '" +
               (scratch / "d.ply").string() + "'");
  EXPECT_EQ(g.exit_code, 0) << g.out;
}

TEST(CliEngineOptions, BenchTimesEveryCombination) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto r = run_cli("bench --model '" + oracle_dir().string() +
               "' --steps 6 --weights stored,q8 --kv-cache f32,fp8 --kv-budget 0,4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const auto report = testing::lab_results(r, "bench");
  ASSERT_EQ(report["variants"].size(), 8u);
  const auto& v = report["variants"];
  EXPECT_EQ(v[6]["weights"], "q8");
  EXPECT_EQ(v[6]["kv_cache"], "fp8");
  EXPECT_EQ(v[6]["kv_budget"], 0);
  EXPECT_EQ(v[1]["kv_budget"], 4);
  EXPECT_EQ(v[0]["tpot_ratio_to_first"].get<double>(), 1.0);
  // Q8 keeps about one byte a weight, against the fixture's stored element size.
  auto gpt = SafetensorsFile::open(oracle_dir() / "shape_gpt.safetensors");
  ASSERT_TRUE(gpt.ok()) << gpt.error().to_string();
  auto blocks_weight = gpt->get("transformer.dual_blocks.0.attn.pre_x.c_qk.weight");
  ASSERT_TRUE(blocks_weight.ok()) << blocks_weight.error().to_string();
  const double stored_bytes_per_weight = double(dtype_size(blocks_weight->dtype()));
  EXPECT_LT(v[4]["decode_weight_bytes"].get<double>(),
            1.25 / stored_bytes_per_weight * v[0]["decode_weight_bytes"].get<double>());
  // Fed the first variant's tokens, the others' logits differ from its own by their formats' errors.
  EXPECT_EQ(v[0]["logit_relative_error_to_first"].get<double>(), 0.0);
  EXPECT_GT(v[4]["logit_relative_error_to_first"].get<double>(), 0.0);
  EXPECT_LT(v[4]["logit_relative_error_to_first"].get<double>(), 0.1);
  EXPECT_GT(v[1]["logit_relative_error_to_first"].get<double>(), 0.0);  // 4 of 6 positions kept
}

TEST(CliEngineOptions, OptionsThatCannotRunSayWhy) {
  CUBEFORGE_REQUIRE_ORACLE();
  testing::ScratchFolder scratch("engine-options");
  const std::string generate = "generate --model '" + oracle_dir().string() + "' --prompt 'a cup' --out '" +
                               (scratch / "c.ply").string() + "' ";
  auto int8_budget = run_cli(generate + "--kv-cache int8 --kv-budget 8");
  EXPECT_EQ(int8_budget.exit_code, 2);
  EXPECT_NE(int8_budget.out.find("INT8"), std::string::npos) << int8_budget.out;
  auto no_bases = run_cli(generate + "--kv-rank 8");
  EXPECT_EQ(no_bases.exit_code, 2);
  EXPECT_NE(no_bases.out.find("generate: --kv-rank: "), std::string::npos) << no_bases.out;
  EXPECT_NE(no_bases.out.find("calibrate-kv"), std::string::npos) << no_bases.out;
  // compare plans each variant as generate does: the same refusal, named by the same flag.
  auto compare_no_bases = run_cli("compare --model '" + oracle_dir().string() + "' -p 'a cup' --kv-rank 0,8");
  EXPECT_EQ(compare_no_bases.exit_code, 2);
  EXPECT_NE(compare_no_bases.out.find("compare: --kv-rank: "), std::string::npos) << compare_no_bases.out;
  EXPECT_NE(compare_no_bases.out.find("calibrate-kv"), std::string::npos) << compare_no_bases.out;
  // Said before the model loads: options that contradict each other need no model.
  auto no_cache = run_cli(generate + "--kv-cache fp8 --no-kv-cache");
  EXPECT_EQ(no_cache.exit_code, 2);
  EXPECT_NE(no_cache.out.find("generate: --no-kv-cache: "), std::string::npos) << no_cache.out;
  EXPECT_NE(no_cache.out.find("need the cache"), std::string::npos) << no_cache.out;
  auto negative = run_cli(generate + "--kv-budget -1");
  EXPECT_NE(negative.exit_code, 0);
  EXPECT_NE(negative.out.find("--kv-budget: must be a whole number from 0"), std::string::npos) << negative.out;
  // KV ranks and lists of options are compared on the CPU backend, with the
  // cache; one weight format with an f32, bf16, fp8 or int8 cache, and a
  // budget, may run on CUDA.
  const std::string bench = "bench --shape small --steps 2 --weights q8 ";
  auto rank_on_cuda = run_cli(bench + "--kv-cache bf16 --kv-rank 4 --backend cuda");
  EXPECT_EQ(rank_on_cuda.exit_code, 2);
  EXPECT_NE(rank_on_cuda.out.find("compared on the CPU backend"), std::string::npos) << rank_on_cuda.out;
  // Without a GPU these stop at the backend, not at the options.
  for (const char* kv : {"--kv-cache int8", "--kv-cache bf16", "--kv-cache fp8 --kv-budget 4"}) {
    auto on_cuda = run_cli(bench + kv + " --backend cuda");
    EXPECT_EQ(on_cuda.out.find("compared on the CPU backend"), std::string::npos) << kv << ": " << on_cuda.out;
  }
  auto list_on_cuda = run_cli("bench --shape small --steps 2 --weights stored,q8 --backend cuda");
  EXPECT_EQ(list_on_cuda.exit_code, 2);
  EXPECT_NE(list_on_cuda.out.find("compared on the CPU backend"), std::string::npos) << list_on_cuda.out;
  auto without_cache = run_cli(bench + "--modes no-cache");
  EXPECT_EQ(without_cache.exit_code, 2);
  EXPECT_NE(without_cache.out.find("with the KV cache"), std::string::npos) << without_cache.out;
}

// An option the engine refuses is named by its flag (the engine's message names
// none), and the run stops before a model is loaded when the refusal needs
// no model; a usage error exits 2.
TEST(CliEngineOptions, TheEnginesRefusalNamesTheFlag) {
  CUBEFORGE_REQUIRE_ORACLE();
  testing::ScratchFolder scratch("refusals");
  const std::string base = "generate --model '" + oracle_dir().string() + "' --prompt chair --quiet --out '" +
                           (scratch / "never.ply").string() + "' ";
  struct Case {
    std::string flags, flag;
  };
  const Case cases[] = {
      {"--kv-cache int8 --kv-budget 8", "--kv-budget"},
      {"--attention reference --kv-cache fp8", "--attention"},
      {"--decoding jacobi --sample", "--sample"},
      {"--decoding jacobi --top-p 0.9", "--sample"},  // a sampling knob asks for sampling
      {"--decoding jacobi --trace '" + (scratch / "t.safetensors").string() + "'", "--trace"},
      {"--dense --latent-top-k 4", "--latent-top-k"},
      {"--decoding diffusion", "--decoding"},  // the fixture is autoregressive
  };
  for (const Case& c : cases) {
    auto r = run_cli(base + c.flags);
    EXPECT_EQ(r.exit_code, 2) << c.flags << "\n" << r.out;
    EXPECT_NE(r.out.find("generate: " + c.flag + ": "), std::string::npos) << c.flags << "\n" << r.out;
  }
  EXPECT_FALSE(std::filesystem::exists(scratch / "never.ply"));
}

// `generate --help` shows what a creator sets; --help-all adds the research group.
TEST(CliEngineOptions, ResearchOptionsHaveTheirOwnHelp) {
  auto count_options = [](const std::string& help) {
    int options = 0;
    size_t at = 0;
    while ((at = help.find("\n  -", at)) != std::string::npos) ++options, ++at;
    return options;
  };
  auto help = run_cli("generate --help");
  auto all = run_cli("generate --help-all");
  ASSERT_EQ(help.exit_code, 0) << help.out;
  ASSERT_EQ(all.exit_code, 0) << all.out;
  EXPECT_EQ(help.out.find("--kv-budget"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("--help-all"), std::string::npos) << "the help says where the rest is";
  EXPECT_NE(all.out.find("Research options"), std::string::npos) << all.out;
  for (const char* flag : {"--kv-budget", "--kv-rank", "--kv-cache", "--guesses", "--threshold", "--latent-top-k",
                           "--attention", "--trace"})
    EXPECT_NE(all.out.find(flag), std::string::npos) << flag;
  EXPECT_LT(count_options(help.out), count_options(all.out));
  EXPECT_LE(count_options(help.out), 24) << help.out;
}

}  // namespace
}  // namespace cubeforge
