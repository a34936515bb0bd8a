// TierLayout: where every buffer of a run lives, as offsets into each tier, decided before any
// memory is allocated. The GPU and CPU tiers are one arena each and the disk tier one scratch
// file, so the layout's totals are exactly what the run allocates (docs/DESIGN.md, rule 2).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/memory_accounting.h"

namespace strata {

// What a buffer is for, as the plan's accounting groups bytes.
enum class MemoryUse : uint8_t { kWeights, kKvCache, kActivations, kStaging, kWorkspace };
inline constexpr int kNumMemoryUses = 5;
const char* MemoryUseName(MemoryUse use);  // "weights", "kv_cache", ...

// Bytes [offset, offset + bytes) of a tier: of its arena (GPU, CPU) or its scratch file (disk).
// The tier is a run-time value: the layout's own entries and code over every tier use it.
struct Extent {
  Tier tier = Tier::kGpu;
  uint64_t offset = 0;
  uint64_t bytes = 0;
};

// An extent whose tier is part of its type, as placements hold them: MemoryTiers takes a
// GpuExtent where it gives device memory and a CpuExtent where it gives a host address, so the
// compiler (not a check at run time) rejects an extent handed to the wrong tier. It converts to
// an Extent for code over every tier; nothing converts back.
template <Tier T>
struct TierExtent {
  static constexpr Tier tier = T;
  uint64_t offset = 0;
  uint64_t bytes = 0;

  operator Extent() const { return {T, offset, bytes}; }
};
using GpuExtent = TierExtent<Tier::kGpu>;
using CpuExtent = TierExtent<Tier::kCpu>;
using DiskExtent = TierExtent<Tier::kDisk>;

// One reservation, for reports and the accounting test.
struct LayoutEntry {
  std::string name;
  MemoryUse use = MemoryUse::kWeights;
  Extent extent;
};

// Thread-compatible. Reservations never overlap and are never released.
class TierLayout {
 public:
  // Reserves `bytes` on `tier` at an offset aligned to `alignment` (a power of two).
  Extent Reserve(Tier tier, MemoryUse use, const std::string& name, uint64_t bytes,
                 uint64_t alignment = 64);
  // Reserve() on tier T, typed as T's.
  template <Tier T>
  TierExtent<T> Reserve(MemoryUse use, const std::string& name, uint64_t bytes,
                        uint64_t alignment = 64) {
    const Extent e = Reserve(T, use, name, bytes, alignment);
    return {e.offset, e.bytes};
  }

  // Bytes a tier must hold: the end of its last reservation, alignment padding included.
  uint64_t tier_bytes(Tier tier) const { return end_[static_cast<int>(tier)]; }
  // Bytes reserved for `use` on `tier`, without alignment padding.
  uint64_t use_bytes(Tier tier, MemoryUse use) const;
  const std::vector<LayoutEntry>& entries() const { return entries_; }

 private:
  uint64_t end_[kNumTiers] = {};
  uint64_t by_use_[kNumTiers][kNumMemoryUses] = {};
  std::vector<LayoutEntry> entries_;
};

}  // namespace strata
