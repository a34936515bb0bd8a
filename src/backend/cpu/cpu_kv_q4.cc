#include "src/backend/cpu/cpu_kv_q4.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/kv_q4.h"
#include "kernels/cpu/kv_q4_channel.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/kv_q4_smooth.h"
#include "src/backend/cpu/cpu_activations.h"
#include "src/backend/cpu/cpu_memory.h"
#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {
namespace {

namespace kc = kernels::cpu;

// A KvQ4Row by address.
struct HostRow {
  uint8_t* k_codes = nullptr;
  uint16_t* k_params = nullptr;
  uint8_t* v_codes = nullptr;
  uint16_t* v_params = nullptr;
  float* k_exact = nullptr;
  float* v_exact = nullptr;
  int stride = 0;
};

// fp16 params of one key slot in the step's format.
int KeyParamHalves(const KvQ4Step& step) {
  return step.format.keys_by_channel ? KvQ4ChannelParamHalves(step.head_dim)
                                     : KvQ4ParamHalves(step.head_dim);
}

// The rows by address, each checked to hold `stride` slots (and its exact rows, when the format
// keeps exact tokens).
std::vector<HostRow> Resolve(const KvQ4Step& step, std::span<const KvQ4Row> rows) {
  const int d = step.head_dim;
  const int key_halves = KeyParamHalves(step);
  const uint64_t exact_bytes =
      static_cast<uint64_t>(step.format.sink + step.format.window) * d * sizeof(float);
  std::vector<HostRow> out;
  out.reserve(rows.size());
  for (const KvQ4Row& r : rows) {
    const uint64_t slots = static_cast<uint64_t>(r.stride);
    STRATA_CHECK(r.stride >= step.cache_len &&
                 r.k_codes.bytes() >= slots * KvQ4CodeBytes(d) &&
                 r.v_codes.bytes() >= slots * KvQ4CodeBytes(d) &&
                 r.k_params.bytes() >= slots * key_halves * 2 &&
                 r.v_params.bytes() >= slots * KvQ4ParamHalves(d) * 2);
    HostRow h;
    h.k_codes = CpuAddress(r.k_codes);
    h.k_params = reinterpret_cast<uint16_t*>(CpuAddress(r.k_params));
    h.v_codes = CpuAddress(r.v_codes);
    h.v_params = reinterpret_cast<uint16_t*>(CpuAddress(r.v_params));
    h.stride = r.stride;
    if (step.format.exact()) {
      STRATA_CHECK(r.k_exact.bytes() >= exact_bytes && r.v_exact.bytes() >= exact_bytes);
      h.k_exact = reinterpret_cast<float*>(CpuAddress(r.k_exact));
      h.v_exact = reinterpret_cast<float*>(CpuAddress(r.v_exact));
    }
    out.push_back(h);
  }
  return out;
}

// True when `p` lies `bytes` bytes after `base`.
bool LiesAt(const void* p, const void* base, long bytes) {
  return static_cast<const uint8_t*>(p) == static_cast<const uint8_t*>(base) + bytes;
}

// True when row first + i lies i rows after row `first` in each of its planes and exact rows.
bool Follows(const std::vector<HostRow>& rows, size_t first, size_t i, const KvQ4Step& step) {
  const HostRow& r0 = rows[first];
  const HostRow& r = rows[first + i];
  if (r.stride != r0.stride) return false;
  const int d = step.head_dim;
  const long n = static_cast<long>(i) * r0.stride;
  const int key_halves = KeyParamHalves(step);
  const long exact = static_cast<long>(i) * (step.format.sink + step.format.window) * d * 4;
  return LiesAt(r.k_codes, r0.k_codes, n * KvQ4CodeBytes(d)) &&
         LiesAt(r.v_codes, r0.v_codes, n * KvQ4CodeBytes(d)) &&
         LiesAt(r.k_params, r0.k_params, n * key_halves * 2) &&
         LiesAt(r.v_params, r0.v_params, n * KvQ4ParamHalves(d) * 2) &&
         LiesAt(r.k_exact, r0.k_exact, exact) && LiesAt(r.v_exact, r0.v_exact, exact);
}

// The number of whole sequences from table index i (a sequence's first row) within the table
// whose rows lie as one contiguous cache.
int ContiguousSequences(const std::vector<HostRow>& rows, size_t i, int kvh,
                        const KvQ4Step& step) {
  int seqs = 0;
  while ((seqs + 1) * static_cast<size_t>(kvh) + i <= rows.size()) {
    bool follows = true;
    for (int j = seqs * kvh; j < (seqs + 1) * kvh && follows; ++j) {
      follows = Follows(rows, i, static_cast<size_t>(j), step);
    }
    if (!follows) break;
    ++seqs;
  }
  return seqs;
}

}  // namespace

void CpuWriteKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan v_new,
                  std::span<const int> start, std::span<const KvQ4Row> rows, int row_begin) {
  const int kvh = step.num_kv_heads;
  const int d = step.head_dim;
  const int tokens = step.tokens;
  STRATA_CHECK(static_cast<int>(start.size()) == step.batch && row_begin >= 0 &&
               row_begin + static_cast<int64_t>(rows.size()) <= int64_t{step.batch} * kvh);
  const int64_t n = int64_t{step.batch} * tokens * kvh * d;
  const CpuActivations k_a(k_new, n), v_a(v_new, n);
  RunOnCpuStream(stream, [=, table = Resolve(step, rows),
                          first = std::vector<int>(start.begin(), start.end())] {
    thread_local std::vector<float> k_floats, v_floats;
    const float* k = k_a.Read(k_floats);
    const float* v = v_a.Read(v_floats);
    const KvQ4Format& f = step.format;
    const int first_slot = step.cache_len - tokens;
    const size_t head = static_cast<size_t>(d);
    // A row's tokens are gathered, then quantized each token of each head on its own (so the
    // codes are the same bits wherever the row lives).
    thread_local std::vector<float> gathered;
    gathered.resize(2 * static_cast<size_t>(tokens) * head);
    float* k_row = gathered.data();
    float* v_row = k_row + static_cast<size_t>(tokens) * head;
    for (size_t i = 0; i < table.size(); ++i) {
      const HostRow& row = table[i];
      const int r = row_begin + static_cast<int>(i);
      const int b = r / kvh, h = r % kvh;
      for (int t = 0; t < tokens; ++t) {
        const size_t src = ((static_cast<size_t>(b) * tokens + t) * kvh + h) * head;
        std::memcpy(k_row + t * head, k + src, head * sizeof(float));
        std::memcpy(v_row + t * head, v + src, head * sizeof(float));
      }
      const kc::Q4CacheShape s{1, 1, row.stride, d};
      if (f.keys_by_channel) {
        kc::WriteKeyGroupsByChannel(d, f.sink, f.window, first[static_cast<size_t>(b)],
                                    first_slot, tokens, k_row, d, row.k_exact, row.k_codes,
                                    row.k_params);
      } else {
        kc::WriteQ4Cache(s, k_row, tokens, first_slot, f.rotate_keys, row.k_codes, row.k_params);
      }
      kc::WriteQ4Cache(s, v_row, tokens, first_slot, false, row.v_codes, row.v_params);
      if (f.exact()) {
        kc::WriteExactRows(1, 1, d, f.sink, f.window, k_row, v_row, tokens, first_slot,
                           &first[static_cast<size_t>(b)], f.rotate_keys, row.k_exact,
                           row.v_exact);
      }
    }
  });
}

void CpuAttendKvQ4(Stream& stream, const KvQ4Step& step, DeviceSpan q_span,
                   std::span<const int> start, std::span<const KvQ4Row> rows, int row_begin,
                   DeviceSpan out_span) {
  const int kvh = step.num_kv_heads;
  STRATA_CHECK(step.tokens == 1 && static_cast<int>(start.size()) == step.batch &&
               row_begin >= 0 &&
               row_begin + static_cast<int64_t>(rows.size()) <= int64_t{step.batch} * kvh);
  const int64_t n = int64_t{step.batch} * step.num_heads * step.head_dim;
  const CpuActivations q_a(q_span, n), out_a(out_span, n);
  RunOnCpuStream(stream, [=, table = Resolve(step, rows),
                          first = std::vector<int>(start.begin(), start.end())] {
    // The heads these rows do not serve keep their values: `out` is read, not only written.
    thread_local std::vector<float> q_floats, out_floats;
    const float* q = q_a.Read(q_floats);
    float* out = out_a.Read(out_floats);
    const int group = step.num_heads / kvh;
    const int d = step.head_dim;
    const size_t seq_floats = static_cast<size_t>(step.num_heads) * d;
    kc::DecodeAttentionQ4Shape s;
    s.num_heads = step.num_heads;
    s.num_kv_heads = kvh;
    s.head_dim = d;
    s.cache_len = step.cache_len;
    s.scale = step.scale;
    s.keys_rotated = step.format.rotate_keys;
    s.keys_by_channel = step.format.keys_by_channel;
    size_t i = 0;
    while (i < table.size()) {
      const HostRow& row = table[i];
      const int r = row_begin + static_cast<int>(i);
      const int b = r / kvh;
      const kc::Q4CacheView k{row.k_codes, row.k_params};
      const kc::Q4CacheView v{row.v_codes, row.v_params};
      const kc::Q4ExactRows exact{step.format.sink, step.format.window, row.k_exact,
                                  row.v_exact};
      kc::DecodeAttentionQ4Shape one = s;
      one.max_len = row.stride;
      // A run of whole sequences laid out as one contiguous cache: one call.
      const int seqs = r % kvh == 0 ? ContiguousSequences(table, i, kvh, step) : 0;
      if (seqs > 0) {
        one.batch = seqs;
        kc::DecodeAttentionQ4(one, q + b * seq_floats, k, v, first.data() + b,
                              out + b * seq_floats, kc::Q4Isa::kAuto, &exact);
        i += static_cast<size_t>(seqs) * kvh;
        continue;
      }
      // One row: its KV head serves `group` consecutive query heads.
      one.batch = 1;
      one.num_heads = group;
      one.num_kv_heads = 1;
      const size_t at = b * seq_floats + static_cast<size_t>(r % kvh) * group * d;
      kc::DecodeAttentionQ4(one, q + at, k, v, first.data() + b, out + at, kc::Q4Isa::kAuto,
                            &exact);
      ++i;
    }
    out_a.Commit(out);
  });
}

void CpuFitKeySmoothing(Stream& stream, const KvQ4Step& step, DeviceSpan k_new,
                        std::span<const int> start, DeviceSpan mean_span, DeviceSpan scale_span) {
  const int kvh = step.num_kv_heads;
  const int d = step.head_dim;
  STRATA_CHECK(static_cast<int>(start.size()) == step.batch);
  const CpuActivations k_a(k_new, int64_t{step.batch} * step.tokens * kvh * d);
  float* mean = CpuFloats(mean_span, int64_t{step.batch} * kvh * d);
  float* scale = CpuFloats(scale_span, int64_t{step.batch} * kvh * d);
  RunOnCpuStream(stream, [=, first = std::vector<int>(start.begin(), start.end())] {
    thread_local std::vector<float> k_floats;
    const float* k = k_a.Read(k_floats);
    const int tokens = step.tokens;
    const long stride = static_cast<long>(kvh) * d;
    for (int b = 0; b < step.batch; ++b) {
      // The sequence's real tokens: those at slots from start[b] on.
      const int first_real = std::clamp(
          first[static_cast<size_t>(b)] - (step.cache_len - tokens), 0, tokens);
      for (int h = 0; h < kvh; ++h) {
        const size_t at = static_cast<size_t>(b) * stride + static_cast<size_t>(h) * d;
        kc::FitKeySmoothing(k + (static_cast<long>(b) * tokens + first_real) * stride + h * d,
                            tokens - first_real, stride, d, mean + at, scale + at);
      }
    }
  });
}

void CpuSmoothKeys(Stream& stream, const KvQ4Step& step, DeviceSpan k_new, DeviceSpan mean_span,
                   DeviceSpan scale_span) {
  const int kvh = step.num_kv_heads;
  const int d = step.head_dim;
  const CpuActivations k_a(k_new, int64_t{step.batch} * step.tokens * kvh * d);
  const float* mean = CpuFloats(mean_span, int64_t{step.batch} * kvh * d);
  const float* scale = CpuFloats(scale_span, int64_t{step.batch} * kvh * d);
  RunOnCpuStream(stream, [=] {
    thread_local std::vector<float> k_floats;
    float* k = k_a.Read(k_floats);
    const long stride = static_cast<long>(kvh) * d;
    for (long row = 0; row < static_cast<long>(step.batch) * step.tokens; ++row) {
      const long at = row / step.tokens * stride;
      for (int h = 0; h < kvh; ++h) {
        float* key = k + row * stride + h * d;
        kc::SmoothKey(key, mean + at + h * d, scale + at + h * d, d, key);
      }
    }
    k_a.Commit(k);
  });
}

void CpuScaleQueries(Stream& stream, const KvQ4Step& step, DeviceSpan q_span,
                     DeviceSpan scale_span) {
  const int kvh = step.num_kv_heads;
  const int d = step.head_dim;
  const CpuActivations q_a(q_span, int64_t{step.batch} * step.num_heads * d);
  const float* scale = CpuFloats(scale_span, int64_t{step.batch} * kvh * d);
  RunOnCpuStream(stream, [=] {
    thread_local std::vector<float> q_floats;
    float* q = q_a.Read(q_floats);
    const int group = step.num_heads / kvh;
    for (long b = 0; b < step.batch; ++b) {
      for (int h = 0; h < step.num_heads; ++h) {
        float* query = q + (b * step.num_heads + h) * d;
        kc::ScaleQuery(query, scale + (b * kvh + h / group) * d, d, query);
      }
    }
    q_a.Commit(q);
  });
}

}  // namespace strata
