// The on-disk history: entries survive a reopen, meshes read back as they
// were written, removal drops files and entries, a corrupt index is an error.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <fstream>

#include "app/desktop/core/history_store.h"
#include "inference/core/file_io.h"
#include "test_folder.h"

namespace cubeforge::app {
namespace {

Mesh tetrahedron(float scale) {
  Mesh mesh;
  mesh.positions = {0, 0, 0, scale, 0, 0, 0, scale, 0, 0, 0, scale};
  mesh.indices = {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3};
  return mesh;
}

TEST(HistoryStore, EntriesAndMeshesSurviveAReopen) {
  testing::TemporaryFolder folder;
  const auto history_folder = folder.path() / "history";
  {
    auto store = HistoryStore::open(history_folder);
    ASSERT_TRUE(store.ok()) << store.error().to_string();
    EXPECT_TRUE(store->entries().empty());
    HistoryEntry first;
    first.prompt = "a small pyramid";
    first.seed = 3;
    first.settings = {{"resolution", 5}};
    first.timings.total_ms = 123.5;
    first.timings.stages_ms = {{"decode", 80.0}};
    auto added = store->add(first, tetrahedron(1.f));
    ASSERT_TRUE(added.ok()) << added.error().to_string();
    EXPECT_FALSE(added->id.empty());
    EXPECT_EQ(added->faces, 4);
    EXPECT_TRUE(std::filesystem::exists(history_folder / added->mesh_file));
    HistoryEntry second = first;
    second.prompt = "a larger pyramid";
    auto added_second = store->add(second, tetrahedron(2.f));
    ASSERT_TRUE(added_second.ok());
    EXPECT_NE(added_second->id, added->id);
  }
  auto reopened = HistoryStore::open(history_folder);
  ASSERT_TRUE(reopened.ok()) << reopened.error().to_string();
  ASSERT_EQ(reopened->entries().size(), 2u);
  const HistoryEntry& first = reopened->entries()[0];
  EXPECT_EQ(first.prompt, "a small pyramid");
  EXPECT_EQ(first.seed, 3u);
  EXPECT_EQ(first.settings.value("resolution", 0), 5);
  EXPECT_DOUBLE_EQ(first.timings.total_ms, 123.5);
  EXPECT_DOUBLE_EQ(first.timings.stages_ms.value("decode", 0.0), 80.0);
  // The mesh reads back (through Assimp) with the positions written.
  auto mesh = reopened->load_mesh(reopened->entries()[1]);
  ASSERT_TRUE(mesh.ok()) << mesh.error().to_string();
  EXPECT_EQ(mesh->face_count(), 4u);
  Bounds3 bounds = mesh->bounds();
  EXPECT_FLOAT_EQ(bounds.max[0], 2.f);
  EXPECT_FLOAT_EQ(bounds.max[2], 2.f);
}

TEST(HistoryStore, RemoveDropsTheEntryAndItsFiles) {
  testing::TemporaryFolder folder;
  auto store = HistoryStore::open(folder.path());
  ASSERT_TRUE(store.ok());
  auto added = store->add(HistoryEntry{}, tetrahedron(1.f));
  ASSERT_TRUE(added.ok());
  std::ofstream(store->thumbnail_path(*added)) << "png";
  ASSERT_TRUE(store->remove(added->id).ok());
  EXPECT_TRUE(store->entries().empty());
  EXPECT_FALSE(std::filesystem::exists(folder.path() / added->mesh_file));
  EXPECT_FALSE(std::filesystem::exists(store->thumbnail_path(*added)));
  EXPECT_FALSE(store->remove(added->id).ok());
  auto reopened = HistoryStore::open(folder.path());
  ASSERT_TRUE(reopened.ok());
  EXPECT_TRUE(reopened->entries().empty());
}

TEST(HistoryStore, CorruptIndexIsAnErrorNamingTheFile) {
  testing::TemporaryFolder folder;
  ASSERT_TRUE(write_file_atomically(folder.path() / "index.json", std::string_view("{\"entries\": 3}")).ok());
  auto store = HistoryStore::open(folder.path());
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.error().code, ErrorCode::kCorruptFile);
  EXPECT_NE(store.error().message.find("index.json"), std::string::npos);
  // An entry naming a file outside the folder is refused too.
  nlohmann::json escaping = {{"id", "x"}, {"prompt", "p"}, {"seed", 1}, {"mesh_file", "../../etc/passwd"}};
  EXPECT_FALSE(history_entry_from_json(escaping).ok());
}

// One malformed entry (a seed written as text) among good ones: the others
// are listed, the bad one is named in words (not the JSON library's text),
// and it is kept in the index when the history is written again.
TEST(HistoryStore, AMalformedEntryIsLeftOutAndNamedWithoutHidingTheRest) {
  testing::TemporaryFolder folder;
  nlohmann::json good = {{"id", "a"}, {"prompt", "a chair"}, {"seed", 1}, {"mesh_file", "a.glb"}};
  nlohmann::json bad = {{"id", "b"}, {"prompt", "a mug"}, {"seed", "seven"}, {"mesh_file", "b.glb"}};
  nlohmann::json later = {{"id", "c"}, {"prompt", "a vase"}, {"seed", 3}, {"mesh_file", "c.glb"}};
  nlohmann::json index = {{"version", 1}, {"entries", {good, bad, later}}};
  ASSERT_TRUE(write_file_atomically(folder.path() / "index.json", index.dump()).ok());
  auto store = HistoryStore::open(folder.path());
  ASSERT_TRUE(store.ok()) << store.error().to_string();
  ASSERT_EQ(store->entries().size(), 2u);
  EXPECT_EQ(store->entries()[0].prompt, "a chair");
  EXPECT_EQ(store->entries()[1].prompt, "a vase");
  ASSERT_EQ(store->problems().size(), 1u);
  EXPECT_NE(store->problems()[0].find("'b'"), std::string::npos) << store->problems()[0];
  EXPECT_NE(store->problems()[0].find("'seed'"), std::string::npos) << store->problems()[0];
  EXPECT_EQ(store->problems()[0].find("json.exception"), std::string::npos) << store->problems()[0];

  HistoryEntry lamp;
  lamp.prompt = "a lamp";
  lamp.seed = 4;
  ASSERT_TRUE(store->add(lamp, tetrahedron(1.f)).ok());
  auto written = read_file_text(folder.path() / "index.json");
  ASSERT_TRUE(written.ok());
  EXPECT_NE(written->find("\"seven\""), std::string::npos) << "the unreadable entry was dropped";
  auto reopened = HistoryStore::open(folder.path());
  ASSERT_TRUE(reopened.ok());
  EXPECT_EQ(reopened->entries().size(), 3u);
  EXPECT_EQ(reopened->problems().size(), 1u);
}

// std::filesystem's throwing calls aborted the app on a history folder that is
// a loop of symbolic links; the store now says what is wrong.
TEST(HistoryStore, AFolderThatCannotBeExaminedIsAnErrorNotAnAbort) {
  testing::TemporaryFolder folder;
  std::filesystem::create_symlink("history", folder.path() / "history");
  auto store = HistoryStore::open(folder.path() / "history");
  ASSERT_FALSE(store.ok());
  EXPECT_NE(store.error().message.find("loop of symbolic links"), std::string::npos) << store.error().message;
  std::filesystem::create_directories(folder.path() / "fifo");
  ASSERT_EQ(::mkfifo((folder.path() / "fifo" / "index.json").c_str(), 0644), 0);
  auto fifo = HistoryStore::open(folder.path() / "fifo");  // reading it would wait for a writer forever
  ASSERT_FALSE(fifo.ok());
  EXPECT_NE(fifo.error().message.find("FIFO"), std::string::npos) << fifo.error().message;
}

TEST(HistoryStore, APromptThatIsNotUtf8IsKeptNotAborted) {
  testing::TemporaryFolder folder;
  auto store = HistoryStore::open(folder.path());
  ASSERT_TRUE(store.ok());
  Mesh mesh;
  mesh.positions = {0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 1};
  mesh.indices = {0, 2, 1, 0, 1, 3, 0, 3, 2, 1, 2, 3};
  HistoryEntry entry;
  entry.prompt = "chair \xff";
  auto added = store->add(entry, mesh);
  ASSERT_TRUE(added.ok()) << added.error().to_string();
  auto reopened = HistoryStore::open(folder.path());
  ASSERT_TRUE(reopened.ok()) << reopened.error().to_string();
  EXPECT_EQ(reopened->entries().size(), 1u);
}

TEST(HistoryStore, CountsAndSeedsMustBeWholeNumbers) {
  for (const char* text : {R"({"entries": [{"id": "a", "prompt": "p", "seed": 1.5, "mesh_file": "a.glb"}]})",
                           R"({"entries": [{"id": "a", "prompt": "p", "seed": 1, "faces": 1e300, "mesh_file": "a.glb"}]})",
                           R"({"entries": [{"id": "a", "prompt": "p", "seed": -1, "mesh_file": "a.glb"}]})"}) {
    auto parsed = parse_history_index(text, "index.json");
    ASSERT_TRUE(parsed.ok()) << text;
    EXPECT_TRUE(parsed->entries.empty()) << text;
    EXPECT_EQ(parsed->problems.size(), 1u) << text;
  }
  auto fine = parse_history_index(R"({"entries": [{"id": "a", "prompt": "p", "seed": 3, "faces": 12, "mesh_file": "a.glb"}]})",
                                  "index.json");
  ASSERT_TRUE(fine.ok()) << fine.error().to_string();
  ASSERT_EQ(fine->entries.size(), 1u);
  EXPECT_EQ(fine->entries.front().faces, 12);
}

}  // namespace
}  // namespace cubeforge::app
