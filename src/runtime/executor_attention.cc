#include "src/runtime/executor_attention.h"

#include <algorithm>
#include <cstring>

namespace strata {
namespace {

// True when row first + i lies i rows after row `first`, with the same stride, for K and V.
bool Follows(const std::vector<KvRow>& rows, int first, int i, int head_dim) {
  const KvRow& r0 = rows[static_cast<size_t>(first)];
  const KvRow& r = rows[static_cast<size_t>(first + i)];
  const long step = static_cast<long>(r0.stride) * head_dim;
  return r.stride == r0.stride && r.k == r0.k + i * step && r.v == r0.v + i * step;
}

}  // namespace

void WriteKvRows(const std::vector<KvRow>& rows, int row_begin, int row_end, int kv_heads,
                 int head_dim, const float* k_new, const float* v_new, int tokens,
                 int first_slot) {
  const size_t d = static_cast<size_t>(head_dim);
  for (int r = row_begin; r < row_end; ++r) {
    const KvRow& row = rows[static_cast<size_t>(r)];
    const int b = r / kv_heads;
    const int h = r % kv_heads;
    for (int t = 0; t < tokens; ++t) {
      const size_t src = ((static_cast<size_t>(b) * tokens + t) * kv_heads + h) * d;
      const size_t dst = static_cast<size_t>(first_slot + t) * d;
      std::memcpy(row.k + dst, k_new + src, d * sizeof(float));
      std::memcpy(row.v + dst, v_new + src, d * sizeof(float));
    }
  }
}

void AttendRows(Backend& backend, const AttentionShape& shape, const float* q,
                const std::vector<KvRow>& rows, int row_begin, int row_end, const int* start,
                float* out, std::vector<float>& scratch) {
  const int kvh = shape.num_kv_heads;
  const int group = shape.num_heads / kvh;
  const int d = shape.head_dim;
  const int tokens = shape.new_tokens;
  const size_t seq_floats = static_cast<size_t>(tokens) * shape.num_heads * d;
  int r = row_begin;
  while (r < row_end) {
    const int b = r / kvh;
    // A run of whole sequences laid out as one contiguous cache: one call.
    int seqs = 0;
    while (r % kvh == 0 && r + (seqs + 1) * kvh <= row_end) {
      bool follows = true;
      for (int i = seqs * kvh; i < (seqs + 1) * kvh && follows; ++i) follows = Follows(rows, r, i, d);
      if (!follows) break;
      ++seqs;
    }
    if (seqs > 0) {
      AttentionShape s = shape;
      s.batch = seqs;
      s.max_len = rows[static_cast<size_t>(r)].stride;
      backend.Attention(s, q + b * seq_floats, rows[static_cast<size_t>(r)].k,
                        rows[static_cast<size_t>(r)].v, start + b, out + b * seq_floats);
      r += seqs * kvh;
      continue;
    }
    // One row: its KV head serves `group` consecutive query heads.
    const KvRow& row = rows[static_cast<size_t>(r)];
    AttentionShape s = shape;
    s.batch = 1;
    s.num_heads = group;
    s.num_kv_heads = 1;
    s.max_len = row.stride;
    const size_t head0 = static_cast<size_t>(r % kvh) * group * d;
    if (tokens == 1) {
      backend.Attention(s, q + b * seq_floats + head0, row.k, row.v, start + b,
                        out + b * seq_floats + head0);
    } else {
      const size_t width = static_cast<size_t>(group) * d;
      scratch.resize(2 * tokens * width);
      float* q_rows = scratch.data();
      float* o_rows = q_rows + tokens * width;
      for (int t = 0; t < tokens; ++t) {
        const size_t at = b * seq_floats + static_cast<size_t>(t) * shape.num_heads * d + head0;
        std::memcpy(q_rows + t * width, q + at, width * sizeof(float));
      }
      backend.Attention(s, q_rows, row.k, row.v, start + b, o_rows);
      for (int t = 0; t < tokens; ++t) {
        const size_t at = b * seq_floats + static_cast<size_t>(t) * shape.num_heads * d + head0;
        std::memcpy(out + at, o_rows + t * width, width * sizeof(float));
      }
    }
    ++r;
  }
}

}  // namespace strata
