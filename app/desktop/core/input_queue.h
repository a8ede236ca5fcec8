// Keyboard and mouse events between the window system and the UI's frames.
//
// Debian's Dear ImGui 1.86 reads input as state sampled once per frame: a key
// pressed and released between two frames is never seen down, so at slow
// frame rates (a software rasteriser while generation shares the cores) short
// chords such as Ctrl+A are lost, and a move and a click that land in one
// frame look like a drag from the old position. The window's callbacks push
// every event here in order; each frame takes the longest prefix that can be
// applied at once without losing meaning, and the rest waits for the next
// frame (what later ImGui versions call trickling):
//   - a key or mouse button that already changed in this frame waits, so
//     every press is seen down for at least one frame;
//   - a modifier (Ctrl, Shift, Alt, Super) waits if another key changed in
//     this frame, so a chord is seen with its modifier still held even when
//     the modifier is let go first;
//   - text and keys that are not text (Backspace, arrows, Enter, chords with
//     Ctrl) are not mixed in one frame, so their order survives;
//   - a button change after a cursor move waits, and a cursor move after a
//     button change, so a click is seen where it happened, a drag starts
//     from there, and its last move lands before the release.
// Script commands (`click`, `key`, `type`) push the same events, all in one
// burst: the slowest possible frame rate, and deterministic.
//
// Plain data: keys are GLFW key codes, buttons GLFW mouse buttons.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <vector>

namespace cubeforge::app {

struct InputEvent {
  enum class Kind { kKey, kChar, kMouseButton, kCursor, kCursorInside, kScroll };
  Kind kind = Kind::kKey;
  int code = 0;         // kKey: key; kChar: code point; kMouseButton: button
  bool down = false;    // kKey, kMouseButton; kCursorInside: entered (else left)
  double x = 0, y = 0;  // kCursor: position in window pixels; kScroll: offsets
  double time_ms = 0;   // when the window system delivered it (0: pushed by a script)
};

// GLFW's codes for the keys the queue needs to tell apart.
namespace input_keys {
constexpr int kSpace = 32, kLastPrintable = 96;  // GLFW_KEY_SPACE .. GLFW_KEY_GRAVE_ACCENT
constexpr int kLeftShift = 340, kRightShift = 344;
constexpr int kFirstModifier = 340, kLastModifier = 347;  // shift, ctrl, alt, super; left then right
}  // namespace input_keys

class InputQueue {
 public:
  void push(const InputEvent& event) { pending_.push_back(event); }
  // The events for this frame, in order; the rest stays queued.
  std::vector<InputEvent> take_frame();
  bool empty() const { return pending_.empty(); }
  size_t size() const { return pending_.size(); }

 private:
  std::deque<InputEvent> pending_;
};

// A key that types text when pressed alone (letters, digits, punctuation,
// space) or Shift, which only changes what is typed.
bool is_text_key(int key);

}  // namespace cubeforge::app
