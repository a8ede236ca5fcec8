// The computed panel layout: at every window size each panel lies inside the
// window, no two overlap, and the free view between them is what no panel covers.
#include <gtest/gtest.h>

#include "app/desktop/core/panel_layout.h"

namespace cubeforge::app {
namespace {

TEST(PanelLayout, EveryPanelInsideTheWindowAndNoneOnAnotherAtAnySize) {
  for (float width : {320.f, 640.f, 960.f, 1280.f, 1600.f, 2560.f, 3840.f}) {
    for (float height : {240.f, 400.f, 600.f, 720.f, 1000.f, 1440.f, 2160.f}) {
      SCOPED_TRACE(std::to_string(int(width)) + "x" + std::to_string(int(height)));
      const PanelLayout layout = layout_panels(width, height);
      for (int a = 0; a < kPanelCount; ++a) {
        const Rect& r = layout.panels[a];
        EXPECT_TRUE(r.inside(width, height)) << panel_title(Panel(a));
        EXPECT_GT(r.width, 0.f);
        EXPECT_GT(r.height, 0.f);
        EXPECT_FALSE(r.overlaps(layout.free_view)) << panel_title(Panel(a)) << " covers the free view";
        for (int b = a + 1; b < kPanelCount; ++b)
          EXPECT_FALSE(r.overlaps(layout.panels[b])) << panel_title(Panel(a)) << " on " << panel_title(Panel(b));
      }
      EXPECT_TRUE(layout.free_view.inside(width, height));
      EXPECT_GE(layout.free_view.width, 0.3f * width - 1.f);
    }
  }
}

TEST(PanelLayout, HiddenPanelsLeaveTheWholeWindowFree) {
  const PanelLayout layout = layout_panels(960, 600, true);
  EXPECT_FLOAT_EQ(layout.free_view.width, 960.f);
  EXPECT_FLOAT_EQ(layout.free_view.height, 600.f);
}

TEST(PanelLayout, KeepInsideMovesAndShrinksOnlyWhatItMust) {
  Rect inside{10, 10, 100, 50};
  Rect kept = keep_inside(inside, 960, 600);
  EXPECT_FLOAT_EQ(kept.x, 10.f);
  EXPECT_FLOAT_EQ(kept.width, 100.f);
  // Dragged off the right edge after the window shrank: moved back, same size.
  kept = keep_inside({1500, 700, 300, 200}, 960, 600);
  EXPECT_TRUE(kept.inside(960, 600));
  EXPECT_FLOAT_EQ(kept.width, 300.f);
  EXPECT_FLOAT_EQ(kept.x, 660.f);
  // Larger than the window: shrunk to it.
  kept = keep_inside({-50, -50, 2000, 900}, 960, 600);
  EXPECT_FLOAT_EQ(kept.width, 960.f);
  EXPECT_FLOAT_EQ(kept.height, 600.f);
  EXPECT_TRUE(kept.inside(960, 600));
}

}  // namespace
}  // namespace cubeforge::app
