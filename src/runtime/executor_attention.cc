#include "src/runtime/executor_attention.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "src/backend/q4_sizes.h"

namespace strata {
namespace {

// True when row first + i lies i rows after row `first`, with the same stride, for K and V (for
// 4-bit rows: in each of the four planes, keys with `key_param_halves` per slot).
bool Follows(const std::vector<KvRow>& rows, int first, int i, int head_dim,
             int key_param_halves) {
  const KvRow& r0 = rows[static_cast<size_t>(first)];
  const KvRow& r = rows[static_cast<size_t>(first + i)];
  if (r.stride != r0.stride) return false;
  if (r0.k_codes != nullptr) {
    const long codes = static_cast<long>(r0.stride) * KvQ4CodeBytes(head_dim);
    const long k_params = static_cast<long>(r0.stride) * key_param_halves;
    const long v_params = static_cast<long>(r0.stride) * KvQ4ParamHalves(head_dim);
    return r.k_codes == r0.k_codes + i * codes && r.v_codes == r0.v_codes + i * codes &&
           r.k_params == r0.k_params + i * k_params && r.v_params == r0.v_params + i * v_params;
  }
  const long step = static_cast<long>(r0.stride) * head_dim;
  return r.k == r0.k + i * step && r.v == r0.v + i * step;
}

// The number of whole sequences from row r (a sequence's first row) within [r, row_end) whose
// rows lie as one contiguous cache.
int ContiguousSequences(const std::vector<KvRow>& rows, int r, int row_end, int kvh, int d,
                        int key_param_halves = 0) {
  int seqs = 0;
  while (r % kvh == 0 && r + (seqs + 1) * kvh <= row_end) {
    bool follows = true;
    for (int i = seqs * kvh; i < (seqs + 1) * kvh && follows; ++i) {
      follows = Follows(rows, r, i, d, key_param_halves);
    }
    if (!follows) break;
    ++seqs;
  }
  return seqs;
}

}  // namespace

KvRow KvRowAt(const KvFormat& format, uint8_t* base, int64_t rows, int len, int64_t index) {
  const auto plane = [&](int p) {
    return base + format.PlaneOffset(p, rows, len) + index * len * format.plane_slot_bytes(p);
  };
  KvRow row;
  row.stride = len;
  if (!format.q4) {
    row.k = reinterpret_cast<float*>(plane(0));
    row.v = reinterpret_cast<float*>(plane(1));
    return row;
  }
  row.k_codes = plane(0);
  row.k_params = reinterpret_cast<uint16_t*>(plane(1));
  row.v_codes = plane(2);
  row.v_params = reinterpret_cast<uint16_t*>(plane(3));
  return row;
}

void WriteKvRows(const std::vector<KvRow>& rows, int row_begin, int row_end, int kv_heads,
                 int head_dim, const float* k_new, const float* v_new, int tokens, int first_slot,
                 bool q4, const Q4KeyWrite& keys, std::vector<float>& scratch) {
  const size_t d = static_cast<size_t>(head_dim);
  // A 4-bit row's tokens are gathered in `scratch`, then quantized each token of each head on its
  // own (so the codes are the same bits wherever the row lives); an fp32 row's go straight to
  // their slots.
  if (q4) scratch.resize(2 * static_cast<size_t>(tokens) * d);
  for (int r = row_begin; r < row_end; ++r) {
    const KvRow& row = rows[static_cast<size_t>(r)];
    const int b = r / kv_heads;
    const int h = r % kv_heads;
    float* k_dst = q4 ? scratch.data() : row.k + static_cast<size_t>(first_slot) * d;
    float* v_dst = q4 ? k_dst + static_cast<size_t>(tokens) * d
                      : row.v + static_cast<size_t>(first_slot) * d;
    for (int t = 0; t < tokens; ++t) {
      const size_t src = ((static_cast<size_t>(b) * tokens + t) * kv_heads + h) * d;
      std::memcpy(k_dst + t * d, k_new + src, d * sizeof(float));
      std::memcpy(v_dst + t * d, v_new + src, d * sizeof(float));
    }
    if (!q4) continue;
    const kernels::cpu::Q4CacheShape s{1, 1, row.stride, head_dim};
    if (keys.by_channel) {
      const float* exact = keys.exact_keys + static_cast<size_t>(r) * (keys.sink + keys.window) * d;
      kernels::cpu::WriteKeyGroupsByChannel(head_dim, keys.sink, keys.window, keys.start[b],
                                            first_slot, tokens, k_dst, static_cast<long>(d), exact,
                                            row.k_codes, row.k_params);
    } else {
      kernels::cpu::WriteQ4Cache(s, k_dst, tokens, first_slot, keys.rotate, row.k_codes,
                                 row.k_params);
    }
    kernels::cpu::WriteQ4Cache(s, v_dst, tokens, first_slot, false, row.v_codes, row.v_params);
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
    const int seqs = ContiguousSequences(rows, r, row_end, kvh, d);
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

void AttendRowsQ4(const kernels::cpu::DecodeAttentionQ4Shape& shape, const float* q,
                  const std::vector<KvRow>& rows, int row_begin, int row_end, const int* start,
                  float* out, const kernels::cpu::Q4ExactRows* exact) {
  const int kvh = shape.num_kv_heads;
  const int group = shape.num_heads / kvh;
  const int d = shape.head_dim;
  const size_t seq_floats = static_cast<size_t>(shape.num_heads) * d;
  // The exact rows from row r on.
  auto exact_from = [&](int r) {
    if (exact == nullptr) return kernels::cpu::Q4ExactRows{};
    kernels::cpu::Q4ExactRows e = *exact;
    const size_t at = static_cast<size_t>(r) * (e.sink + e.window) * d;
    e.keys += at;
    e.values += at;
    return e;
  };
  int r = row_begin;
  while (r < row_end) {
    const int b = r / kvh;
    const KvRow& row = rows[static_cast<size_t>(r)];
    const kernels::cpu::Q4CacheView k{row.k_codes, row.k_params};
    const kernels::cpu::Q4CacheView v{row.v_codes, row.v_params};
    kernels::cpu::DecodeAttentionQ4Shape s = shape;
    s.max_len = row.stride;
    const kernels::cpu::Q4ExactRows e = exact_from(r);
    const int seqs = ContiguousSequences(
        rows, r, row_end, kvh, d,
        shape.keys_by_channel ? KvQ4ChannelParamHalves(d) : KvQ4ParamHalves(d));
    if (seqs > 0) {
      s.batch = seqs;
      kernels::cpu::DecodeAttentionQ4(s, q + b * seq_floats, k, v, start + b,
                                      out + b * seq_floats, kernels::cpu::Q4Isa::kAuto, &e);
      r += seqs * kvh;
      continue;
    }
    // One row: its KV head serves `group` consecutive query heads.
    s.batch = 1;
    s.num_heads = group;
    s.num_kv_heads = 1;
    const size_t at = b * seq_floats + static_cast<size_t>(r % kvh) * group * d;
    kernels::cpu::DecodeAttentionQ4(s, q + at, k, v, start + b, out + at,
                                    kernels::cpu::Q4Isa::kAuto, &e);
    ++r;
  }
}

}  // namespace strata
