// cubeforge-cli's outputs against a hostile but realistic situation: an
// output named like an input of the same run, a link another user planted in
// /tmp, a model folder whose links lead out of it, names and values that would
// flood or drive the terminal, SIGTERM and SIGHUP, `ulimit -f`, a sparse
// prompts file of gigabytes, and numbers that fail only once narrowed. Every
// case ends with a clear message and exit code, the inputs unchanged and no
// temporary left behind. Nothing here depends on the machine's speed: stages
// are reached through the test pause hook, and time limits only stop hangs.
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <span>
#include <string>
#include <vector>

#include "inference/core/file_io.h"
#include "tests/support/programs.h"
#include "tests/support/hostile_files.h"
#include "tests/support/hostile_numbers.h"
#include "tests/app/run_cli.h"
#include "tests/support/run_command.h"

// A namespace of its own: the unity build compiles this file with hostile_input_test.cpp.
namespace cubeforge::hostile_output {
namespace {

using testing::ScratchFolder;

const std::string kCli = CUBEFORGE_CLI_PATH;

testing::CommandOutput cli(const std::string& arguments) {
  return testing::run_command("timeout -s KILL 300 " + testing::program_for(arguments), arguments);
}

using testing::quoted;
using testing::quick_generate;

// The bytes of every file under `folder`, by path: what "unchanged" is checked against.
std::map<std::string, std::string> contents(const std::filesystem::path& folder) {
  std::map<std::string, std::string> files;
  std::error_code ec;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder))
    if (entry.is_regular_file(ec)) files[entry.path().string()] = *read_file_text(entry.path());
  return files;
}

// Temporaries of an atomic write (".NAME.XXXXXXXX.tmp") anywhere under `folder`.
std::vector<std::string> temporaries(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::recursive_directory_iterator(folder))
    if (entry.path().filename().string().ends_with(".tmp")) names.push_back(entry.path().string());
  return names;
}

bool has_control_bytes(const std::string& text) {
  for (unsigned char c : text)
    if ((c < 0x20 && c != '\n' && c != '\t') || c == 0x7F) return true;
  return false;
}

// --- outputs that would destroy inputs ------------------------------------------

// --trace at the model's own weights replaced them (the mapped copy kept the run going).
TEST(HostileOutput, NoOutputReplacesAnInputOfTheSameRun) {
  ScratchFolder folder("hostile-out");
  const auto model = folder / "model";
  testing::copy_builtin_model(model);
  std::filesystem::create_hard_link(model / "config.yaml", folder / "config_link.obj");
  std::filesystem::create_symlink(model / "clip" / "vocab.json", folder / "vocab_link.obj");
  std::ofstream(folder / "cube.obj")
      << "v -1 -1 -1\nv -1 -1 1\nv -1 1 -1\nv -1 1 1\nv 1 -1 -1\nv 1 -1 1\nv 1 1 -1\nv 1 1 1\n"
         "f 1 2 4\nf 1 4 3\nf 5 7 8\nf 5 8 6\nf 1 5 6\nf 1 6 2\nf 3 4 8\nf 3 8 7\nf 1 3 7\nf 1 7 5\nf 2 6 8\nf 2 8 4\n";
  const auto before = contents(folder.path());
  const std::string model_option = " --model " + quoted(model);
  for (const std::string& arguments : {
           quick_generate(folder / "x.glb", "--trace " + quoted(model / "shape_gpt.safetensors") + model_option),
           quick_generate(folder / "x.glb", "--trace " + quoted(model / "clip" / "model.safetensors") + model_option),
           quick_generate(folder / "config_link.obj", model_option),  // a hard link to config.yaml
           quick_generate(folder / "vocab_link.obj", model_option),   // a symbolic link to clip/vocab.json
           "tokenize --resolution 4 --mesh " + quoted(folder / "cube.obj") + " --out " + quoted(folder / "cube.obj"),
           "calibrate-kv --prompt 'a tall chair' --out " + quoted(model / "shape_tokenizer.safetensors") + model_option,
       }) {
    auto r = cli(arguments);
    EXPECT_EQ(r.exit_code, 1) << arguments << ": " << r.out;
    EXPECT_NE(r.out.find("an input of this run"), std::string::npos) << arguments << ": " << r.out;
    EXPECT_EQ(contents(folder.path()), before) << arguments;
    EXPECT_TRUE(temporaries(folder.path()).empty()) << arguments;
  }
  // A new file in the model folder is no input: the trace is written.
  auto beside = cli(quick_generate(folder / "x.glb", "--trace " + quoted(model / "trace.safetensors") + model_option));
  EXPECT_EQ(beside.exit_code, 0) << beside.out;
  EXPECT_TRUE(std::filesystem::exists(model / "trace.safetensors"));
}

// With fs.protected_symlinks off (as in many containers), --out through a link
// another user planted in a world-writable sticky folder wrote where it pointed.
TEST(HostileOutput, ALinkAnotherUserPlantedInASharedFolderIsNotFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "planting a link as another user needs root";
  ScratchFolder folder("hostile-out");
  const auto shared = folder / "shared";
  std::filesystem::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  ASSERT_TRUE(write_file_atomically(folder / "victim.obj", std::string_view("precious")).ok());
  std::filesystem::create_symlink("../victim.obj", shared / "out.obj");
  ASSERT_EQ(::lchown((shared / "out.obj").c_str(), 65534, 65534), 0);
  auto r = cli(quick_generate(shared / "out.obj"));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("symbolic link that another user (uid 65534) put in"), std::string::npos) << r.out;
  EXPECT_EQ(*read_file_text(folder / "victim.obj"), "precious");
  EXPECT_TRUE(temporaries(folder.path()).empty());
  // The same link of this user's own is written through, as before.
  ASSERT_EQ(::lchown((shared / "out.obj").c_str(), 0, 0), 0);
  auto own = cli(quick_generate(shared / "out.obj"));
  EXPECT_EQ(own.exit_code, 0) << own.out;
  EXPECT_NE(*read_file_text(folder / "victim.obj"), "precious");
}

// quantize copied a link's target from outside the model folder into its
// output (a key, say), and a loop of links reached main as an exception.
TEST(HostileOutput, QuantizeCopiesOnlyWhatIsInsideTheModelFolder) {
  ScratchFolder folder("hostile-out");
  const auto model = folder / "model";
  testing::copy_builtin_model(model);
  ASSERT_TRUE(write_file_atomically(folder / "id_ed25519", std::string_view("PRIVATE KEY")).ok());
  struct Case {
    std::string link, target, says;
  };
  for (const Case& c : std::vector<Case>{
           {"notes.txt", (folder / "id_ed25519").string(), "outside the model folder"},
           {"clip/extra", "../../", "outside the model folder"},
           {"loop", "loop", "a loop of symbolic links"},
           {"again", ".", "leads back to a folder already copied"},
       }) {
    std::filesystem::create_symlink(c.target, model / c.link);
    const auto before = contents(folder.path());
    auto r = cli("quantize --model " + quoted(model) + " --out " + quoted(folder / "q8") + " --weights q8");
    EXPECT_EQ(r.exit_code, 1) << c.link << ": " << r.out;
    EXPECT_NE(r.out.find(c.says), std::string::npos) << c.link << ": " << r.out;
    EXPECT_NE(r.out.find(c.link), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(folder / "q8")) << c.link << ": nothing is written";
    EXPECT_EQ(contents(folder.path()), before);
    std::filesystem::remove(model / c.link);
  }
  // A link inside the folder to a file inside it is copied as a file.
  std::filesystem::create_symlink("config.yaml", model / "config_copy.yaml");
  auto r = cli("quantize --model " + quoted(model) + " --out " + quoted(folder / "q8") + " --weights q8 --json");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_FALSE(std::filesystem::is_symlink(folder / "q8" / "config_copy.yaml"));
  EXPECT_EQ(*read_file_text(folder / "q8" / "config_copy.yaml"), *read_file_text(model / "config.yaml"));
  EXPECT_EQ(*read_file_text(folder / "q8" / "clip" / "vocab.json"), *read_file_text(model / "clip" / "vocab.json"));
}

// --- output that floods or reaches the terminal raw --------------------------------

TEST(HostileOutput, UntrustedTextIsEscapedAndCutInEveryCommand) {
  ScratchFolder folder("hostile-out");
  // A 20 MiB tensor name was echoed whole.
  const auto long_name = folder / "long";
  testing::copy_builtin_model(long_name);
  const std::string name = std::string(20u << 20, 'y') + "\x1b[2J";
  ASSERT_TRUE(testing::rewrite_safetensors(long_name / "shape_gpt.safetensors", [&](testing::EditableTensors& t) {
    t.tensors.push_back({name, DType::kF32, {0}, {}});
  }));
  // The header (20 MiB) is over its budget unless raised, which this run does to reach the name.
  ::setenv("CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES", std::to_string(32u << 20).c_str(), 1);
  auto r = cli(quick_generate(folder / "x.glb", "--model " + quoted(long_name)));
  ::unsetenv("CUBEFORGE_MAX_SAFETENSORS_HEADER_BYTES");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_LT(r.out.size(), 4096u) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("unexpected tensors: yyyy"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_NE(r.out.find("(20971524 bytes in all)"), std::string::npos) << r.out.substr(0, 400);
  EXPECT_FALSE(has_control_bytes(r.out));

  // trace-diff printed tensor names with escape and bell characters raw.
  for (const char* file : {"a.safetensors", "b.safetensors"}) {
    std::vector<TensorToWrite> tensors;
    const float one = 1.f;
    const auto bytes = std::as_bytes(std::span(&one, 1));
    for (const char* tensor : {"t\x1b]0;PWNED\x07", "u\xE2\x80\xAEgnp.exe", "v\xE2\x80\x8B\xEF\xBB\xBF"})
      tensors.push_back({tensor, DType::kF32, {1}, bytes});
    if (std::string(file) == "b.safetensors") tensors.push_back({"w\x07", DType::kF32, {1}, bytes});
    ASSERT_TRUE(write_safetensors(folder / file, tensors).ok());
  }
  for (const char* format : {"", " --json"}) {
    auto diff = cli("trace-diff " + quoted(folder / "a.safetensors") + " " + quoted(folder / "b.safetensors") + format);
    EXPECT_EQ(diff.exit_code, 0) << diff.out;
    EXPECT_FALSE(has_control_bytes(diff.out)) << diff.out;
    for (const char* shown : {"t\\x1B]0;PWNED\\x07", "u\\u{202E}gnp.exe", "v\\u{200B}\\u{FEFF}", "w\\x07"})
      EXPECT_NE(diff.out.find(format[0] ? nlohmann::json(shown).dump() : shown), std::string::npos)
          << shown << " in " << diff.out;
  }

  // Option values came back raw in the option parser's messages.
  auto option = cli("generate --prompt x --weights '\x1b[2J\x07'");
  EXPECT_NE(option.exit_code, 0) << option.out;
  EXPECT_NE(option.out.find("--weights: \\x1B[2J\\x07 not in"), std::string::npos) << option.out;
  EXPECT_FALSE(has_control_bytes(option.out));

  // Direction and zero-width marks in a prompt are shown, not obeyed.
  auto json = cli("generate --json --resolution 4 --out " + quoted(folder / "p.glb") +
                  " --prompt '\xEF\xBB\xBF" "a tall\xE2\x80\x8B chair \xE2\x81\xA7" "evil\xE2\x81\xA9' 2>/dev/null");
  ASSERT_EQ(json.exit_code, 0) << json.out;
  const auto report = nlohmann::json::parse(json.out.substr(json.out.find('{')));
  EXPECT_EQ(report["prompt"], "\\u{FEFF}a tall\\u{200B} chair \\u{2067}evil\\u{2069}");
}

// --- signals -----------------------------------------------------------------------

// SIGTERM and SIGHUP before the final rename left the temporary behind.
TEST(HostileOutput, SigtermAndSighupAreHandledAsCtrlCIs) {
  ScratchFolder folder("hostile-out");
  const auto out = folder / "shape.glb";
  for (int number : {SIGTERM, SIGHUP}) {
    for (const char* stage : {"meshing", "rename"}) {
      ASSERT_TRUE(write_file_atomically(out, std::string_view("OLD")).ok());
      testing::SpawnedProcess run({kCli, "generate", "--prompt", "a tall chair", "--resolution", "4", "--out",
                                   out.string()},
                                  {std::string("CUBEFORGE_TEST_PAUSE_AT=") + stage});
      ASSERT_TRUE(run.wait_for_output(std::string("paused at ") + stage, 120)) << run.output();
      run.signal(number);
      EXPECT_EQ(run.wait(120), 128 + number) << stage << ": " << run.output();
      EXPECT_NE(run.output().find(number == SIGTERM ? "cancelled (SIGTERM)" : "cancelled (SIGHUP)"),
                std::string::npos)
          << run.output();
      EXPECT_EQ(*read_file_text(out), "OLD") << stage;
      EXPECT_TRUE(temporaries(folder.path()).empty()) << stage;
    }
  }
  // calibrate-kv's bases, at their rename.
  const auto bases = folder / "kv_bases.safetensors";
  ASSERT_TRUE(write_file_atomically(bases, std::string_view("OLD")).ok());
  testing::SpawnedProcess run({CUBEFORGE_LAB_PATH, "calibrate-kv", "--prompt", "a tall chair", "--out", bases.string()},
                              {"CUBEFORGE_TEST_PAUSE_AT=rename"});
  ASSERT_TRUE(run.wait_for_output("paused at rename", 300)) << run.output();
  run.signal(SIGTERM);
  EXPECT_EQ(run.wait(120), 128 + SIGTERM) << run.output();
  EXPECT_EQ(*read_file_text(bases), "OLD");
  EXPECT_TRUE(temporaries(folder.path()).empty());
}

// `ulimit -f` ended the run with SIGXFSZ and left the temporary.
TEST(HostileOutput, AWritePastTheFileSizeLimitIsAnErrorAndLeavesNothing) {
  ScratchFolder folder("hostile-out");
  const auto out = folder / "shape.obj";
  ASSERT_TRUE(write_file_atomically(out, std::string_view("OLD")).ok());
  auto r = testing::run_command("ulimit -f 1; timeout -s KILL 300 " + kCli, quick_generate(out));
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.out.find("File too large (the limit on file size, ulimit -f"), std::string::npos) << r.out;
  EXPECT_EQ(*read_file_text(out), "OLD");
  EXPECT_TRUE(temporaries(folder.path()).empty());
}

// --- inputs without end ------------------------------------------------------------

TEST(HostileOutput, APromptsFileIsReadOnlyUpToItsBudget) {
  ScratchFolder folder("hostile-out");
  const auto sparse = folder / "prompts.txt";
  ASSERT_TRUE(write_file_atomically(sparse, std::string_view("a tall chair\n")).ok());
  ASSERT_EQ(::truncate(sparse.c_str(), off_t(2) << 30), 0);  // 2 GiB, sparse: no disk used
  for (const char* command : {"calibrate-kv", "compare", "compare-decoding", "bench-meshing"}) {
    auto r = cli(std::string(command) + " --prompts " + quoted(sparse));
    EXPECT_NE(r.exit_code, 0) << command << ": " << r.out;
    EXPECT_NE(r.out.find("the --prompts file needs 2147483648 bytes, over the budget of 4194304 "
                         "(CUBEFORGE_MAX_PROMPTS_BYTES)"), std::string::npos) << command << ": " << r.out;
  }
}

// --- numbers that fail only once narrowed -------------------------------------------

TEST(HostileOutput, NumbersFromModelFilesAreCheckedAfterNarrowing) {
  ScratchFolder folder("hostile-out");
  for (const auto& number : testing::not_positive_normal_floats()) {
    if (!number.json) continue;
    const auto model = folder / "model";
    std::filesystem::remove_all(model);
    testing::copy_builtin_model(model);
    auto config = *read_file_text(model / "clip" / "config.json");
    config.replace(config.find("\"layer_norm_eps\": 1e-05"), 23, "\"layer_norm_eps\": " + number.text);
    ASSERT_TRUE(write_file_atomically(model / "clip" / "config.json", config).ok());
    auto r = cli(quick_generate(folder / "x.glb", "--model " + quoted(model)));
    EXPECT_EQ(r.exit_code, 1) << number.text << ": " << r.out;
    EXPECT_NE(r.out.find("clip/config.json': text_config.layer_norm_eps = "), std::string::npos) << r.out;
    EXPECT_NE(r.out.find(number.reason), std::string::npos) << r.out;
    EXPECT_FALSE(std::filesystem::exists(folder / "x.glb"));
  }
  // A bounding box of 3e38 overflowed when normalised.
  auto bbox = cli(quick_generate(folder / "x.glb", "--bbox 3e38 1 1"));
  EXPECT_NE(bbox.exit_code, 0) << bbox.out;
  EXPECT_NE(bbox.out.find("--bbox: must be a number from"), std::string::npos) << bbox.out;
}

}  // namespace
}  // namespace cubeforge::hostile_output
