// StepInput: what one token step feeds through the model for one micro-batch.
#pragma once

#include <cstdint>
#include <vector>

namespace strata {

// The tokens one step feeds through the model for a micro-batch of `batch` sequences, each with
// `new_tokens` new tokens (left-padded to the same count). Hidden states are
// [batch * new_tokens, hidden], sequence-major.
struct StepInput {
  int batch = 0;
  int new_tokens = 0;
  std::vector<int32_t> tokens;     // [batch * new_tokens]
  std::vector<int32_t> positions;  // [batch * new_tokens]; position ids, 0 at a sequence's first
                                   // real token
  std::vector<int> start;          // [batch]; cache slot of each sequence's first real token
  int cache_len = 0;               // cache slots filled once this step's tokens are written
};

}  // namespace strata
