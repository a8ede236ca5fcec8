// The script format of `cubeforge --script`.
#include <gtest/gtest.h>

#include "app/desktop/core/script.h"

namespace cubeforge::app {
namespace {

TEST(Script, ParsesEveryCommandSkippingCommentsAndBlanks) {
  auto script = parse_script(
      "# a test\n"
      "model ../models/tiny\n"
      "\n"
      "prompt   a red dragon  \n"
      "set resolution 5\n"
      "generate\r\n"
      "wait\n"
      "idle 30\n"
      "latency\n"
      "cancel\n"
      "export /tmp/out.glb\n"
      "screenshot shot.png\n"
      "hold-previews\n"
      "wait-preview\n"
      "quit\n");
  ASSERT_TRUE(script.ok()) << script.error().to_string();
  ASSERT_EQ(script->size(), 13u);
  using K = ScriptCommand::Kind;
  const std::vector<K> kinds = {K::kModel,      K::kPrompt,       K::kSet,         K::kGenerate, K::kWait,
                                K::kIdle,       K::kLatency,      K::kCancel,      K::kExport,   K::kScreenshot,
                                K::kHoldPreviews, K::kWaitPreview, K::kQuit};
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ((*script)[i].kind, kinds[i]) << i;
  // Neither waits for the run to end: they are for the run in progress.
  EXPECT_FALSE((*script)[10].waits_for_idle());
  EXPECT_FALSE((*script)[11].waits_for_idle());
  EXPECT_EQ((*script)[0].argument, "../models/tiny");
  EXPECT_EQ((*script)[1].argument, "a red dragon");
  EXPECT_EQ((*script)[1].line, 4);
  EXPECT_EQ((*script)[2].argument, "resolution 5");
}

TEST(Script, InputCommandsTakeAWidgetOrPixelsAndKeyChords) {
  auto script = parse_script(
      "click generate\n"
      "click 120 48.5\n"
      "drag viewport 200 -30\n"
      "drag-right 10 20 5 5\n"
      "key ctrl+a\n"
      "key F\n"
      "type a cat\n"
      "resize 960 600\n"
      "reset-layout\n"
      "dump state.json\n"
      "error-popup\n");
  ASSERT_TRUE(script.ok()) << script.error().to_string();
  ASSERT_EQ(script->size(), 11u);
  const auto& s = *script;
  EXPECT_EQ(s[0].target, "generate");
  EXPECT_TRUE(s[1].target.empty());
  EXPECT_FLOAT_EQ(s[1].y, 48.5f);
  EXPECT_EQ(s[2].target, "viewport");
  EXPECT_FLOAT_EQ(s[2].dx, 200.f);
  EXPECT_FLOAT_EQ(s[2].dy, -30.f);
  EXPECT_EQ(s[3].kind, ScriptCommand::Kind::kDragRight);
  EXPECT_FLOAT_EQ(s[3].x, 10.f);
  EXPECT_FLOAT_EQ(s[3].dx, 5.f);
  EXPECT_EQ(s[4].keys, (std::vector<int>{341, 65}));  // GLFW_KEY_LEFT_CONTROL, GLFW_KEY_A
  EXPECT_EQ(s[5].keys, (std::vector<int>{70}));
  EXPECT_EQ(s[6].argument, "a cat");
  EXPECT_EQ(s[7].width, 960);
  EXPECT_EQ(s[7].height, 600);
  // Input and window commands run at once; the rest waits for an idle app.
  EXPECT_FALSE(s[0].waits_for_idle());
  EXPECT_FALSE(s[9].waits_for_idle());
  EXPECT_EQ(s[10].kind, ScriptCommand::Kind::kErrorPopup);
  EXPECT_FALSE(s[10].waits_for_idle());
  EXPECT_TRUE(parse_script("generate\n")->front().waits_for_idle());

  EXPECT_FALSE(parse_script("key ctrl+banana\n").ok());
  EXPECT_FALSE(parse_script("drag viewport 10\n").ok());
  EXPECT_FALSE(parse_script("click 10\n").ok());
  EXPECT_FALSE(parse_script("resize 10 10\n").ok());
}

TEST(Script, ErrorsNameTheLine) {
  auto unknown = parse_script("wait\nfly away\n");
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.error().message.find("line 2"), std::string::npos);
  EXPECT_NE(unknown.error().message.find("fly"), std::string::npos);
  EXPECT_FALSE(parse_script("export\n").ok());           // needs a path
  EXPECT_FALSE(parse_script("generate now\n").ok());     // takes nothing
  EXPECT_FALSE(parse_script("set resolution\n").ok());   // needs a value
  EXPECT_FALSE(parse_script("idle soon\n").ok());        // a number of frames
  EXPECT_FALSE(parse_script("rest a while\n").ok());     // a number of wakeups
  auto rest = parse_script("rest 40\n");
  ASSERT_TRUE(rest.ok());
  EXPECT_EQ(rest->front().kind, ScriptCommand::Kind::kRest);
  EXPECT_TRUE(rest->front().waits_for_idle());
  EXPECT_FALSE(load_script("/nonexistent/script.txt").ok());
}

}  // namespace
}  // namespace cubeforge::app
