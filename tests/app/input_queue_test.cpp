// The input queue's frames: a burst of events (everything a person did during
// one slow frame) comes out as frames in which no press is lost and order
// between text, keys and clicks holds.
#include <gtest/gtest.h>

#include <algorithm>

#include "app/desktop/core/input_queue.h"

namespace cubeforge::app {
namespace {

constexpr int kCtrl = 341, kA = 65, kBackspace = 259, kC = 67;

InputEvent key(int code, bool down) { return {InputEvent::Kind::kKey, code, down}; }
InputEvent text(char c) { return {InputEvent::Kind::kChar, c}; }
InputEvent button(int b, bool down) { return {InputEvent::Kind::kMouseButton, b, down}; }
InputEvent cursor(double x, double y) { return {InputEvent::Kind::kCursor, 0, false, x, y}; }

// Replays frames and records, per frame, the keys held and the text typed.
struct Replay {
  std::vector<std::vector<int>> held;
  std::vector<std::string> typed;
  std::vector<std::vector<InputEvent>> frames;
};

Replay replay(InputQueue& queue) {
  Replay r;
  std::vector<int> down;
  while (!queue.empty()) {
    auto frame = queue.take_frame();
    EXPECT_FALSE(frame.empty()) << "a frame must hand over at least one event";
    std::string typed;
    for (const auto& e : frame) {
      if (e.kind == InputEvent::Kind::kKey) {
        if (e.down) down.push_back(e.code);
        else down.erase(std::remove(down.begin(), down.end(), e.code), down.end());
      }
      if (e.kind == InputEvent::Kind::kChar) typed += char(e.code);
    }
    r.held.push_back(down);
    r.typed.push_back(typed);
    r.frames.push_back(frame);
  }
  return r;
}

TEST(InputQueue, ATappedChordIsHeldForAFrameAndComesBeforeTheTextTypedAfterIt) {
  // Ctrl+A then "ac", all between two frames (ImGui 1.86 alone sees none of the chord).
  InputQueue queue;
  for (auto e : {key(kCtrl, true), key(kA, true), key(kA, false), key(kCtrl, false), key(kA, true), text('a'),
                 key(kA, false), key(kC, true), text('c'), key(kC, false)})
    queue.push(e);
  Replay r = replay(queue);
  // Some frame holds Ctrl and A together, and it comes before any text.
  size_t chord = r.held.size(), first_text = r.held.size();
  for (size_t f = 0; f < r.held.size(); ++f) {
    bool ctrl = std::count(r.held[f].begin(), r.held[f].end(), kCtrl) > 0;
    bool a = std::count(r.held[f].begin(), r.held[f].end(), kA) > 0;
    if (ctrl && a && chord == r.held.size()) chord = f;
    if (!r.typed[f].empty() && first_text == r.held.size()) first_text = f;
  }
  ASSERT_LT(chord, r.held.size()) << "Ctrl+A was never seen held";
  EXPECT_LT(chord, first_text);
  std::string all;
  for (const auto& t : r.typed) all += t;
  EXPECT_EQ(all, "ac");
}

// A tap as X11 delivers it: Ctrl down alone, then Enter down, Ctrl up and
// Enter up together (Ctrl let go first). Enter must be seen with Ctrl held.
TEST(InputQueue, AChordIsSeenWithItsModifierHeldWhenTheModifierIsLetGoFirst) {
  constexpr int kEnter = 257;
  InputQueue queue;
  queue.push(key(kCtrl, true));
  EXPECT_EQ(queue.take_frame().size(), 1u);
  for (auto e : {key(kEnter, true), key(kCtrl, false), key(kEnter, false)}) queue.push(e);
  std::vector<int> held = {kCtrl};
  bool chord = false;
  while (!queue.empty()) {
    for (const auto& e : queue.take_frame()) {
      if (e.down) held.push_back(e.code);
      else held.erase(std::remove(held.begin(), held.end(), e.code), held.end());
    }
    chord |= std::count(held.begin(), held.end(), kCtrl) && std::count(held.begin(), held.end(), kEnter);
  }
  EXPECT_TRUE(chord) << "Ctrl+Enter was never seen held together";
  EXPECT_TRUE(held.empty());
}

TEST(InputQueue, BackspaceStaysBetweenTheCharactersAroundIt) {
  InputQueue queue;
  for (auto e : {text('a'), text('b'), key(kBackspace, true), key(kBackspace, false), text('c')}) queue.push(e);
  Replay r = replay(queue);
  // The frame that presses Backspace types nothing; "ab" before it, "c" after.
  size_t pressed = 0;
  for (size_t f = 0; f < r.frames.size(); ++f)
    for (const auto& e : r.frames[f])
      if (e.kind == InputEvent::Kind::kKey && e.code == kBackspace && e.down) pressed = f;
  EXPECT_TRUE(r.typed[pressed].empty());
  std::string before, after;
  for (size_t f = 0; f < r.frames.size(); ++f) (f < pressed ? before : after) += r.typed[f];
  EXPECT_EQ(before, "ab");
  EXPECT_EQ(after, "c");
}

TEST(InputQueue, AClickIsSeenWhereItHappenedAndADragMovesBeforeItsRelease) {
  InputQueue queue;
  for (auto e : {cursor(10, 10), button(0, true), cursor(20, 10), cursor(40, 30), button(0, false)}) queue.push(e);
  Replay r = replay(queue);
  ASSERT_EQ(r.frames.size(), 4u);
  EXPECT_EQ(r.frames[0].size(), 1u);  // the move to (10, 10) alone
  EXPECT_EQ(r.frames[1][0].kind, InputEvent::Kind::kMouseButton);  // the press, with no move
  EXPECT_EQ(r.frames[1].size(), 1u);
  EXPECT_EQ(r.frames[2].size(), 2u);  // both moves, while held
  EXPECT_EQ(r.frames[3][0].kind, InputEvent::Kind::kMouseButton);  // then the release
}

TEST(InputQueue, TextAloneGoesInOneFrame) {
  InputQueue queue;
  queue.push(text('x'));
  queue.push(text('y'));
  EXPECT_EQ(queue.take_frame().size(), 2u);
  EXPECT_TRUE(queue.empty());
}

}  // namespace
}  // namespace cubeforge::app
