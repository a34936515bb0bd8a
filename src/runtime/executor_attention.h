// Attention over a KV cache whose rows live in different places. Row r of a (block, micro-batch)
// slice is (sequence r / kv_heads, KV head r % kv_heads); the executor keeps each tier's rows of
// a slice in its own memory (GPU home, cache slot, CPU home, CPU-attention slot), so a row is
// found through a table. Each (sequence, query head, token) is computed exactly as one
// Backend::Attention call over a contiguous cache computes it, so results are the same bits. The
// 4-bit cache's rows (KvQ4Row) go to the backend's 4-bit ops as a table.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "src/backend/backend.h"
#include "src/memory/placement.h"

namespace strata {

// One dense K row and one V row, each `stride` slots of head_dim values of the cache's element
// type (KvFormat::element), as spans of the arena they live in (the device's, or the host tier's
// as the CPU backend sees it). Each span runs from the row to the end of its plane, so that the
// rows after it in its buffer are a Sub of it; the row itself is its first `stride` slots.
struct KvRow {
  DeviceSpan k, v;
  int stride = 0;
};

// Row `index` of `buffer`, which holds `rows` rows of `len` slots in `format`'s planes: dense
// (KvRowAt), or 4-bit (KvQ4RowAt: its planes, each running to the end of its plane as above; the
// exact rows are the caller's to add).
KvRow KvRowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
              int64_t index);
KvQ4Row KvQ4RowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
                  int64_t index);

// out = attention of q over rows [row_begin, row_end) of `rows`, for the query heads those rows
// serve, on `stream`; other heads of `out` are left as they are. `shape` is the whole
// micro-batch's (its max_len is ignored: each row has its own stride); q and out hold all of it.
// Whole sequences whose rows lie contiguously go in one backend call; other rows one call each
// (one a token when a step has several, since a token's heads are what lie together).
void AttendRows(Backend& backend, Stream& stream, const AttentionShape& shape, DeviceSpan q,
                const std::vector<KvRow>& rows, int row_begin, int row_end,
                std::span<const int> start, DeviceSpan out);

}  // namespace strata
