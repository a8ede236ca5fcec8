// The gallery's captions (wrapping, glyph pixels) and cubeforge-gallery run as
// a user runs it on the fixture model: one cell per prompt, each showing a
// rendered mesh over the background and its caption in ink underneath.
#include <gtest/gtest.h>
#include <stb_image.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "app/gallery/caption_text.h"
#include "tests/support/oracle.h"
#include "tests/support/run_command.h"

namespace cubeforge::gallery {
namespace {

constexpr std::array<uint8_t, 3> kPaper{255, 255, 255}, kInk{0, 0, 0};

int ink_pixels(const Canvas& canvas, int x0, int y0, int x1, int y1) {
  int count = 0;
  for (int y = y0; y < y1; ++y)
    for (int x = x0; x < x1; ++x) count += canvas.rgba[(size_t(y) * canvas.width + x) * 4] == 0;
  return count;
}

TEST(CaptionText, WrapsAtSpacesWithinTheWidthAndKeepsEveryWord) {
  const std::string text = "a tall narrow wooden bookshelf with four shelves and a round top";
  const int limit = text_width("a tall narrow wooden");
  auto lines = wrap_text(text, limit);
  ASSERT_GT(lines.size(), 2u);
  std::string joined;
  for (const auto& line : lines) {
    EXPECT_LE(text_width(line), limit) << line;
    joined += (joined.empty() ? "" : " ") + line;
  }
  EXPECT_EQ(joined, text);
  // A word wider than the limit stays whole on its own line.
  auto long_word = wrap_text("x supercalifragilistic y", text_width("x"));
  EXPECT_EQ(long_word, (std::vector<std::string>{"x", "supercalifragilistic", "y"}));
}

TEST(CaptionText, DrawsInkOnlyInsideTheScaledTextBox) {
  Canvas canvas(200, 60, kPaper);
  const std::string text = "chair";
  const int scale = 3, x = 10, y = 8;
  draw_text(canvas, x, y, text, scale, kInk);
  const int inside = ink_pixels(canvas, x, y, x + text_width(text) * scale, y + kLineHeight * scale);
  EXPECT_GT(inside, 5 * scale * scale * 4);  // every glyph has strokes
  EXPECT_EQ(ink_pixels(canvas, 0, 0, canvas.width, canvas.height), inside);
  Canvas empty(50, 20, kPaper);
  draw_text(empty, 0, 0, "", 2, kInk);
  EXPECT_EQ(ink_pixels(empty, 0, 0, 50, 20), 0);
}

testing::CommandOutput run(const std::string& arguments) {
  return testing::run_command(CUBEFORGE_GALLERY_PATH, arguments);
}

TEST(Gallery, RendersOneCaptionedCellPerPrompt) {
  CUBEFORGE_REQUIRE_ORACLE();
  const auto dir = std::filesystem::temp_directory_path() / ("cubeforge-gallery-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "prompts.txt") << "# fixture prompts\na red dragon\n\na blue chair\na tall vase\n";
  const auto out = dir / "gallery.png";
  const int cell = 96;
  auto r = run("--model '" + testing::oracle_dir().string() + "' --prompts '" + (dir / "prompts.txt").string() +
               "' --out '" + out.string() + "' --columns 2 --cell 96 --resolution 5");
  if (r.exit_code == 3) GTEST_SKIP() << "no Vulkan device: " << r.out;
  ASSERT_EQ(r.exit_code, 0) << r.out;

  int width = 0, height = 0, channels = 0;
  unsigned char* pixels = stbi_load(out.c_str(), &width, &height, &channels, 4);
  ASSERT_NE(pixels, nullptr) << stbi_failure_reason();
  EXPECT_EQ(width, 2 * cell);
  ASSERT_EQ(height % 2, 0);
  const int cell_height = height / 2;
  EXPECT_GT(cell_height, cell);  // room for the caption
  auto pixel = [&](int x, int y) { return pixels + (size_t(y) * width + x) * 4; };
  // Mesh pixels are the warm base colour; the background is a neutral grey gradient.
  auto warm_pixels = [&](int cx, int cy) {
    int count = 0;
    for (int y = cy * cell_height; y < cy * cell_height + cell; ++y)
      for (int x = cx * cell; x < (cx + 1) * cell; ++x) count += int(pixel(x, y)[0]) > int(pixel(x, y)[2]) + 20;
    return count;
  };
  auto dark_caption_pixels = [&](int cx, int cy) {
    int count = 0;
    for (int y = cy * cell_height + cell; y < (cy + 1) * cell_height; ++y)
      for (int x = cx * cell; x < (cx + 1) * cell; ++x) count += pixel(x, y)[0] < 80;
    return count;
  };
  for (auto [cx, cy] : {std::pair{0, 0}, std::pair{1, 0}, std::pair{0, 1}}) {
    EXPECT_GT(warm_pixels(cx, cy), cell * cell / 50) << "cell " << cx << "," << cy << " shows no mesh";
    EXPECT_GT(dark_caption_pixels(cx, cy), 20) << "cell " << cx << "," << cy << " has no caption";
  }
  EXPECT_EQ(warm_pixels(1, 1), 0) << "the unused cell must stay blank";
  EXPECT_EQ(dark_caption_pixels(1, 1), 0);
  stbi_image_free(pixels);

  // A prompt file with nothing in it is refused before any work.
  std::ofstream(dir / "empty.txt") << "# only a comment\n\n";
  auto empty = run("--model '" + testing::oracle_dir().string() + "' --prompts '" + (dir / "empty.txt").string() +
                   "' --out '" + out.string() + "'");
  EXPECT_EQ(empty.exit_code, 2);
  EXPECT_NE(empty.out.find("no prompts"), std::string::npos) << empty.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace cubeforge::gallery
