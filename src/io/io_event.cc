#include "src/io/io_event.h"

#include "src/core/check.h"

namespace strata {

Status IoEvent::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  done_.wait(lock, [&] { return pending_ == 0; });
  Status status = std::move(status_);
  status_ = Status::Ok();
  return status;
}

bool IoEvent::Done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return pending_ == 0;
}

void IoEvent::AddPending(size_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  pending_ += n;
}

void IoEvent::Complete(const Status& status) {
  // Notify while holding the lock: the waiter may destroy the event as soon as it can return.
  std::lock_guard<std::mutex> lock(mu_);
  STRATA_CHECK(pending_ > 0);
  if (!status.ok() && status_.ok()) status_ = status;
  if (--pending_ == 0) done_.notify_all();
}

}  // namespace strata
