// A mutex-protected queue from worker threads to the UI thread: workers push
// as things happen, the UI drains everything once per frame. Draining swaps
// the whole vector out, so the lock is held for a pointer swap, never for the
// UI's work on the messages.
#pragma once

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
};

}  // namespace cubeforge::app
