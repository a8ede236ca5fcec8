// Files named by users: reads refuse what is not a regular file (a FIFO
// would block forever), path checks never throw, and atomic writes follow the
// rules in file_io.h (read-only files, symbolic links, links planted in
// shared folders, inputs of the run, long names, stale temporaries of killed
// runs, cancellation up to the rename).
#include "inference/core/file_io.h"

#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/stat.h>

#include <chrono>
#include <thread>

#include "tests/support/hostile_files.h"

namespace cubeforge {
namespace {

using testing::ScratchFolder;

std::vector<std::string> temporaries_in(const std::filesystem::path& folder) {
  std::vector<std::string> names;
  for (const auto& entry : std::filesystem::directory_iterator(folder))
    if (entry.path().filename().string().find(".tmp") != std::string::npos) names.push_back(entry.path().filename());
  return names;
}

TEST(FileIo, AFifoIsRefusedAtOnceInsteadOfBlocking) {
  ScratchFolder folder("file-io");
  const auto fifo = folder / "weights.safetensors";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0644), 0);
  // Should a read block on the FIFO, a writer arriving after 3 s releases it
  // (with nothing written), and the elapsed time shows it.
  std::thread writer([&] {
    std::this_thread::sleep_for(std::chrono::seconds(3));
    const int fd = ::open(fifo.c_str(), O_WRONLY | O_NONBLOCK);
    if (fd >= 0) ::close(fd);
  });
  const auto start = std::chrono::steady_clock::now();
  auto bytes = read_file_bytes(fifo);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  writer.join();
  ASSERT_FALSE(bytes.ok());
  EXPECT_LT(seconds, 2.0);
  EXPECT_NE(bytes.error().message.find("FIFO"), std::string::npos) << bytes.error().message;
  EXPECT_NE(bytes.error().message.find(fifo.string()), std::string::npos);
  auto mapped = SafetensorsFile::open(fifo);
  ASSERT_FALSE(mapped.ok());
  EXPECT_NE(mapped.error().message.find("FIFO"), std::string::npos);
}

TEST(FileIo, DirectoriesAndDevicesAreNamedForWhatTheyAre) {
  ScratchFolder folder("file-io");
  auto dir = read_file_text(folder.path());
  ASSERT_FALSE(dir.ok());
  EXPECT_NE(dir.error().message.find("is a directory"), std::string::npos) << dir.error().message;
  auto device = read_file_text("/dev/zero", 1 << 20);
  ASSERT_FALSE(device.ok());
  EXPECT_NE(device.error().message.find("character device"), std::string::npos) << device.error().message;
}

TEST(FileIo, ALoopOfSymbolicLinksIsAnErrorNotAnException) {
  ScratchFolder folder("file-io");
  const auto loop = folder / "loop";
  std::filesystem::create_symlink("loop", loop);
  auto kind = file_kind(loop / "inside.yaml");
  ASSERT_FALSE(kind.ok());
  EXPECT_NE(kind.error().message.find("loop of symbolic links"), std::string::npos) << kind.error().message;
  EXPECT_FALSE(require_regular_file(loop, "the configuration").ok());
  auto write = write_file_atomically(loop / "out.glb", std::string_view("x"));
  ASSERT_FALSE(write.ok());
  EXPECT_NE(write.error().message.find("loop of symbolic links"), std::string::npos) << write.error().message;
}

TEST(FileIo, AReadOnlyFileIsReplacedOnlyWhenForcedAndKeepsItsMode) {
  ScratchFolder folder("file-io");
  const auto path = folder / "shape.glb";
  ASSERT_TRUE(write_file_atomically(path, std::string_view("old")).ok());
  ASSERT_EQ(::chmod(path.c_str(), 0444), 0);
  Status refused = write_file_atomically(path, std::string_view("new"));
  ASSERT_FALSE(refused.ok());
  EXPECT_NE(refused.error().message.find("read-only"), std::string::npos) << refused.error().message;
  EXPECT_EQ(*read_file_text(path), "old");
  WriteOptions force;
  force.replace_read_only = true;
  ASSERT_TRUE(write_file_atomically(path, std::string_view("new"), force).ok());
  EXPECT_EQ(*read_file_text(path), "new");
  struct stat st {};
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
}

TEST(FileIo, ASymbolicLinkIsWrittenThroughAndStays) {
  ScratchFolder folder("file-io");
  ASSERT_TRUE(write_file_atomically(folder / "target.glb", std::string_view("old")).ok());
  std::filesystem::create_symlink("target.glb", folder / "link.glb");
  ASSERT_TRUE(write_file_atomically(folder / "link.glb", std::string_view("new")).ok());
  EXPECT_TRUE(std::filesystem::is_symlink(folder / "link.glb"));
  EXPECT_EQ(*read_file_text(folder / "target.glb"), "new");
  std::filesystem::create_symlink("nowhere.glb", folder / "dangling.glb");
  Status dangling = write_file_atomically(folder / "dangling.glb", std::string_view("x"));
  ASSERT_FALSE(dangling.ok());
  EXPECT_NE(dangling.error().message.find("nowhere.glb"), std::string::npos) << dangling.error().message;
  EXPECT_FALSE(std::filesystem::exists(folder / "nowhere.glb"));
}

TEST(FileIo, NamesUpTo255BytesAreWritten) {
  ScratchFolder folder("file-io");
  for (size_t length : {240, 241, 250, 255}) {
    const std::string name = std::string(length - 4, 'n') + ".glb";
    ASSERT_TRUE(write_file_atomically(folder / name, std::string_view("data")).ok()) << length;
    EXPECT_EQ(*read_file_text(folder / name), "data");
    EXPECT_LE(temporary_file_name(name, "0123abcd").size(), 255u);
  }
  // A cut never splits a UTF-8 sequence.
  std::string wide;
  while (wide.size() < 250) wide += "\xC3\xA9";
  const std::string temp = temporary_file_name(wide, "0123abcd");
  EXPECT_LE(temp.size(), 255u);
  EXPECT_NE(uint8_t(temp[temp.size() - 14]) & 0xC0, 0xC0u);  // the byte before ".0123abcd.tmp" ends a character
  EXPECT_TRUE(temporaries_in(folder.path()).empty());
}

TEST(FileIo, StaleTemporariesOfKilledWritesAreRemovedLiveOnesKept) {
  ScratchFolder folder("file-io");
  const auto stale = folder / temporary_file_name("shape.glb", "0badf00d");
  const auto live = folder / temporary_file_name("shape.glb", "0000beef");
  const auto foreign = folder / ".shape.glb.notours";
  for (const auto& path : {stale, live, foreign}) ASSERT_TRUE(write_file_atomically(path, std::string_view("partial")).ok());
  // Another run still writing holds its temporary's lock.
  const int held = ::open(live.c_str(), O_RDONLY);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);
  ASSERT_TRUE(write_file_atomically(folder / "shape.glb", std::string_view("whole")).ok());
  EXPECT_FALSE(std::filesystem::exists(stale));
  EXPECT_TRUE(std::filesystem::exists(live));
  EXPECT_TRUE(std::filesystem::exists(foreign));
  ::close(held);
}

TEST(FileIo, ACancelBeforeTheRenameLeavesTheOldFileAndNoTemporary) {
  ScratchFolder folder("file-io");
  const auto path = folder / "shape.glb";
  ASSERT_TRUE(write_file_atomically(path, std::string_view("old")).ok());
  std::atomic<bool> cancel{false};
  WriteOptions options;
  options.cancel = &cancel;
  options.before_rename = [&] { cancel.store(true); };  // Ctrl+C at the last moment
  Status cancelled = write_file_atomically(path, std::string_view("new"), options);
  ASSERT_FALSE(cancelled.ok());
  EXPECT_EQ(cancelled.error().code, ErrorCode::kCancelled);
  EXPECT_EQ(*read_file_text(path), "old");
  EXPECT_EQ(temporaries_in(folder.path()).size(), 0u);
}

// Once a program protects its inputs, no write replaces a file it read: by
// the same name, through a symbolic link or a hard link.
TEST(FileIo, AFileThisRunReadIsNeverReplaced) {
  ScratchFolder folder("file-io");
  const auto input = folder / "weights.safetensors";
  ASSERT_TRUE(write_file_atomically(input, std::string_view("weights")).ok());
  std::filesystem::create_symlink("weights.safetensors", folder / "link.safetensors");
  std::filesystem::create_hard_link(input, folder / "hard.safetensors");
  protect_inputs_from_writes();
  ASSERT_TRUE(read_file_text(input).ok());
  for (const char* name : {"weights.safetensors", "link.safetensors", "hard.safetensors"}) {
    Status refused = write_file_atomically(folder / name, std::string_view("trace"));
    ASSERT_FALSE(refused.ok()) << name;
    EXPECT_NE(refused.error().message.find("an input of this run"), std::string::npos) << refused.error().message;
    EXPECT_FALSE(resolve_write_target(folder / name).ok()) << name;
  }
  EXPECT_EQ(*read_file_text(input), "weights");
  EXPECT_TRUE(temporaries_in(folder.path()).empty());
  EXPECT_TRUE(write_file_atomically(folder / "other.safetensors", std::string_view("trace")).ok());
  protect_inputs_from_writes(false);
  EXPECT_TRUE(write_file_atomically(input, std::string_view("rewritten")).ok());
}

// The kernel's protected_symlinks rule, kept even where the system turned it
// off: in a world-writable sticky folder a link is followed only when it is
// this user's or the folder owner's. Planting a link as another user needs root.
TEST(FileIo, ALinkAnotherUserPlantedInASharedFolderIsNotFollowed) {
  if (::geteuid() != 0) GTEST_SKIP() << "giving a link to another user needs root";
  ScratchFolder folder("file-io");
  const auto shared = folder / "shared";
  std::filesystem::create_directory(shared);
  ASSERT_EQ(::chmod(shared.c_str(), 01777), 0);
  const auto victim = folder / "victim.txt";
  ASSERT_TRUE(write_file_atomically(victim, std::string_view("precious")).ok());
  std::filesystem::create_symlink("../victim.txt", shared / "planted.obj");
  ASSERT_EQ(::lchown((shared / "planted.obj").c_str(), 65534, 65534), 0);
  std::filesystem::create_symlink("../victim.txt", shared / "mine.obj");
  std::filesystem::create_symlink("shared", folder / "via");  // a link of ours on the way changes nothing
  for (const auto& path : {shared / "planted.obj", folder / "via" / "planted.obj"}) {
    Status refused = write_file_atomically(path, std::string_view("mesh"));
    ASSERT_FALSE(refused.ok()) << path;
    EXPECT_NE(refused.error().message.find("another user (uid 65534)"), std::string::npos) << refused.error().message;
    EXPECT_EQ(*read_file_text(victim), "precious");
  }
  // This user's own link is followed, and so is any link in a folder without the sticky bit.
  EXPECT_TRUE(write_file_atomically(shared / "mine.obj", std::string_view("mine")).ok());
  EXPECT_EQ(*read_file_text(victim), "mine");
  ASSERT_EQ(::chmod(shared.c_str(), 0777), 0);
  EXPECT_TRUE(write_file_atomically(shared / "planted.obj", std::string_view("not sticky")).ok());
  EXPECT_TRUE(temporaries_in(shared).empty());
}

// A scratch folder gives back permissions a test took away before it goes,
// but never through a link: a folder of links into a fixture (a model folder
// made of the fixture's files) must leave the fixture's modes as they were.
TEST(ScratchFolder, LeavesWhatItsLinksLeadToAsItWas) {
  testing::ScratchFolder outside("links-lead-here");
  const auto target = outside / "weights.safetensors";
  ASSERT_TRUE(write_file_atomically(target, std::string_view("x")).ok());
  ASSERT_EQ(::chmod(target.c_str(), 0644), 0);
  ASSERT_EQ(::chmod(outside.path().c_str(), 0700), 0);
  {
    testing::ScratchFolder folder("links");
    std::filesystem::create_symlink(target, folder / "weights.safetensors");
    std::filesystem::create_directory_symlink(outside.path(), folder / "clip");
  }
  struct stat after {};
  ASSERT_EQ(::stat(target.c_str(), &after), 0);
  EXPECT_EQ(after.st_mode & 07777, 0644u);
  ASSERT_EQ(::stat(outside.path().c_str(), &after), 0);
  EXPECT_EQ(after.st_mode & 07777, 0700u) << "the linked folder's mode changed";
}

}  // namespace
}  // namespace cubeforge
