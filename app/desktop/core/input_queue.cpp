// One frame's worth of input at a time: see input_queue.h.
#include "app/desktop/core/input_queue.h"

#include <set>

namespace cubeforge::app {

bool is_text_key(int key) {
  return (key >= input_keys::kSpace && key <= input_keys::kLastPrintable) || key == input_keys::kLeftShift ||
         key == input_keys::kRightShift;
}

namespace {
bool is_modifier(int key) { return key >= input_keys::kFirstModifier && key <= input_keys::kLastModifier; }
}  // namespace

std::vector<InputEvent> InputQueue::take_frame() {
  std::vector<InputEvent> frame;
  std::set<int> keys_changed;
  bool other_key_changed = false;  // a key that is not text changed
  bool text = false;
  unsigned buttons_changed = 0;
  bool moved = false;
  while (!pending_.empty()) {
    const InputEvent& event = pending_.front();
    bool waits = false;
    switch (event.kind) {
      case InputEvent::Kind::kKey:
        waits = keys_changed.count(event.code) || (text && !is_text_key(event.code)) || buttons_changed ||
                (is_modifier(event.code) && !keys_changed.empty());
        if (!waits) {
          keys_changed.insert(event.code);
          other_key_changed |= !is_text_key(event.code);
        }
        break;
      case InputEvent::Kind::kChar:
        waits = other_key_changed || buttons_changed;
        text |= !waits;
        break;
      case InputEvent::Kind::kMouseButton: {
        const unsigned bit = 1u << (event.code & 31);
        waits = (buttons_changed & bit) || !keys_changed.empty() || text || moved;
        if (!waits) buttons_changed |= bit;
        break;
      }
      case InputEvent::Kind::kCursor:
      case InputEvent::Kind::kCursorInside:
      case InputEvent::Kind::kScroll:
        waits = buttons_changed != 0;
        moved |= !waits && event.kind != InputEvent::Kind::kScroll;
        break;
    }
    if (waits) break;
    frame.push_back(event);
    pending_.pop_front();
  }
  return frame;
}

}  // namespace cubeforge::app
