#include "src/memory/disk_pieces.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <vector>

#include "src/core/check.h"
#include "src/io/aligned_buffer.h"
#include "src/io/io_event.h"

namespace strata {
namespace {

constexpr uint64_t kPage = kDirectIoAlignment;
// Reads of pieces at most this far apart in the file are joined, the bytes between them read and
// dropped: on the development VM's disk 64 KiB take about as long as one more request (quiet
// profile: 4 KiB requests at 69,000/s, 14 us each; 64 KiB at 3.4 GB/s, 19 us). A decode step's
// KV rows leave each row's unfilled slots between the pieces.
constexpr uint64_t kReadGapBytes = uint64_t{64} << 10;
// The smallest ring slot of a transfer that is cut into several: a default FileEnv request.
constexpr uint64_t kMinSlotBytes = uint64_t{1} << 20;

uint64_t AlignDown(uint64_t n) { return n / kPage * kPage; }

// Pieces (in file order) read or written by one aligned file range.
struct Run {
  uint64_t begin = 0, end = 0;  // aligned file range
  std::vector<DiskPiece> pieces;
};

// The runs of `pieces`: pieces whose aligned ranges overlap, touch or are at most `max_gap` bytes
// apart share one. Writes pass 0 (a gap written would overwrite bytes no piece holds).
std::vector<Run> Runs(std::span<const DiskPiece> pieces, uint64_t max_gap) {
  std::vector<DiskPiece> sorted(pieces.begin(), pieces.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const DiskPiece& a, const DiskPiece& b) { return a.file_offset < b.file_offset; });
  std::vector<Run> runs;
  for (const DiskPiece& p : sorted) {
    if (p.bytes == 0) continue;
    const uint64_t begin = AlignDown(p.file_offset);
    const uint64_t end = AlignUp(p.file_offset + p.bytes);
    if (runs.empty() || begin > runs.back().end + max_gap) {
      runs.push_back({begin, end, {}});
    } else {
      runs.back().end = std::max(runs.back().end, end);
    }
    runs.back().pieces.push_back(p);
  }
  return runs;
}

// The overlap of a piece with file bytes [offset, offset + length): piece offset, chunk offset
// and byte count; count 0 when they do not meet.
struct Overlap {
  uint64_t in_piece = 0, in_chunk = 0, bytes = 0;
};
Overlap OverlapOf(const DiskPiece& p, uint64_t offset, uint64_t length) {
  const uint64_t lo = std::max(p.file_offset, offset);
  const uint64_t hi = std::min(p.file_offset + p.bytes, offset + length);
  if (lo >= hi) return {};
  return {lo - p.file_offset, lo - offset, hi - lo};
}

// A run's file bytes [offset, offset + length) staged at `buffer` in the ring.
struct Chunk {
  const Run* run;
  uint64_t offset, length;
  uint8_t* buffer;
};

// Each piece's bytes between the chunk and the piece: out of the chunk after a read, into it
// before a write; a device piece's copy is given to `stream`. True when any was.
bool CopyPieces(const Chunk& c, IoOp op, Stream* stream) {
  bool device = false;
  for (const DiskPiece& p : c.run->pieces) {
    const Overlap o = OverlapOf(p, c.offset, c.length);
    if (o.bytes == 0) continue;
    uint8_t* chunk = c.buffer + o.in_chunk;
    const bool read = op == IoOp::kRead;
    if (p.memory != nullptr && read) {
      std::memcpy(p.memory + o.in_piece, chunk, o.bytes);
    } else if (p.memory != nullptr) {
      std::memcpy(chunk, p.memory + o.in_piece, o.bytes);
    } else {
      STRATA_CHECK(stream != nullptr);
      const DeviceSpan span = p.device.Sub(o.in_piece, o.bytes);
      if (read) {
        stream->CopyToDevice(span, {chunk, o.bytes});
      } else {
        stream->CopyToHost({chunk, o.bytes}, span);
      }
      device = true;
    }
  }
  return device;
}

// The bytes of one ring slot for `total` file bytes: the whole ring when it is a single page or
// the transfer fits one minimal slot; else a quarter of the transfer (at least kMinSlotBytes, at
// most half the ring), so that copies overlap the transfers of all but the last quarter.
uint64_t SlotBytes(uint64_t ring_bytes, uint64_t total) {
  if (ring_bytes < 2 * kPage || total <= kMinSlotBytes) return ring_bytes;
  return std::min(AlignDown(ring_bytes / 2), std::max(kMinSlotBytes, AlignUp(total / 4)));
}

// Moves the runs' file bytes between the file and `ring` in submissions of one ring slot each,
// the next slot's submission in flight while one slot is copied (CopyPieces before a write, after
// a read). A slot whose device copies may be in flight waits for them (its event) before
// it is used again, and before this returns.
Status MoveRuns(FileEnv& env, DiskFile* file, IoOp op, const std::vector<Run>& runs,
                std::span<uint8_t> ring, const DeviceCopies& device) {
  STRATA_CHECK(!ring.empty() && ring.size() % kPage == 0);
  uint64_t total = 0;
  for (const Run& run : runs) total += run.end - run.begin;
  const uint64_t slot_bytes = SlotBytes(ring.size(), total);
  struct Slot {
    std::vector<Chunk> chunks;
    IoEvent event;
    Event* copies = nullptr;  // its device copies' event while they may be in flight
  };
  std::array<Slot, 2> slots;
  const int num_slots = ring.size() >= 2 * slot_bytes ? 2 : 1;
  Status status;
  // Marks the slot's device copies given so far with its event.
  const auto record = [&](Slot& s) {
    Event* done = device.slot_done[&s - slots.data()];
    STRATA_CHECK(done != nullptr);
    device.stream->Record(*done);
    s.copies = done;
  };
  const auto await_copies = [](Slot& s) {
    if (s.copies != nullptr) s.copies->HostWait();
    s.copies = nullptr;
  };
  // Awaits the slot's submission (copying its chunks out after a read) and empties it; the first
  // error is kept, and later slots are still awaited.
  const auto drain = [&](Slot& s) {
    const Status done = s.event.Wait();
    if (status.ok()) status = done;
    if (status.ok() && op == IoOp::kRead) {
      bool copied = false;
      for (const Chunk& c : s.chunks) copied |= CopyPieces(c, op, device.stream);
      if (copied) record(s);
    }
    s.chunks.clear();
  };
  const auto submit = [&](Slot& s) {
    await_copies(s);  // a read's copies out of the slot
    std::vector<IoRequest> requests;
    bool copied = false;
    for (const Chunk& c : s.chunks) {
      if (op == IoOp::kWrite) copied |= CopyPieces(c, op, device.stream);
      requests.push_back({op, file, c.offset, static_cast<size_t>(c.length), c.buffer});
    }
    if (copied) {  // a write's copies into the slot complete before the write reads it
      record(s);
      await_copies(s);
    }
    env.Submit(requests, &s.event);
  };
  int current = 0;
  uint64_t used = 0;
  for (const Run& run : runs) {
    for (uint64_t at = run.begin; at < run.end && status.ok();) {
      if (used == slot_bytes) {
        submit(slots[current]);
        current = (current + 1) % num_slots;
        drain(slots[current]);  // the older submission, or with one slot the one just made
        used = 0;
      }
      const uint64_t length = std::min(run.end - at, slot_bytes - used);
      slots[current].chunks.push_back({&run, at, length, ring.data() + current * slot_bytes + used});
      used += length;
      at += length;
    }
  }
  if (status.ok() && !slots[current].chunks.empty()) submit(slots[current]);
  drain(slots[(current + 1) % num_slots]);
  drain(slots[current]);
  for (Slot& s : slots) await_copies(s);
  return status;
}

}  // namespace

Status ReadPieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                  std::span<uint8_t> ring, const DeviceCopies& device) {
  return MoveRuns(env, file, IoOp::kRead, Runs(pieces, kReadGapBytes), ring, device);
}

Status WritePieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                   std::span<uint8_t> ring, const DeviceCopies& device) {
  return MoveRuns(env, file, IoOp::kWrite, Runs(pieces, 0), ring, device);
}

}  // namespace strata
