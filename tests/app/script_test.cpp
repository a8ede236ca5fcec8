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
      "quit\n");
  ASSERT_TRUE(script.ok()) << script.error().to_string();
  ASSERT_EQ(script->size(), 11u);
  using K = ScriptCommand::Kind;
  const std::vector<K> kinds = {K::kModel,   K::kPrompt, K::kSet,    K::kGenerate,   K::kWait,      K::kIdle,
                                K::kLatency, K::kCancel, K::kExport, K::kScreenshot, K::kQuit};
  for (size_t i = 0; i < kinds.size(); ++i) EXPECT_EQ((*script)[i].kind, kinds[i]) << i;
  EXPECT_EQ((*script)[0].argument, "../models/tiny");
  EXPECT_EQ((*script)[1].argument, "a red dragon");
  EXPECT_EQ((*script)[1].line, 4);
  EXPECT_EQ((*script)[2].argument, "resolution 5");
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
  EXPECT_FALSE(load_script("/nonexistent/script.txt").ok());
}

}  // namespace
}  // namespace cubeforge::app
