#include "src/runtime/executor_attention.h"

#include <cstring>

#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "src/backend/q4_sizes.h"

namespace strata {
namespace {

// True when `p` lies `bytes` bytes after `base` (in one arena, for spans).
bool LiesAt(const DeviceSpan& p, const DeviceSpan& base, long bytes) {
  return p.StartsAt(base, static_cast<uint64_t>(bytes));
}
bool LiesAt(const void* p, const void* base, long bytes) {
  return static_cast<const uint8_t*>(p) == static_cast<const uint8_t*>(base) + bytes;
}
bool Present(const DeviceSpan& p) { return !p.empty(); }
bool Present(const void* p) { return p != nullptr; }

// True when row first + i lies i rows after row `first`, with the same stride, for K and V (for
// 4-bit rows: in each of the four planes, keys with `key_param_halves` per slot). Row is KvRow or
// KvRowAddress.
template <class Row>
bool Follows(const std::vector<Row>& rows, int first, int i, int head_dim, int key_param_halves) {
  const Row& r0 = rows[static_cast<size_t>(first)];
  const Row& r = rows[static_cast<size_t>(first + i)];
  if (r.stride != r0.stride) return false;
  if (Present(r0.k_codes)) {
    const long codes = static_cast<long>(r0.stride) * KvQ4CodeBytes(head_dim);
    const long k_params = static_cast<long>(r0.stride) * key_param_halves * 2;
    const long v_params = static_cast<long>(r0.stride) * KvQ4ParamHalves(head_dim) * 2;
    return LiesAt(r.k_codes, r0.k_codes, i * codes) && LiesAt(r.v_codes, r0.v_codes, i * codes) &&
           LiesAt(r.k_params, r0.k_params, i * k_params) &&
           LiesAt(r.v_params, r0.v_params, i * v_params);
  }
  const long step = static_cast<long>(r0.stride) * head_dim * static_cast<long>(sizeof(float));
  return LiesAt(r.k, r0.k, i * step) && LiesAt(r.v, r0.v, i * step);
}

// The number of whole sequences from row r (a sequence's first row) within [r, row_end) whose
// rows lie as one contiguous cache.
template <class Row>
int ContiguousSequences(const std::vector<Row>& rows, int r, int row_end, int kvh, int d,
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

// Floats [first, first + count) of `span`.
DeviceSpan FloatsOf(const DeviceSpan& span, size_t first, size_t count) {
  return span.Sub(first * sizeof(float), count * sizeof(float));
}

}  // namespace

KvRow KvRowAt(const KvFormat& format, const DeviceSpan& buffer, int64_t rows, int len,
              int64_t index) {
  const auto plane = [&](int p, SpanType type) {
    const int64_t row_bytes = len * format.plane_slot_bytes(p);
    return buffer.Sub(static_cast<uint64_t>(format.PlaneOffset(p, rows, len) + index * row_bytes),
                      static_cast<uint64_t>((rows - index) * row_bytes), type);
  };
  KvRow row;
  row.stride = len;
  if (!format.q4) {
    row.k = plane(0, SpanType::kF32);
    row.v = plane(1, SpanType::kF32);
    return row;
  }
  row.k_codes = plane(0, SpanType::kBytes);
  row.k_params = plane(1, SpanType::kBytes);
  row.v_codes = plane(2, SpanType::kBytes);
  row.v_params = plane(3, SpanType::kBytes);
  return row;
}

void WriteKvRowsQ4(const std::vector<KvRowAddress>& rows, int row_begin, int row_end,
                   int kv_heads, int head_dim, const float* k_new, const float* v_new, int tokens,
                   int first_slot, const Q4KeyWrite& keys, std::vector<float>& scratch) {
  const size_t d = static_cast<size_t>(head_dim);
  // A row's tokens are gathered in `scratch`, then quantized each token of each head on its own
  // (so the codes are the same bits wherever the row lives).
  scratch.resize(2 * static_cast<size_t>(tokens) * d);
  for (int r = row_begin; r < row_end; ++r) {
    const KvRowAddress& row = rows[static_cast<size_t>(r)];
    const int b = r / kv_heads;
    const int h = r % kv_heads;
    float* k_dst = scratch.data();
    float* v_dst = k_dst + static_cast<size_t>(tokens) * d;
    for (int t = 0; t < tokens; ++t) {
      const size_t src = ((static_cast<size_t>(b) * tokens + t) * kv_heads + h) * d;
      std::memcpy(k_dst + t * d, k_new + src, d * sizeof(float));
      std::memcpy(v_dst + t * d, v_new + src, d * sizeof(float));
    }
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
                                   sizeof(float);
      AttentionShape s = shape;
      s.batch = seqs;
      s.max_len = first.stride;
      backend.Attention(stream, s, FloatsOf(q, b * seq_floats, seqs * seq_floats),
                        first.k.Sub(0, cache_bytes), first.v.Sub(0, cache_bytes),
                        start.subspan(static_cast<size_t>(b), static_cast<size_t>(seqs)),
                        FloatsOf(out, b * seq_floats, seqs * seq_floats));
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
    const uint64_t row_bytes = static_cast<uint64_t>(row.stride) * d * sizeof(float);
    for (int t = 0; t < tokens; ++t) {
      s.cache_len = shape.cache_len - tokens + t + 1;
      const size_t at = b * seq_floats + t * token_floats + head0;
      backend.Attention(stream, s, FloatsOf(q, at, width), row.k.Sub(0, row_bytes),
                        row.v.Sub(0, row_bytes), start.subspan(static_cast<size_t>(b), 1),
                        FloatsOf(out, at, width));
    }
    ++r;
  }
}

void AttendRowsQ4(const kernels::cpu::DecodeAttentionQ4Shape& shape, const float* q,
                  const std::vector<KvRowAddress>& rows, int row_begin, int row_end,
                  const int* start, float* out, const kernels::cpu::Q4ExactRows* exact) {
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
    const KvRowAddress& row = rows[static_cast<size_t>(r)];
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
