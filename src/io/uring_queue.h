// UringQueue: one io_uring and the I/O thread that reaps it. The UringEnv (uring_env.h) keeps
// one queue for reads and one for writes, so that a write never waits for an entry behind reads.
// Internal to src/io.
#pragma once

#include <liburing.h>

#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "src/core/status.h"
#include "src/io/transfer.h"

namespace strata {

// A chunk as this queue submits it: by fixed-file slot (fixed_file) or by descriptor.
struct UringTransfer {
  IoChunk chunk;
  int fd = -1;  // the slot in this queue's fixed-file table when fixed_file, else the descriptor
  bool fixed_file = false;
};

// Thread-safe: any lane submits (the submission side is behind a mutex and submits in batches,
// one io_uring_enter per Submit call); the queue's I/O thread reaps completions, continues
// partial transfers and completes events.
// REQUIRES: destroyed with no transfer of a destroyed file in flight.
class UringQueue {
 public:
  // `depth` submission queue entries: transfers in flight at once (at least 1); `name` names the
  // I/O thread.
  UringQueue(int depth, std::string name);
  // Waits for the transfers in flight, then stops the I/O thread.
  ~UringQueue();
  UringQueue(const UringQueue&) = delete;
  UringQueue& operator=(const UringQueue&) = delete;

  // Creates the ring, registers `buffers` as fixed buffers (transfers inside them use
  // READ_FIXED / WRITE_FIXED) and a sparse table of `file_slots` file slots, and starts the
  // I/O thread. Unsupported when io_uring is refused, ResourceExhausted when the buffers
  // cannot be registered (RLIMIT_MEMLOCK); both messages say what to do.
  Status Init(const std::vector<std::span<uint8_t>>& buffers, unsigned file_slots);

  // Puts `fd` in a free slot of the fixed-file table and returns the slot; -1 when none is free
  // or the kernel has no table (transfers then pass the descriptor).
  int RegisterFile(int fd);
  // Empties a slot RegisterFile returned.
  void ReleaseFile(int slot);

  // Queues the transfers, blocking while all entries are in flight. Each completes its chunk's
  // event once (IoEvent::Complete) with ok or the transfer's error.
  void Submit(std::span<const UringTransfer> transfers);

 private:
  struct Op {  // one transfer in flight, owning one submission queue entry at a time
    UringTransfer transfer;
    int buf_index = -1;  // index into the registered buffers, or -1
  };
  struct Region {
    uintptr_t begin, end;
  };

  Status RegisterBuffers(const std::vector<std::span<uint8_t>>& spans);
  // The registered buffer holding all of [p, p + n), or -1.
  int FindRegion(const uint8_t* p, size_t n) const;
  // Queues the rest of op's transfer. REQUIRES: mu_ held.
  void PrepLocked(Op* op);
  // REQUIRES: mu_ held.
  void FlushLocked();
  // The I/O thread: completes transfers until the shutdown NOP arrives.
  void Reap();

  io_uring ring_{};
  bool ring_live_ = false;
  std::vector<Region> regions_;  // sorted by begin; index == fixed buffer index
  const std::string name_;       // the I/O thread's
  std::vector<Op> ops_;          // never resized: Op pointers ride in user_data
  std::mutex mu_;                // guards the submission side, free_ and slot_used_
  std::condition_variable room_;
  std::vector<Op*> free_;
  std::vector<bool> slot_used_;
  std::thread reaper_;
};

}  // namespace strata
