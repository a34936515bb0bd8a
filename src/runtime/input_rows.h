// InputRows: the rows of the input embedding's tables that one token step of a block reads. When
// the input layer's weights live (partly) off the GPU, its load brings only these rows, back to
// back in sorted order, into the weight slot (BlockTransfers::GatherInputRows), and the compute
// looks tokens up by their index there (RowIndex). A whole table would cross the link every token
// step otherwise: for Llama-3-8B 1 GB, where a decode step needs one row per sequence.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/memory/weight_placement.h"
#include "src/runtime/executor_sequences.h"
#include "src/runtime/generation.h"

namespace strata {

struct InputRows {
  int token = -1;                  // the token step they are for
  std::vector<int32_t> tokens;     // token-table rows, sorted and distinct
  std::vector<int32_t> positions;  // position-table rows (position + offset), sorted, distinct

  // The rows of input tensor `t`: the positions' for the position table, else the tokens'.
  const std::vector<int32_t>& of(const PlacedTensor& t) const {
    return t.model_field == &ModelWeights::position_embedding ? positions : tokens;
  }
};

// The rows of token step `token` (0: the prefill) of the block `requests` (prompts left-padded to
// `prompt_len` by repeating their first token, as BlockCompute pads them): at the prefill every
// prompt token and positions [0, prompt_len); after it each sequence's last token and its
// position, prompt length + token - 1. `position_offset` is ModelConfig's (OPT's learned
// positions start at row 2). REQUIRES: token == 0, or `sequences` has sampled token - 1.
InputRows BlockInputRows(const std::vector<GenerationRequest>& requests,
                         const BlockSequences& sequences, int prompt_len, int token,
                         int position_offset);

// The index of `id` in `rows` (sorted, distinct). REQUIRES: `id` is one of them.
int32_t RowIndex(std::span<const int32_t> rows, int32_t id);

}  // namespace strata
