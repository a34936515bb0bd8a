// Attention over a KV cache whose rows live in different places. Row r of a (block, micro-batch)
// slice is (sequence r / kv_heads, KV head r % kv_heads); the executor keeps each tier's rows of
// a slice in its own memory (GPU home, cache slot, CPU home, CPU-attention slot), so a row is
// found through a table. Each (sequence, query head, token) is computed exactly as one
// Backend::Attention call over a contiguous cache computes it, so results are the same bits.
#pragma once

#include <cstdint>
#include <vector>

#include "src/backend/backend.h"

namespace strata {

// One K row and one V row, each `stride` slots of head_dim fp32 values.
struct KvRow {
  float* k = nullptr;
  float* v = nullptr;
  int stride = 0;
};

// Stores this step's keys and values, k_new and v_new [batch * tokens, kv_heads * head_dim]
// (token-major, as a Linear writes them), in slots [first_slot, first_slot + tokens) of rows
// [row_begin, row_end) of `rows`. Same layout rule as KvCache::Write.
void WriteKvRows(const std::vector<KvRow>& rows, int row_begin, int row_end, int kv_heads,
                 int head_dim, const float* k_new, const float* v_new, int tokens, int first_slot);

// out = attention of q over rows [row_begin, row_end) of `rows`, for the query heads those rows
// serve; other heads of `out` are left as they are. `shape` is the whole micro-batch's (its
// max_len is ignored: each row has its own stride). Whole sequences whose rows lie contiguously
// go in one backend call; other rows one call each (queries gathered into `scratch` when a
// step has several tokens).
void AttendRows(Backend& backend, const AttentionShape& shape, const float* q,
                const std::vector<KvRow>& rows, int row_begin, int row_end, const int* start,
                float* out, std::vector<float>& scratch);

}  // namespace strata
