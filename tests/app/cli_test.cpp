// cubeforge-cli as a user runs it: generate prints the reference's tokens as
// JSON and writes a mesh; bad paths and folders fail clearly and leave nothing.
#include <gtest/gtest.h>

#include <array>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include "inference/core/file_io.h"
#include "inference/geometry/mesh_cleanup.h"
#include "inference/geometry/mesh_io.h"
#include "inference/geometry/mesh_metrics.h"
#include "inference/model/config.h"
#include "inference/tensor/safetensors.h"
#include "inference/tensor/trace_file.h"
#include "tests/app/run_cli.h"
#include "tests/support/oracle.h"
#include "tests/support/run_command.h"

namespace cubeforge {
namespace {

using testing::oracle_dir;
using testing::run_cli;

std::filesystem::path scratch(const std::string& name) {
  auto dir = std::filesystem::temp_directory_path() / ("cubeforge-cli-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir / name;
}

TEST(Cli, GenerateJsonGivesReferenceTokensAndWritesTheMesh) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto meta = nlohmann::json::parse(*read_file_text(oracle_dir() / "meta.json"));
  const auto out = scratch("dragon.glb");
  auto r = run_cli("generate --model '" + oracle_dir().string() + "' --prompt '" + meta.value("prompt", "") +
               "' --resolution 5 --out '" + out.string() + "' --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto report = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
  auto tokens = expected->read_i64("cfg.causal.tokens");
  EXPECT_EQ(report["tokens"].get<std::vector<int64_t>>(), *tokens);
  EXPECT_TRUE(std::filesystem::exists(out));
  EXPECT_GT(report["mesh"]["faces"].get<int64_t>(), 0);
  // The watertightness report describes the file as written (read back by Assimp).
  auto written = import_mesh(out);
  ASSERT_TRUE(written.ok()) << written.error().to_string();
  const MeshTopology topology = analyze_topology(*written);
  EXPECT_EQ(report["mesh"]["closed"].get<bool>(), topology.closed_and_oriented());
  EXPECT_EQ(report["mesh"]["boundary_edges"].get<int64_t>(), topology.boundary_edges);
  EXPECT_EQ(report["mesh"]["components"].get<int64_t>(), topology.components);
  EXPECT_EQ(report["mesh"]["pieces"].get<size_t>(), find_pieces(*written).solid_count());
  EXPECT_GE(report["mesh"]["pieces_as_extracted"].get<int64_t>(), report["mesh"]["pieces"].get<int64_t>())
      << "cleanup removes pieces, never adds them";
  for (const char* key : {"fins_removed", "vertices_split", "slivers_removed", "retries_to_stay_closed_and_whole",
                          "left_unsimplified_to_stay_closed_and_whole"})
    EXPECT_TRUE(report["mesh"]["simplification"].contains(key)) << key;
  for (const char* key : {"text_ms", "prefill_ms", "decode_ms", "occupancy_ms", "meshing_ms", "total_ms"})
    EXPECT_TRUE(report["timings"].contains(key)) << key;
  std::filesystem::remove_all(out.parent_path());
}

// Every decoding reports its model evaluations; exact parallel decoding gives
// the reference's tokens and says so against a sequential decode of its own;
// block diffusion is refused on an autoregressive model.
TEST(Cli, DecodingModesReportTheirEvaluations) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto meta = nlohmann::json::parse(*read_file_text(oracle_dir() / "meta.json"));
  auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
  const auto tokens = *expected->read_i64("cfg.causal.tokens");
  const auto out = scratch("decoded.ply");
  const std::string base = "generate --model '" + oracle_dir().string() + "' --prompt '" + meta.value("prompt", "") +
                           "' --resolution 4 --out '" + out.string() + "' --json";
  auto sequential = run_cli(base);
  ASSERT_EQ(sequential.exit_code, 0) << sequential.out;
  auto report = nlohmann::json::parse(sequential.out.substr(sequential.out.find('{')));
  EXPECT_EQ(report["decoding"]["mode"], "sequential");
  EXPECT_EQ(report["decoding"]["model_evaluations"].get<int>(), int(tokens.size()));
  EXPECT_EQ(report["decoding"]["tokens_per_evaluation"].get<double>(), 1.0);
  auto jacobi = run_cli(base + " --decoding jacobi --guess-cost 0");
  ASSERT_EQ(jacobi.exit_code, 0) << jacobi.out;
  report = nlohmann::json::parse(jacobi.out.substr(jacobi.out.find('{')));
  EXPECT_EQ(report["tokens"].get<std::vector<int64_t>>(), tokens);
  const auto& decoding = report["decoding"];
  EXPECT_EQ(decoding["mode"], "jacobi");
  EXPECT_TRUE(decoding["tokens_equal_sequential"].get<bool>());
  EXPECT_GT(decoding["speedup_over_sequential"].get<double>(), 0.0);
  EXPECT_GT(decoding["guessed"].get<int>(), 0);
  int accepted = 0;
  for (int n : decoding["tokens_per_step"].get<std::vector<int>>()) accepted += n;
  EXPECT_EQ(accepted, int(tokens.size()));
  EXPECT_EQ(int(decoding["tokens_per_step"].size()), decoding["model_evaluations"].get<int>());
  auto diffusion = run_cli(base + " --decoding diffusion --threshold 0.9");
  EXPECT_NE(diffusion.exit_code, 0);
  EXPECT_NE(diffusion.out.find("autoregressive"), std::string::npos) << diffusion.out;
  auto sampled_jacobi = run_cli(base + " --decoding jacobi --sample");
  EXPECT_NE(sampled_jacobi.exit_code, 0);
  EXPECT_NE(sampled_jacobi.out.find("greedy"), std::string::npos) << sampled_jacobi.out;
  // A trace names sequential decoding's steps; a parallel decoding refuses to write one without them.
  auto traced_jacobi = run_cli(base + " --decoding jacobi --trace '" + scratch("jacobi.safetensors").string() + "'");
  EXPECT_NE(traced_jacobi.exit_code, 0);
  EXPECT_NE(traced_jacobi.out.find("trace sequential decoding"), std::string::npos) << traced_jacobi.out;
  EXPECT_FALSE(std::filesystem::exists(scratch("jacobi.safetensors")));
  std::filesystem::remove_all(out.parent_path());
}

// The fixture's GPT read as a block-diffusion model (tests/support/oracle.h).
std::filesystem::path fixture_as_block_diffusion() {
  const auto folder = scratch("block-diffusion");
  EXPECT_TRUE(testing::make_oracle_block_diffusion_model(folder)) << folder;
  return folder;
}

// The fixture's GPT read as a block-diffusion model whose config.yaml names
// the threshold it decodes at (gpt_model.block_diffusion.threshold).
std::filesystem::path fixture_as_block_diffusion_with_threshold(const std::string& threshold) {
  const auto folder = scratch("block-diffusion-own-threshold");
  EXPECT_TRUE(testing::make_oracle_block_diffusion_model(folder)) << folder;
  auto config = read_file_text(folder / "config.yaml");
  EXPECT_TRUE(config.ok());
  if (!config.ok()) return folder;
  const std::string mask_line = "    mask_token_id: " + std::to_string(testing::oracle_facts().padding_id) + "\n";
  const size_t at = config->find(mask_line);
  EXPECT_NE(at, std::string::npos) << *config;
  if (at == std::string::npos) return folder;
  config->insert(at + mask_line.size(), "    threshold: " + threshold + "\n");
  EXPECT_TRUE(write_file_atomically(folder / "config.yaml", std::string_view(*config)).ok());
  return folder;
}

// A block-diffusion folder's own threshold is what block diffusion runs at
// unless --threshold asks for another, and the report says which ran. A
// threshold every proposal passes fills a whole block per evaluation, so the
// evaluations show the folder's threshold was the one decoded with.
TEST(Cli, BlockDiffusionRunsAtTheModelFoldersThreshold) {
  CUBEFORGE_REQUIRE_ORACLE();
  const int tokens = testing::oracle_facts().shape_tokens;
  ASSERT_GT(tokens, 0) << "the fixture's meta.json gives no token count";
  const int blocks = tokens / testing::oracle_block_size();
  const auto model = fixture_as_block_diffusion_with_threshold("0.000001");
  const std::string base = "compare-decoding --model '" + model.string() + "' --reference '" +
                           oracle_dir().string() +
                           "' --decoding diffusion --diffusion-cache none -p 'a red dragon' --rounds 1 --resolution 4 "
                           "--iou-resolution 4 --json";
  auto own = run_cli(base);
  ASSERT_EQ(own.exit_code, 0) << own.out;
  auto report = testing::lab_results(own, "compare-decoding");
  EXPECT_EQ(report["decoding"]["threshold"].get<double>(), double(0.000001f)) << report["decoding"];
  ASSERT_EQ(report["prompts"].size(), 1u);
  EXPECT_EQ(report["prompts"][0]["model_evaluations"].get<int>(), blocks) << report["prompts"][0];

  auto asked = run_cli(base + " --threshold 0.9");
  ASSERT_EQ(asked.exit_code, 0) << asked.out;
  report = testing::lab_results(asked, "compare-decoding");
  EXPECT_EQ(report["decoding"]["threshold"].get<double>(), double(0.9f)) << report["decoding"];
  std::filesystem::remove_all(model);
}

// compare-decoding: exact parallel decoding agrees with sequential decoding
// token for token and shape for shape; block diffusion with blocks of one
// position is autoregressive decoding and agrees as well; with a threshold
// every proposal passes it fills a block per evaluation; the prefix cache
// decodes what recomputing every position decodes. A block-diffusion model
// needs a reference with its shape tokenizer.
TEST(Cli, CompareDecodingMeasuresADecodingAgainstSequentialDecoding) {
  CUBEFORGE_REQUIRE_ORACLE();
  const int tokens = testing::oracle_facts().shape_tokens;
  ASSERT_GT(tokens, 0) << "the fixture's meta.json gives no token count";
  const int block = testing::oracle_block_size(), blocks = tokens / block;
  const std::string prompts = " -p 'a red dragon' -p 'a blue car' --rounds 1 --resolution 4 --iou-resolution 4 --json";
  auto reports = [](const testing::CommandOutput& r) { return testing::lab_results(r, "compare-decoding"); };
  auto jacobi = run_cli("compare-decoding --model '" + oracle_dir().string() + "' --decoding jacobi --guess-cost 0" + prompts);
  ASSERT_EQ(jacobi.exit_code, 0) << jacobi.out;
  auto report = reports(jacobi);
  EXPECT_EQ(report["decoding"]["mode"], "jacobi");
  ASSERT_EQ(report["prompts"].size(), 2u);
  for (const auto& p : report["prompts"]) {
    EXPECT_EQ(p["tokens_agreeing"].get<int>(), tokens) << p;
    EXPECT_EQ(p["iou"].get<double>(), 1.0) << p;
    EXPECT_EQ(p["reference_model_evaluations"].get<int>(), tokens);
    EXPECT_LE(p["model_evaluations"].get<int>(), tokens);
    EXPECT_EQ(p["watertight"], p["reference_watertight"]);
  }
  EXPECT_EQ(report["mean"]["tokens_agreeing"].get<double>(), 1.0);

  const auto diffusion_model = fixture_as_block_diffusion();
  const std::string diffusion = "compare-decoding --model '" + diffusion_model.string() + "' --reference '" +
                                oracle_dir().string() + "' --decoding diffusion --diffusion-cache none";
  auto one_position_blocks = run_cli(diffusion + " --block-size 1" + prompts);
  ASSERT_EQ(one_position_blocks.exit_code, 0) << one_position_blocks.out;
  report = reports(one_position_blocks);
  for (const auto& p : report["prompts"]) {
    EXPECT_EQ(p["tokens_agreeing"].get<int>(), tokens) << p;
    EXPECT_EQ(p["iou"].get<double>(), 1.0) << p;
    EXPECT_EQ(p["model_evaluations"].get<int>(), tokens);
  }
  auto whole_blocks = run_cli(diffusion + " --threshold 0.000001" + prompts);
  ASSERT_EQ(whole_blocks.exit_code, 0) << whole_blocks.out;
  report = reports(whole_blocks);
  EXPECT_EQ(report["decoding"]["threshold"].get<double>(), double(0.000001f));
  for (const auto& p : report["prompts"]) {
    EXPECT_EQ(p["model_evaluations"].get<int>(), blocks) << p;
    EXPECT_DOUBLE_EQ(p["tokens_per_evaluation"].get<double>(), double(block));
    EXPECT_GE(p["iou"].get<double>(), 0.0);
    EXPECT_LE(p["iou"].get<double>(), 1.0);
  }
  EXPECT_DOUBLE_EQ(report["mean"]["fewer_model_evaluations"].get<double>(), double(block));
  // The prefix cache keeps what recomputing every position computes: the same tokens and shapes.
  auto prefix = run_cli("compare-decoding --model '" + diffusion_model.string() +
                    "' --decoding diffusion --diffusion-cache prefix --threshold 0.3 --against-no-cache" + prompts);
  ASSERT_EQ(prefix.exit_code, 0) << prefix.out;
  report = reports(prefix);
  EXPECT_EQ(report["reference_decoding"], "the same, no cache");
  for (const auto& p : report["prompts"]) {
    EXPECT_EQ(p["tokens_agreeing"].get<int>(), tokens) << p;
    EXPECT_EQ(p["iou"].get<double>(), 1.0) << p;
    EXPECT_EQ(p["model_evaluations"], p["reference_model_evaluations"]);
  }
  auto autoregressive = run_cli("compare-decoding --model '" + oracle_dir().string() + "' --against-no-cache" + prompts);
  EXPECT_EQ(autoregressive.exit_code, 2);
  // Without --reference a block-diffusion model is compared with the built-in
  // model: refused when its shapes have another number of tokens.
  auto builtin = parse_model_config_yaml(std::filesystem::path(CUBEFORGE_SOURCE_DIR) / "assets/model/config.yaml");
  ASSERT_TRUE(builtin.ok()) << builtin.error().to_string();
  if (builtin->shape.latents != tokens) {
    auto other_tokenizer =
        run_cli("compare-decoding --model '" + diffusion_model.string() + "' --decoding diffusion" + prompts);
    EXPECT_EQ(other_tokenizer.exit_code, 2);
    EXPECT_NE(other_tokenizer.out.find("tokens per shape"), std::string::npos) << other_tokenizer.out;
  }
  std::filesystem::remove_all(diffusion_model.parent_path());
}

TEST(Cli, UnwritableOutputIsAClearErrorAndLeavesNothing) {
  CUBEFORGE_REQUIRE_ORACLE();
  auto r = run_cli("generate --model '" + oracle_dir().string() +
               "' --prompt 'a cup' --resolution 4 --out /nonexistent-dir/out.glb");
  // Checked before any work is done.
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("/nonexistent-dir/out.glb"), std::string::npos) << r.out;
  EXPECT_FALSE(std::filesystem::exists("/nonexistent-dir"));
}

TEST(Cli, MissingModelFolderSaysHowToAssembleOne) {
  auto r = run_cli("generate --model /nonexistent/model --prompt 'a cup' --out x.glb");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.out.find("Roblox/cube3d-v0.5"), std::string::npos) << r.out;
}

TEST(Cli, UnknownExtensionIsRejectedBeforeWork) {
  auto r = run_cli("generate --model /nonexistent/model --prompt 'a cup' --out shape.xyz");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.out.find("shape.xyz"), std::string::npos) << r.out;
}

// The product's commands on cubeforge-cli, the measuring ones on cubeforge-lab,
// and neither program runs the other's.
TEST(Cli, HelpListsTheCommandsOfEachProgram) {
  auto cli = testing::run_command(CUBEFORGE_CLI_PATH, "--help");
  auto lab = testing::run_command(CUBEFORGE_LAB_PATH, "--help");
  EXPECT_EQ(cli.exit_code, 0) << cli.out;
  EXPECT_EQ(lab.exit_code, 0) << lab.out;
  for (const char* command : {"generate", "tokenize", "quantize"}) {
    EXPECT_NE(cli.out.find(command), std::string::npos) << command;
    EXPECT_NE(testing::run_command(CUBEFORGE_LAB_PATH, command).exit_code, 0) << command;
  }
  for (std::string_view command : testing::kLabCommands) {
    EXPECT_NE(lab.out.find("  " + std::string(command)), std::string::npos) << command;
    EXPECT_EQ(cli.out.find("  " + std::string(command) + " "), std::string::npos) << command;
    EXPECT_NE(testing::run_command(CUBEFORGE_CLI_PATH, std::string(command)).exit_code, 0) << command;
  }
  const std::string viewport = "  " + std::string(testing::kLabViewportCommand);
#ifdef CUBEFORGE_LAB_VIEWPORT
  EXPECT_NE(lab.out.find(viewport), std::string::npos) << lab.out;
#else
  EXPECT_EQ(lab.out.find(viewport), std::string::npos) << lab.out;
#endif
}

// Every lab command takes the shared options with one meaning: --threads
// refuses the same values in the same words everywhere, and --json writes
// the one envelope (checked by lab_results wherever a report is read).
TEST(Cli, LabCommandsShareTheirOptions) {
  for (std::string_view command : testing::kLabCommands) {
    auto help = testing::run_command(CUBEFORGE_LAB_PATH, std::string(command) + " --help");
    ASSERT_EQ(help.exit_code, 0) << command << ": " << help.out;
    EXPECT_NE(help.out.find("--json"), std::string::npos) << command;
    if (help.out.find("--threads") == std::string::npos) continue;
    EXPECT_NE(help.out.find("CPU threads (0: every core)"), std::string::npos) << command << ": " << help.out;
    auto negative = testing::run_command(CUBEFORGE_LAB_PATH, std::string(command) + " --threads -1");
    EXPECT_NE(negative.exit_code, 0) << command;
    EXPECT_NE(negative.out.find("--threads: must be a whole number from 0 to 1024 (0 uses every core), not '-1'"),
              std::string::npos)
        << command << ": " << negative.out;
  }
  for (const char* command : {"bench", "bench-decoding", "bench-occupancy", "bench-shape-tokenizer"}) {
    auto both = testing::run_command(CUBEFORGE_LAB_PATH, std::string(command) + " --model x --shape small");
    EXPECT_NE(both.exit_code, 0) << command;
    EXPECT_NE(both.out.find("excludes"), std::string::npos) << command << ": " << both.out;
  }
}

// The benchmarks of one part each, on the built-in model (whose CLIP and
// shape tokenizer sizes its configuration files give) and on an analytic
// field: their reports hold together, whatever the times.
TEST(Cli, PartBenchmarksReportWhatTheyMeasured) {
  auto builtin = parse_model_config_yaml(std::filesystem::path(CUBEFORGE_SOURCE_DIR) / "assets/model/config.yaml");
  ASSERT_TRUE(builtin.ok()) << builtin.error().to_string();
  auto clip = nlohmann::json::parse(
      *read_file_text(std::filesystem::path(CUBEFORGE_SOURCE_DIR) / "assets/model/clip/config.json"));

  auto text = run_cli("bench-text-encoder --repeats 1 --json");
  ASSERT_EQ(text.exit_code, 0) << text.out;
  auto report = testing::lab_results(text, "bench-text-encoder");
  EXPECT_EQ(report["width"], clip["text_config"]["hidden_size"]);
  EXPECT_EQ(report["layers"], clip["text_config"]["num_hidden_layers"]);
  EXPECT_GT(report["encode_with_empty"]["wall_ms"].get<double>(), 0.0);
  EXPECT_TRUE(report.contains("tokenizer")) << report.dump();

  auto shape = run_cli("bench-shape-tokenizer --points 500 --chunk 128 --threads 1 --json");
  ASSERT_EQ(shape.exit_code, 0) << shape.out;
  report = testing::lab_results(shape, "bench-shape-tokenizer");
  EXPECT_EQ(report["latents"].get<int64_t>(), builtin->shape.latents);
  EXPECT_EQ(report["width"].get<int64_t>(), builtin->shape.width);
  EXPECT_EQ(report["encoded_tokens"].get<int64_t>(), builtin->shape.latents);
  EXPECT_EQ(report["points"].get<int64_t>(), 500);
  EXPECT_GT(report["points_per_second"].get<double>(), 0.0);
  auto layers_without_shape = run_cli("bench-shape-tokenizer --decoder-layers 2");
  EXPECT_NE(layers_without_shape.exit_code, 0);
  EXPECT_NE(layers_without_shape.out.find("--shape"), std::string::npos) << layers_without_shape.out;

  auto geometry = run_cli("bench-geometry --resolutions 4,5 --coarse 3 --ripples 0 --json");
  ASSERT_EQ(geometry.exit_code, 0) << geometry.out;
  report = testing::lab_results(geometry, "bench-geometry");
  ASSERT_EQ(report["runs"].size(), 2u) << report.dump();
  for (const auto& run : report["runs"]) {
    const int64_t side = (int64_t(1) << run["resolution"].get<int>()) + 1;
    EXPECT_EQ(run["grid_points"].get<int64_t>(), side * side * side) << run.dump();
    int64_t per_level = 0;
    for (const auto& level : run["levels"]) per_level += level["evaluated"].get<int64_t>();
    EXPECT_EQ(per_level, run["evaluated_points"].get<int64_t>()) << run.dump();
    EXPECT_GT(run["faces"].get<int64_t>(), 0) << run.dump();
    EXPECT_TRUE(run.contains("sign_disagreements")) << run.dump();
  }
  auto table = run_cli("bench-geometry --resolutions 4 --coarse 3 --no-dense");
  ASSERT_EQ(table.exit_code, 0) << table.out;
  EXPECT_NE(table.out.find("coarse level 3"), std::string::npos) << table.out;
}

// The benchmark's figures are not checked (timing belongs to benchmarks, not
// tests); its report is, and the decoder paths must agree on the logits.
TEST(Cli, OccupancyBenchReportsEveryPathAndTheyAgree) {
  auto r = run_cli("bench-occupancy --points 3000 --repeats 1 --json");  // the built-in model
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto report = testing::lab_results(r, "bench-occupancy");
  ASSERT_TRUE(report["paths"].contains("layered")) << r.out;
  EXPECT_GT(report["paths"]["layered"]["points_per_second"].get<double>(), 0.0);
  EXPECT_GT(report["flops_per_point"].get<double>(), 0.0);
  if (nlohmann::json::parse(r.out.substr(r.out.find('{')))["machine"]["kernel_isa"] == "avx512") {
    ASSERT_TRUE(report["paths"].contains("fused")) << r.out;
    ASSERT_TRUE(report["paths"].contains("grid")) << r.out;
    // Logits are O(10); the paths differ only in float32 rounding order.
    EXPECT_LT(report["largest_logit_difference"].get<double>(), 1e-3);
  }
  auto bad = run_cli("bench-occupancy --model /nonexistent-model-dir --points 10");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("nonexistent-model-dir"), std::string::npos) << bad.out;
}

// Coarse-to-fine must classify every grid point as the dense grid does on a
// shape the built-in model generates, and evaluate fewer points doing it.
TEST(Cli, MeshingBenchFindsTheDenseSurface) {
  auto r = run_cli("bench-meshing --prompt 'a tall chair' --prompt 'a mug' --resolution 6 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto report = testing::lab_results(r, "bench-meshing");
  ASSERT_EQ(report["prompts"].size(), 2u) << r.out;
  for (const auto& row : report["prompts"]) {
    EXPECT_EQ(row["sign_disagreements"].get<int64_t>(), 0) << row.dump();
    EXPECT_LT(row["evaluated_points"].get<int64_t>(), row["dense_points"].get<int64_t>()) << row.dump();
    int64_t per_level = 0;
    for (const auto& level : row["levels"]) per_level += level["evaluated_points"].get<int64_t>();
    EXPECT_EQ(per_level, row["evaluated_points"].get<int64_t>()) << row.dump();
  }
  auto no_prompt = run_cli("bench-meshing");
  EXPECT_NE(no_prompt.exit_code, 0);
  EXPECT_NE(no_prompt.out.find("--prompt"), std::string::npos) << no_prompt.out;
}

// With a latent top-k of every latent (the built-in model's 64), the
// selection path gives full attention's grid: the same mesh from generate,
// no point of a benchmark classified differently, and on the fused decoder
// the same logits. Values outside what a model allows say what is allowed.
TEST(Cli, LatentTopKOfEveryLatentMatchesFullAttention) {
  const auto full_out = scratch("full.ply"), selected_out = scratch("selected.ply");
  auto full =
      run_cli("generate --prompt 'a tall chair' --resolution 6 --target-faces -1 --out '" + full_out.string() + "' --json");
  auto selected = run_cli("generate --prompt 'a tall chair' --resolution 6 --target-faces -1 --latent-top-k 64 --out '" +
                      selected_out.string() + "' --json");
  ASSERT_EQ(full.exit_code, 0) << full.out;
  ASSERT_EQ(selected.exit_code, 0) << selected.out;
  auto full_report = nlohmann::json::parse(full.out.substr(full.out.find('{')));
  auto selected_report = nlohmann::json::parse(selected.out.substr(selected.out.find('{')));
  EXPECT_EQ(selected_report["mesh"]["latent_top_k"].get<int64_t>(), 64);
  EXPECT_EQ(full_report["mesh"]["latent_top_k"].get<int64_t>(), 0);
  for (const char* key : {"faces", "vertices", "occupancy_points"})
    EXPECT_EQ(selected_report["mesh"][key], full_report["mesh"][key]) << key;
  std::filesystem::remove_all(full_out.parent_path());

  auto occupancy = run_cli("bench-occupancy --points 3000 --repeats 1 --latent-top-k 64 --json");
  ASSERT_EQ(occupancy.exit_code, 0) << occupancy.out;
  auto report = testing::lab_results(occupancy, "bench-occupancy");
  ASSERT_TRUE(report["latent_top_k"].contains("layered")) << occupancy.out;
  for (const auto& [path, figures] : report["latent_top_k"].items()) {
    EXPECT_EQ(figures["sign_disagreements"].get<int64_t>(), 0) << path;
    EXPECT_GT(figures["points_per_second"].get<double>(), 0.0) << path;
    if (path == "grid") {
      EXPECT_EQ(figures["largest_logit_difference"].get<double>(), 0.0);
    }
  }
  EXPECT_GT(report["paths"]["layered"]["fraction_of_peak"].get<double>(), 0.0);

  auto meshing = run_cli("bench-meshing --prompt 'a mug' --resolution 6 --latent-top-k 64 --no-dense --json");
  ASSERT_EQ(meshing.exit_code, 0) << meshing.out;
  report = testing::lab_results(meshing, "bench-meshing");
  const auto& row = report["prompts"][0];
  for (const char* key : {"occupancy_ms", "meshing_ms", "evaluated_points"}) EXPECT_TRUE(row.contains(key)) << key;
  ASSERT_EQ(row["latent_selection"].size(), 1u) << row.dump();
  const auto& topk = row["latent_selection"][0];
  EXPECT_EQ(topk["top_k"].get<int64_t>(), 64);
  EXPECT_EQ(topk["sign_disagreements"].get<int64_t>(), 0);
  EXPECT_EQ(topk["evaluated_points"], row["evaluated_points"]);
  for (const char* key : {"occupancy_ms", "meshing_ms"}) EXPECT_GT(topk[key].get<double>(), 0.0) << key;

  auto too_many = run_cli("generate --prompt 'a cup' --latent-top-k 65 --out x.glb");
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.out.find("use 0 (full attention) or 1 to 64"), std::string::npos) << too_many.out;
  auto dense = run_cli("generate --prompt 'a cup' --latent-top-k 8 --dense --out x.glb");
  EXPECT_EQ(dense.exit_code, 2);
  EXPECT_NE(dense.out.find("generate: --latent-top-k: "), std::string::npos) << dense.out;
  EXPECT_NE(dense.out.find("dense grid"), std::string::npos) << dense.out;
  for (const char* command : {"generate --prompt 'a cup' --out x.glb", "bench-occupancy", "bench-meshing --prompt x"}) {
    auto negative = run_cli(std::string(command) + " --latent-top-k -3");
    EXPECT_NE(negative.exit_code, 0) << command;
    EXPECT_NE(negative.out.find("must be a whole number from 0 to 65536"), std::string::npos) << negative.out;
  }
  auto bench_too_many = run_cli("bench-occupancy --points 10 --latent-top-k 100");
  EXPECT_EQ(bench_too_many.exit_code, 2);
  EXPECT_NE(bench_too_many.out.find("bench-occupancy: --latent-top-k: "), std::string::npos) << bench_too_many.out;
  EXPECT_NE(bench_too_many.out.find("use 0 (full attention) or 1 to 64"), std::string::npos) << bench_too_many.out;
  EXPECT_FALSE(std::filesystem::exists("x.glb"));
}

// Random weights of a preset's sizes stand in for a checkpoint in both
// benchmarks: random tokens make the object, and a top-k run reports against
// full attention.
TEST(Cli, OccupancyBenchmarksRunOnRandomWeights) {
  auto occupancy = run_cli("bench-occupancy --shape small --points 512 --repeats 1 --latent-top-k 32 --json");
  ASSERT_EQ(occupancy.exit_code, 0) << occupancy.out;
  auto report = testing::lab_results(occupancy, "bench-occupancy");
  EXPECT_EQ(report["width"].get<int64_t>(), 256);
  EXPECT_EQ(report["latents"].get<int64_t>(), 256);
  EXPECT_EQ(report["latent_top_k"]["layered"]["top_k"].get<int64_t>(), 32);

  auto meshing = run_cli("bench-meshing --shape small --resolution 6 --no-dense --latent-top-k 32 --json");
  ASSERT_EQ(meshing.exit_code, 0) << meshing.out;
  report = testing::lab_results(meshing, "bench-meshing");
  const auto& row = report["prompts"][0];
  EXPECT_GT(row["evaluated_points"].get<int64_t>(), 0);
  ASSERT_EQ(row["latent_selection"].size(), 1u);
  EXPECT_GE(row["latent_selection"][0]["sign_disagreements"].get<int64_t>(), 0);
  EXPECT_GT(row["latent_selection"][0]["blocks"].get<int64_t>(), 0);

  auto both = run_cli("bench-meshing --shape small --prompt 'a mug'");
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.out.find("leave out --model, --prompt and --prompts"), std::string::npos) << both.out;
}

// A trace of a generation names the reference's tensors: a reference file
// built from the fixtures under the trace's names agrees with it through
// trace-diff, a trace agrees with itself exactly, and a perturbed copy fails,
// naming the perturbed tensor.
class CliTrace : public ::testing::Test {
 protected:
  void SetUp() override {
    CUBEFORGE_REQUIRE_ORACLE();
    auto meta = nlohmann::json::parse(*read_file_text(oracle_dir() / "meta.json"));
    trace_ = scratch("trace.safetensors");
    auto r = run_cli("generate --model '" + oracle_dir().string() + "' --prompt '" + meta.value("prompt", "") +
                 "' --resolution 4 --out '" + scratch("traced.glb").string() + "' --trace '" + trace_.string() +
                 "' --trace-steps 2 --json");
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  void TearDown() override { std::filesystem::remove_all(trace_.parent_path()); }

  std::filesystem::path trace_;
};

TEST_F(CliTrace, GenerateWritesTheNamedStepsAndTheyMatchTheReference) {
  auto trace = SafetensorsFile::open(trace_);
  ASSERT_TRUE(trace.ok()) << trace.error().to_string();
  for (const char* name : {"prompt.clip.0.attn", "prompt.condition", "empty_prompt.condition", "prefill.dual.0.c.q",
                           "prefill.single.0.out", "prefill.logits", "decode.1.logits", "decode.2.dual.0.x.k",
                           "shape.decoder.latents", "shape.occupancy.logits"})
    EXPECT_TRUE(trace->contains(name)) << name;
  EXPECT_FALSE(trace->contains("decode.3.logits"));

  // The reference's tensors under the trace's names: the condition rows, each
  // step's raw and guided logits, the shape decoder's output.
  auto expected = SafetensorsFile::open(oracle_dir() / "expected.safetensors");
  ASSERT_TRUE(expected.ok());
  auto raw = expected->read_f32("cfg.causal.raw_logits");  // [2, T, V + 3]
  auto guided = expected->read_f32("cfg.causal.logits");   // [1, T, V]
  auto raw_view = expected->get("cfg.causal.raw_logits");
  auto guided_view = expected->get("cfg.causal.logits");
  ASSERT_TRUE(raw.ok() && guided.ok() && raw_view.ok() && guided_view.ok());
  const int64_t steps = raw_view->shape()[1], vocab = raw_view->shape()[2], codes = guided_view->shape()[2];
  std::vector<std::vector<float>> kept;  // the data the reference file's tensors point at
  std::vector<TensorToWrite> reference;
  auto add = [&](const std::string& name, std::vector<float> values, std::vector<int64_t> shape) {
    kept.push_back(std::move(values));
    reference.push_back({name, DType::kF32, std::move(shape), std::as_bytes(std::span<const float>(kept.back()))});
  };
  for (const auto& [name, source] : {std::pair<std::string, std::string>{"prefill.condition", "cfg.cond"},
                                     {"shape.decoder.z_q", "decode.z_q"},
                                     {"shape.decoder.latents", "decode.latents"}}) {
    auto view = expected->get(source);
    ASSERT_TRUE(view.ok());
    add(name, *expected->read_f32(source), view->shape());
  }
  for (int64_t step = 0; step <= 2; ++step) {
    const std::string scope = step == 0 ? "prefill" : "decode." + std::to_string(step);
    std::vector<float> logits;
    for (int64_t b = 0; b < 2; ++b) {
      const float* row = raw->data() + (b * steps + step) * vocab;
      logits.insert(logits.end(), row, row + vocab);
    }
    add(scope + ".logits", logits, {2, vocab});
    add(scope + ".guided_logits", std::vector<float>(guided->data() + step * codes, guided->data() + (step + 1) * codes),
        {codes});
  }
  const auto reference_file = scratch("reference.safetensors");
  ASSERT_TRUE(write_safetensors(reference_file, reference).ok());

  auto r = run_cli("trace-diff '" + trace_.string() + "' '" + reference_file.string() + "' --tolerance 1e-4 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto report = testing::lab_results(r, "trace-diff");
  EXPECT_EQ(report["compared"].get<size_t>(), reference.size()) << r.out;
  EXPECT_TRUE(report["first_over_tolerance"].is_null()) << r.out;
  EXPECT_TRUE(report["only_in_b"].empty()) << r.out;
  for (const auto& t : report["tensors"]) EXPECT_LT(t["relative_error"].get<double>(), 1e-4) << t.dump();
}

TEST_F(CliTrace, DiffOfATraceWithItselfIsZeroAndAPerturbedTensorIsNamed) {
  auto same = run_cli("trace-diff '" + trace_.string() + "' '" + trace_.string() + "' --json");
  ASSERT_EQ(same.exit_code, 0) << same.out;
  auto report = testing::lab_results(same, "trace-diff");
  EXPECT_GT(report["compared"].get<size_t>(), 100u);
  for (const auto& t : report["tensors"]) {
    EXPECT_EQ(t["relative_error"].get<double>(), 0.0) << t.dump();
    EXPECT_EQ(t["max_abs_difference"].get<double>(), 0.0) << t.dump();
  }
  auto table = run_cli("trace-diff '" + trace_.string() + "' '" + trace_.string() + "'");
  EXPECT_EQ(table.exit_code, 0);
  EXPECT_NE(table.out.find("within the tolerance"), std::string::npos) << table.out;

  // A copy with one value of one mid-trace tensor changed.
  auto trace = SafetensorsFile::open(trace_);
  ASSERT_TRUE(trace.ok());
  const std::string perturbed_name = "prefill.dual.1.x.attn";
  std::vector<std::vector<std::byte>> kept;
  std::vector<TensorToWrite> copy;
  for (const TensorEntry* e : entries_in_file_order(*trace)) {
    auto view = trace->get(e->name);
    kept.emplace_back(view->data, view->data + view->byte_size());
    if (e->name == perturbed_name) {
      float value;
      std::memcpy(&value, kept.back().data(), sizeof value);
      value += 1.0f;
      std::memcpy(kept.back().data(), &value, sizeof value);
    }
    copy.push_back({e->name, e->dtype, e->shape, kept.back()});
  }
  const auto perturbed = scratch("perturbed.safetensors");
  ASSERT_TRUE(write_safetensors(perturbed, copy).ok());
  auto differ = run_cli("trace-diff '" + perturbed.string() + "' '" + trace_.string() + "' --json");
  EXPECT_EQ(differ.exit_code, 1) << differ.out;
  auto differ_report = testing::lab_results(differ, "trace-diff");
  EXPECT_EQ(differ_report["first_over_tolerance"], perturbed_name) << differ.out;
  auto differ_table = run_cli("trace-diff '" + perturbed.string() + "' '" + trace_.string() + "'");
  EXPECT_EQ(differ_table.exit_code, 1);
  EXPECT_NE(differ_table.out.find("first over the tolerance 0.0001: " + perturbed_name), std::string::npos)
      << differ_table.out;

  auto missing = run_cli("trace-diff '" + trace_.string() + "' /nonexistent-trace.safetensors");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.out.find("/nonexistent-trace.safetensors"), std::string::npos) << missing.out;
}

TEST(Cli, TokenizeRoundTripsAMesh) {
  CUBEFORGE_REQUIRE_ORACLE();
  // A box with a shelf's proportions, as a user's mesh file.
  const auto mesh = scratch("input.obj");
  {
    std::ofstream obj(mesh);
    for (int corner = 0; corner < 8; ++corner)
      obj << "v " << (corner & 1 ? 0.6 : -0.6) << ' ' << (corner & 2 ? 1.0 : -1.0) << ' ' << (corner & 4 ? 0.3 : -0.3)
          << "\n";
    // Two triangles per face, wound outwards.
    obj << "f 1 3 4\nf 1 4 2\nf 5 6 8\nf 5 8 7\nf 1 2 6\nf 1 6 5\n"
           "f 3 7 8\nf 3 8 4\nf 1 5 7\nf 1 7 3\nf 2 4 8\nf 2 8 6\n";
  }
  const auto rebuilt = scratch("rebuilt.ply");
  auto r = run_cli("tokenize --model '" + oracle_dir().string() + "' --mesh '" + mesh.string() + "' --out '" +
               rebuilt.string() + "' --resolution 5 --iou-resolution 5 --samples 2048 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  auto report = nlohmann::json::parse(r.out.substr(r.out.find('{')));
  auto shape = SafetensorsFile::open(oracle_dir() / "shape_tokenizer.safetensors");
  auto config = infer_shape_config(*shape);
  EXPECT_EQ(report["tokens"].size(), size_t(config->latents));
  const double iou = report["reconstruction_iou"].get<double>();
  EXPECT_GE(iou, 0.0);
  EXPECT_LE(iou, 1.0);
  // A random-weight tokenizer may decode a field with no surface: then the
  // tokens are still the result, and no mesh is written, as the tool says.
  if (report["faces"].get<int>() > 0) {
    EXPECT_TRUE(std::filesystem::exists(rebuilt));
    EXPECT_EQ(report["output"], rebuilt.string());
  } else {
    EXPECT_FALSE(std::filesystem::exists(rebuilt));
    EXPECT_TRUE(report["output"].is_null());
    EXPECT_EQ(iou, 0.0);
    EXPECT_NE(r.out.find("has no surface"), std::string::npos) << r.out;
  }
  std::filesystem::remove_all(mesh.parent_path());
}

}  // namespace
}  // namespace cubeforge
