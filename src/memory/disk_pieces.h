// Disk pieces: moving scattered pieces of host or device memory to and from a file through a
// staging ring of aligned host memory, as the disk tier does for every read and write
// (memory_tiers.h) and as `strata profile` measures it. A device piece's bytes pass through the
// ring and a stream's copies (disk -> pinned ring -> device, and back), never by address.
#pragma once

#include <cstdint>
#include <span>

#include "src/backend/memory.h"
#include "src/core/status.h"
#include "src/io/file_env.h"

namespace strata {

// One piece of a disk transfer: file bytes [file_offset, file_offset + bytes) and host memory,
// or (memory null) the device span `device` of as many bytes.
struct DiskPiece {
  DiskPiece() = default;
  DiskPiece(uint64_t file_offset, uint8_t* memory, uint64_t bytes)
      : file_offset(file_offset), memory(memory), bytes(bytes) {}
  DiskPiece(uint64_t file_offset, DeviceSpan device)
      : file_offset(file_offset), bytes(device.bytes()), device(device) {}

  uint64_t file_offset = 0;
  uint8_t* memory = nullptr;
  uint64_t bytes = 0;
  DeviceSpan device;
};

// How device pieces are reached: copies on `stream` (the moving lane's), each ring slot's copies
// ordered before the slot is used again by the slot's own event. Unused (and may be empty) when
// every piece is in host memory.
struct DeviceCopies {
  Stream* stream = nullptr;
  Event* slot_done[2] = {nullptr, nullptr};
};

// Reads every piece from `file` through `ring` (4 KiB-aligned, a multiple of 4 KiB): pieces
// adjacent in the file, or at most 64 KiB apart, are read together in aligned requests (the bytes
// between them land in the ring and are dropped), then copied out. The ring is used as two
// slots, so that one slot is copied out while the other's reads are in flight.
// Device pieces are copied out on `device.stream`; when this returns, those copies have completed.
Status ReadPieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                  std::span<uint8_t> ring, const DeviceCopies& device = {});

// Writes the pieces through `ring`, copying one slot in while the other's writes are in flight.
// Each piece's covering 4 KiB pages are written whole: file bytes in those pages that no piece
// covers get unspecified values, so callers write whole extents (or bytes they will not read
// again).
// Device pieces are copied in on `device.stream`, each slot's completed before its write starts.
Status WritePieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                   std::span<uint8_t> ring, const DeviceCopies& device = {});

}  // namespace strata
