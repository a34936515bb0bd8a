// The load and store steps of the executor: moving weights, KV cache rows and hidden states
// between their homes (placement.h) and the working slots, over the links a GPU build uses —
// device to device for a tensor's GPU rows, pinned CPU memory to and from the device, and disk
// through the pinned disk ring (or straight into the CPU-attention slots); disk weights that are
// a strata store's own bytes come from the store's tensors.bin. Every transfer is
// recorded on its link's track. Copies that touch the device tier are given to the lane's stream
// (src/backend/memory.h) as spans of the device arena; disk reads and writes still move device
// slots' bytes by address, so they need a device backend that keeps its arena in host memory.
//
// Thread safety: loads run on the load lane and stores on the store lane at the same time; each
// uses its own half of the disk ring, and the schedule keeps them off each other's buffers.
#pragma once

#include <span>

#include "src/backend/memory.h"
#include "src/core/status.h"
#include "src/memory/memory_tiers.h"
#include "src/memory/placement.h"
#include "src/runtime/executor_trace.h"
#include "src/runtime/input_rows.h"

namespace strata {

class BlockTransfers {
 public:
  // REQUIRES: `tiers` holds `placement`'s layout; both outlive this object.
  BlockTransfers(const Placement& placement, const MemoryTiers& tiers);

  // Assembles the tensors of part `part` (a block's attention 0 or MLP 1; 0 for the others) of
  // placed layer `layer` (0 input, 1 + b block b, last output) in weight slot `slot`.
  Status LoadWeights(int layer, int part, int slot, Stream& stream, LaneRecord& record) const;
  // The input layer's load: of each of its tensors assembled in a weight slot, only the rows
  // `rows` names (the token table's tokens, the position table's positions), back to back in
  // their sorted order in slot `slot` (4-bit: the rows' codes, then their params). Ids next to
  // each other in a tier move in one copy.
  Status GatherInputRows(const InputRows& rows, int slot, Stream& stream,
                         LaneRecord& record) const;
  // Brings the off-GPU rows [0, rows) of slice `slice` into cache slot `slot`: slots
  // [0, filled) of each row, or, with CPU attention, the disk rows into the CPU-attention slot.
  Status LoadCache(int slice, int slot, int rows, int filled, Stream& stream,
                   LaneRecord& record) const;
  // Sends slots [first, first + count) of the off-GPU rows [0, rows) of cache slot `slot` home
  // (with CPU attention in a decode step: the disk rows, from the CPU-attention slot).
  Status StoreCache(int slice, int slot, int rows, int first, int count, bool decode,
                    Stream& stream, LaneRecord& record) const;
  // Hidden-state rows [0, rows) of micro-batch k between its homes and activation slot `slot`.
  Status LoadActivations(int k, int slot, int rows, Stream& stream, LaneRecord& record) const;
  Status StoreActivations(int k, int slot, int rows, Stream& stream, LaneRecord& record) const;

 private:
  class Copies;
  Status Disk(bool read, std::span<const DiskPiece> pieces, Stream& stream,
              LaneRecord& record) const;
  // Reads weight rows in place from the strata store (PlacedTensor::disk_in_store).
  Status ReadStoreWeights(std::span<const DiskPiece> pieces, Stream& stream,
                          LaneRecord& record) const;
  // Reads or writes one scratch-file extent straight from or to `memory`, not through the ring.
  Status TransferExtent(bool read, const DiskExtent& e, uint8_t* memory,
                        LaneRecord& record) const;
  std::span<uint8_t> Ring(bool read) const;

  const Placement& p_;
  const MemoryTiers& tiers_;
  const bool delegate_;  // CPU attention over the off-GPU cache in decode steps
};

}  // namespace strata
