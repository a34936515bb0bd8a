// A hash of strings that is the same on every platform, build and run: request seeds, shard
// ownership and OpenAI output ids are derived from it, so they must never change.
#pragma once

#include <cstdint>
#include <string_view>

namespace strata {

// 64-bit FNV-1a of `s`.
inline uint64_t Fnv1a64(std::string_view s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (unsigned char c : s) h = (h ^ c) * 0x100000001b3ull;
  return h;
}

// SplitMix64's finaliser: spreads every input bit over every output bit, so that `h % n` is
// balanced even for small n (FNV-1a's low bits depend only on the low bits of each byte).
inline uint64_t Mix64(uint64_t h) {
  h = (h ^ (h >> 30)) * 0xbf58476d1ce4e5b9ull;
  h = (h ^ (h >> 27)) * 0x94d049bb133111ebull;
  return h ^ (h >> 31);
}

}  // namespace strata
