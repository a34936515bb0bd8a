#include "src/memory/tier_layout.h"

#include "src/core/check.h"

namespace strata {

const char* MemoryUseName(MemoryUse use) {
  switch (use) {
    case MemoryUse::kWeights: return "weights";
    case MemoryUse::kKvCache: return "kv_cache";
    case MemoryUse::kActivations: return "activations";
    case MemoryUse::kStaging: return "staging";
    case MemoryUse::kWorkspace: return "workspace";
  }
  return "?";
}

Extent TierLayout::Reserve(Tier tier, MemoryUse use, const std::string& name, uint64_t bytes,
                           uint64_t alignment) {
  STRATA_CHECK(alignment > 0 && (alignment & (alignment - 1)) == 0);
  uint64_t& end = end_[static_cast<int>(tier)];
  const uint64_t offset = (end + alignment - 1) / alignment * alignment;
  by_use_[static_cast<int>(tier)][static_cast<int>(use)] += bytes;
  end = offset + bytes;
  const Extent e{tier, offset, bytes};
  entries_.push_back({name, use, e});
  return e;
}

uint64_t TierLayout::use_bytes(Tier tier, MemoryUse use) const {
  return by_use_[static_cast<int>(tier)][static_cast<int>(use)];
}

}  // namespace strata
