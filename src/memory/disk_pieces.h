// Disk pieces: moving scattered pieces of host memory to and from a file through a staging ring
// of aligned memory, as the disk tier does for every read and write (memory_tiers.h) and as
// `strata profile` measures it.
#pragma once

#include <cstdint>
#include <span>

#include "src/core/status.h"
#include "src/io/file_env.h"

namespace strata {

// One piece of a disk transfer: file bytes [file_offset, file_offset + bytes) and memory.
struct DiskPiece {
  uint64_t file_offset = 0;
  uint8_t* memory = nullptr;
  uint64_t bytes = 0;
};

// Reads every piece from `file` through `ring` (4 KiB-aligned, a multiple of 4 KiB): pieces
// adjacent in the file, or at most 64 KiB apart, are read together in aligned requests (the bytes
// between them land in the ring and are dropped), then copied out. The ring is used as two
// slots, so that one slot is copied out while the other's reads are in flight.
Status ReadPieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                  std::span<uint8_t> ring);

// Writes the pieces through `ring`, copying one slot in while the other's writes are in flight.
// Each piece's covering 4 KiB pages are written whole: file bytes in those pages that no piece
// covers get unspecified values, so callers write whole extents (or bytes they will not read
// again).
Status WritePieces(FileEnv& env, DiskFile* file, std::span<const DiskPiece> pieces,
                   std::span<uint8_t> ring);

}  // namespace strata
