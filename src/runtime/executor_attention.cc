#include "src/runtime/executor_attention.h"

#include "src/core/check.h"

namespace strata {
namespace {

// True when row first + i lies i rows after row `first`, with the same stride, for K and V.
bool Follows(const std::vector<KvRow>& rows, int first, int i, int head_dim) {
  const KvRow& r0 = rows[static_cast<size_t>(first)];
  const KvRow& r = rows[static_cast<size_t>(first + i)];
  const uint64_t step =
      static_cast<uint64_t>(i) * r0.stride * head_dim * SpanElementBytes(r0.k.type());
  return r.stride == r0.stride && r.k.StartsAt(r0.k, step) && r.v.StartsAt(r0.v, step);
}

// The number of whole sequences from row r (a sequence's first row) within [r, row_end) whose
// rows lie as one contiguous cache.
int ContiguousSequences(const std::vector<KvRow>& rows, int r, int row_end, int kvh, int d) {
  int seqs = 0;
  while (r % kvh == 0 && r + (seqs + 1) * kvh <= row_end) {
    bool follows = true;
    for (int i = seqs * kvh; i < (seqs + 1) * kvh && follows; ++i) {
      follows = Follows(rows, r, i, d);
    }
    if (!follows) break;
    ++seqs;
  }
  return seqs;
}

// Elements [first, first + count) of `span`.
DeviceSpan ElementsOf(const DeviceSpan& span, size_t first, size_t count) {
  const uint64_t bytes = SpanElementBytes(span.type());
  return span.Sub(first * bytes, count * bytes);
}

}  // namespace

namespace {

// Plane `p` of `buffer` (rows x len slots in `format`) from row `index` to the plane's end.
DeviceSpan PlaneFrom(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
                     int64_t index, int p, SpanType type) {
  const int64_t row_bytes = len * format.plane_slot_bytes(p);
  return buffer.Sub(static_cast<uint64_t>(format.PlaneOffset(p, rows, len) + index * row_bytes),
                    static_cast<uint64_t>((rows - index) * row_bytes), type);
}

}  // namespace

KvRow KvRowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
              int64_t index) {
  STRATA_CHECK(!format.q4);
  return {PlaneFrom(format, buffer, rows, len, index, 0, format.element),
          PlaneFrom(format, buffer, rows, len, index, 1, format.element), len};
}

KvQ4Row KvQ4RowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
                  int64_t index) {
  STRATA_CHECK(format.q4);
  KvQ4Row row;
  row.k_codes = PlaneFrom(format, buffer, rows, len, index, 0, SpanType::kBytes);
  row.k_params = PlaneFrom(format, buffer, rows, len, index, 1, SpanType::kBytes);
  row.v_codes = PlaneFrom(format, buffer, rows, len, index, 2, SpanType::kBytes);
  row.v_params = PlaneFrom(format, buffer, rows, len, index, 3, SpanType::kBytes);
  row.stride = len;
  return row;
}

void AttendRows(Backend& backend, Stream& stream, const AttentionShape& shape, DeviceSpan q,
                const std::vector<KvRow>& rows, int row_begin, int row_end,
                std::span<const int> start, DeviceSpan out) {
  const int kvh = shape.num_kv_heads;
  const int group = shape.num_heads / kvh;
  const int d = shape.head_dim;
  const int tokens = shape.new_tokens;
  const size_t token_floats = static_cast<size_t>(shape.num_heads) * d;
  const size_t seq_floats = tokens * token_floats;
  int r = row_begin;
  while (r < row_end) {
    const int b = r / kvh;
    // A run of whole sequences laid out as one contiguous cache: one call.
    const int seqs = ContiguousSequences(rows, r, row_end, kvh, d);
    if (seqs > 0) {
      const KvRow& first = rows[static_cast<size_t>(r)];
      const uint64_t cache_bytes = static_cast<uint64_t>(seqs) * kvh * first.stride * d *
                                   SpanElementBytes(first.k.type());
      AttentionShape s = shape;
      s.batch = seqs;
      s.max_len = first.stride;
      backend.Attention(stream, s, ElementsOf(q, b * seq_floats, seqs * seq_floats),
                        first.k.Sub(0, cache_bytes), first.v.Sub(0, cache_bytes),
                        start.subspan(static_cast<size_t>(b), static_cast<size_t>(seqs)),
                        ElementsOf(out, b * seq_floats, seqs * seq_floats));
      r += seqs * kvh;
      continue;
    }
    // One row: its KV head serves `group` consecutive query heads, which lie together in each
    // token's queries, so one call a token (each query is computed alone either way).
    const KvRow& row = rows[static_cast<size_t>(r)];
    AttentionShape s = shape;
    s.batch = 1;
    s.new_tokens = 1;
    s.num_heads = group;
    s.num_kv_heads = 1;
    s.max_len = row.stride;
    const size_t head0 = static_cast<size_t>(r % kvh) * group * d;
    const size_t width = static_cast<size_t>(group) * d;
    const uint64_t row_bytes =
        static_cast<uint64_t>(row.stride) * d * SpanElementBytes(row.k.type());
    for (int t = 0; t < tokens; ++t) {
      s.cache_len = shape.cache_len - tokens + t + 1;
      const size_t at = b * seq_floats + t * token_floats + head0;
      backend.Attention(stream, s, ElementsOf(q, at, width), row.k.Sub(0, row_bytes),
                        row.v.Sub(0, row_bytes), start.subspan(static_cast<size_t>(b), 1),
                        ElementsOf(out, at, width));
    }
    ++r;
  }
}

}  // namespace strata
