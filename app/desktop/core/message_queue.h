// A mutex-protected queue from worker threads to the UI thread: workers push
// as things happen, the UI drains everything once per frame. Draining swaps
// the whole vector out, so the lock is held for a pointer swap, never for the
// UI's work on the messages. A UI that sleeps between frames gives the queue
// a way to wake it (set_wake), called after every push under the lock, so
// that once set_wake({}) returns no call of the old one is under way.
#pragma once

#include <functional>
#include <mutex>
#include <utility>
#include <vector>

namespace cubeforge::app {

template <class Message>
class MessageQueue {
 public:
  void push(Message message) {
    std::lock_guard lock(mutex_);
    messages_.push_back(std::move(message));
    if (wake_) wake_();
  }
  // Called on the pushing thread after each message (empty: nothing is called).
  void set_wake(std::function<void()> wake) {
    std::lock_guard lock(mutex_);
    wake_ = std::move(wake);
  }
  std::vector<Message> drain() {
    std::vector<Message> taken;
    std::lock_guard lock(mutex_);
    taken.swap(messages_);
    return taken;
  }

 private:
  std::mutex mutex_;
  std::vector<Message> messages_;
  std::function<void()> wake_;
};

}  // namespace cubeforge::app
