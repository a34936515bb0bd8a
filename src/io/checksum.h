// Checksum64: the 64-bit checksum of the strata store's extents. It is XXH64 (seed 0), written
// out here from Yann Collet's published specification because no xxhash library is installed:
// about 10 GB/s per core, so verifying a model at load costs little next to reading it.
#pragma once

#include <cstddef>
#include <cstdint>

namespace strata {

// XXH64 of [data, data + n) with seed 0. Thread-safe (pure).
uint64_t Checksum64(const void* data, size_t n);

}  // namespace strata
