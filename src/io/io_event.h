// IoEvent: the completion of a group of I/O requests, typically every request that fills or
// drains one buffer. A lane submits many requests against per-buffer events and waits on the one
// buffer it needs next, never on the whole queue.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>

#include "src/core/status.h"

namespace strata {

// Thread-safe. One thread waits on an event; any number of threads complete requests against it.
// REQUIRES: the event outlives every request submitted against it (Wait() before destroying).
class IoEvent {
 public:
  IoEvent() = default;
  IoEvent(const IoEvent&) = delete;
  IoEvent& operator=(const IoEvent&) = delete;

  // Blocks until every request submitted against this event so far has completed. Returns the
  // first error among them (ok when none failed) and clears it, so the event can be reused for
  // the buffer's next transfer. Returns at once when nothing is pending.
  Status Wait();
  // True when no request is pending. Does not block and does not clear the error.
  bool Done() const;

  // For FileEnv implementations: `n` more requests will complete against this event. Called
  // before the requests can complete, so Wait() cannot return early.
  void AddPending(size_t n);
  // For FileEnv implementations: one pending request finished with `status`.
  void Complete(const Status& status);

 private:
  mutable std::mutex mu_;
  std::condition_variable done_;
  size_t pending_ = 0;
  Status status_;
};

}  // namespace strata
