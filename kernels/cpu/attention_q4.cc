#include "kernels/cpu/attention_q4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/cpu/hadamard.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/threads.h"
#include "kernels/kv_q4_format.h"

namespace strata::kernels::cpu {

bool Q4IsaAvailable(Q4Isa isa) {
  switch (isa) {
    case Q4Isa::kAuto:
    case Q4Isa::kScalar:
      return true;
    case Q4Isa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") &&
             __builtin_cpu_supports("f16c");
    case Q4Isa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
             __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
             __builtin_cpu_supports("avx512vbmi") && __builtin_cpu_supports("avx512vnni");
  }
  return false;
}

Q4Isa ResolveQ4Isa(Q4Isa isa, int head_dim) {
  if (head_dim % 64 != 0) return Q4Isa::kScalar;
  if (isa != Q4Isa::kAuto) return isa;
  if (Q4IsaAvailable(Q4Isa::kAvx512)) return Q4Isa::kAvx512;
  if (Q4IsaAvailable(Q4Isa::kAvx2)) return Q4Isa::kAvx2;
  return Q4Isa::kScalar;
}

const char* Q4IsaName(Q4Isa isa) {
  switch (isa) {
    case Q4Isa::kAuto:
      return "auto";
    case Q4Isa::kScalar:
      return "scalar";
    case Q4Isa::kAvx2:
      return "avx2";
    case Q4Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

// The fewest tokens a thread takes from one (sequence, KV head) when it is split.
constexpr int kMinSplitTokens = 1024;

// Merges the `chunks` partial outputs of one work item (each normalized over its token range,
// with that range's log Σ exp(score) per head) into out[heads, d].
void MergeChunks(const float* part, const float* lse, int chunks, int heads, int d, float* out) {
  for (int h = 0; h < heads; ++h) {
    float top = -INFINITY;
    for (int c = 0; c < chunks; ++c) top = std::max(top, lse[c * heads + h]);
    float* o = out + static_cast<long>(h) * d;
    std::fill(o, o + d, 0.0f);
    float total = 0.0f;
    for (int c = 0; c < chunks; ++c) {
      if (lse[c * heads + h] == -INFINITY) continue;  // an empty range
      const float weight = std::exp(lse[c * heads + h] - top);
      const float* x = part + (static_cast<long>(c) * heads + h) * d;
      for (int i = 0; i < d; ++i) o[i] += weight * x[i];
      total += weight;
    }
    for (int i = 0; i < d; ++i) o[i] /= total;
  }
}

// The exact part of work item `i` (sequence b): softmax attention of qs over the rows of
// `exact` for the sequence's exact tokens below cache_len, normalized into out[heads, d] with
// its log Σ exp(score) per head in lse[heads] (-inf, and a zero output, when there are none).
void AttendExact(const DecodeAttentionQ4Shape& s, const Q4ExactRows& exact, long i, int first,
                 int window_begin, const float* qs, int heads, float* scores, float* out,
                 float* lse) {
  const int d = s.head_dim;
  const int rows = exact.sink + exact.window;
  const long base = i * rows * d;
  const int sink_len = std::clamp(s.cache_len - first, 0, exact.sink);
  const int len = sink_len + std::max(0, s.cache_len - window_begin);
  std::memset(out, 0, sizeof(float) * heads * d);
  if (len == 0) {
    std::fill(lse, lse + heads, -INFINITY);
    return;
  }
  // The row of the t-th exact token: the sink's in order, then the window's.
  auto row_of = [&](int t) {
    if (t < sink_len) return base + static_cast<long>(t) * d;
    const int token = window_begin + (t - sink_len) - first;
    return base + static_cast<long>(exact.sink + token % exact.window) * d;
  };
  for (int h = 0; h < heads; ++h) {
    const float* qh = qs + static_cast<long>(h) * d;
    float top = -INFINITY;
    for (int t = 0; t < len; ++t) {
      const float* key = exact.keys + row_of(t);
      float dot = 0.0f;
      for (int x = 0; x < d; ++x) dot += qh[x] * key[x];
      scores[t] = dot;
      top = std::max(top, dot);
    }
    float sum = 0.0f;
    float* o = out + static_cast<long>(h) * d;
    for (int t = 0; t < len; ++t) {
      const float p = std::exp(scores[t] - top);
      sum += p;
      const float* value = exact.values + row_of(t);
      for (int x = 0; x < d; ++x) o[x] += p * value[x];
    }
    for (int x = 0; x < d; ++x) o[x] /= sum;
    lse[h] = top + std::log(sum);
  }
}

// Keys by channel on the AVX-512 path: work `w` whose token 0 is token `phase` of its key group.
// The path's 16-token tiles must not span two key groups (Work::key_phase), so the item starts at
// the first token of its tile instead, phase % 16 tokens earlier in the same key group (slots of
// the same sequence row), and leaves those out (Work::skip).
void AttendChannelAvx512(const q4::Work& w, int phase) {
  const int d = w.head_dim, skip = phase % q4::kTile;
  q4::Work tiled = w;
  tiled.len = w.len + skip;
  tiled.skip = skip;
  tiled.key_phase = phase - skip;
  tiled.k_codes = w.k_codes - static_cast<long>(skip) * Q4CodeBytes(d);
  tiled.k_params = w.k_params - static_cast<long>(skip) * Q4ChannelParamHalves(d);
  tiled.v_codes = w.v_codes - static_cast<long>(skip) * Q4CodeBytes(d);
  tiled.v_params = w.v_params - static_cast<long>(skip) * Q4ParamHalves(d);
  q4::AttendAvx512(tiled);
}

}  // namespace

void DecodeAttentionQ4(const DecodeAttentionQ4Shape& s, const float* q, Q4CacheView k,
                       Q4CacheView v, const int* start, float* out, Q4Isa isa,
                       const Q4ExactRows* exact) {
  const int d = s.head_dim;
  const int heads = s.num_heads / s.num_kv_heads;
  const int groups = Q4Groups(d);
  void (*attend)(const q4::Work&) = q4::AttendScalar;
  switch (ResolveQ4Isa(isa, d)) {
    case Q4Isa::kAvx2:
      attend = q4::AttendAvx2;
      break;
    case Q4Isa::kAvx512:
      attend = q4::AttendAvx512;
      break;
    default:
      break;
  }
  const bool has_exact = exact != nullptr && exact->sink + exact->window > 0;
  // Work items are (sequence, KV head) pairs. With fewer of them than threads, each is split into
  // `chunks` token ranges (flash-decoding across threads); with exact tokens, one more part
  // attends to those. The parts are merged by their log-sum-exp.
  const long items = static_cast<long>(s.batch) * s.num_kv_heads;
  const long threads = CpuThreads();
  int chunks = 1;
  if (items < threads) {
    const long wanted = (threads + items - 1) / items;
    chunks = static_cast<int>(std::max(1L, std::min<long>(wanted, s.cache_len / kMinSplitTokens)));
  }
  const int parts = chunks + (has_exact ? 1 : 0);
  const int span_max = (s.cache_len + chunks - 1) / chunks;
  std::vector<float> part, lse;
  if (parts > 1) {
    part.resize(static_cast<size_t>(items) * parts * heads * d);
    lse.resize(static_cast<size_t>(items) * parts * heads);
  }
#pragma omp parallel
  {
    std::vector<float> qs(static_cast<size_t>(heads) * d);
    std::vector<float> qsum(static_cast<size_t>(heads) * groups);
    // AttendChannelAvx512 lengthens an item by up to kTile - 1 tokens.
    std::vector<q4::ScratchLine> scratch(
        q4::ScratchLayout(heads, d, span_max + q4::kTile).total / 16);
    std::vector<float> scores;
    // Guided: each thread takes contiguous runs of items, whose caches lie back to back in
    // memory, so that its hardware prefetcher keeps one stream; one item at a time made two
    // threads interleave items, each stream restarting at every item (docs/PERFORMANCE.md:
    // +16% on two cores at 512-token contexts). The shrinking runs balance the end.
#pragma omp for schedule(guided)
    for (long j = 0; j < items * parts; ++j) {
      const long i = j / parts;
      const int c = static_cast<int>(j % parts);
      const int b = static_cast<int>(i / s.num_kv_heads);
      const long head0 = i * heads;  // == b * num_heads + kv_head * heads
      float* o = parts == 1 ? out + head0 * d : part.data() + j * heads * d;
      float* range_lse = parts == 1 ? nullptr : lse.data() + j * heads;
      // The 4-bit slots: all of the sequence's, or those between its exact sink and window.
      const int first = start[b];
      int quant_lo = first, quant_hi = s.cache_len;
      if (has_exact) {
        quant_lo = std::min(first + exact->sink, s.cache_len);
        quant_hi = std::max(quant_lo, s.cache_len - exact->window);
      }
      const int span = (quant_hi - quant_lo + chunks - 1) / chunks;
      const int lo = quant_lo + c * span, hi = std::min(quant_hi, lo + span);
      if (c < chunks && hi <= lo) {  // all padding, or an empty range
        std::memset(o, 0, sizeof(float) * heads * d);
        if (range_lse != nullptr) std::fill(range_lse, range_lse + heads, -INFINITY);
        continue;
      }
      std::memcpy(qs.data(), q + head0 * d, sizeof(float) * heads * d);
      if (s.keys_rotated) HadamardRotate(qs.data(), heads, d);
      for (float& x : qs) x *= s.scale;
      if (c == chunks) {
        scores.resize(static_cast<size_t>(exact->sink + exact->window));
        AttendExact(s, *exact, i, first, quant_hi, qs.data(), heads, scores.data(), o, range_lse);
        continue;
      }
      for (int h = 0; h < heads; ++h) {
        for (int g = 0; g < groups; ++g) {
          const float* x = qs.data() + static_cast<long>(h) * d + g * kQ4MaxGroup;
          qsum[static_cast<size_t>(h) * groups + g] =
              std::accumulate(x, x + Q4GroupSize(d, g), 0.0f);
        }
      }
      const long row = i * s.max_len + lo;
      q4::Work w;
      w.heads = heads;
      w.head_dim = d;
      w.len = hi - lo;
      w.q = qs.data();
      w.qsum = qsum.data();
      w.k_codes = k.codes + row * Q4CodeBytes(d);
      w.k_params =
          k.params + row * (s.keys_by_channel ? Q4ChannelParamHalves(d) : Q4ParamHalves(d));
      w.v_codes = v.codes + row * Q4CodeBytes(d);
      w.v_params = v.params + row * Q4ParamHalves(d);
      w.out = o;
      w.lse = range_lse;
      w.scratch = scratch.data()->f;
      if (s.keys_by_channel && attend == q4::AttendAvx512) {
        AttendChannelAvx512(w, (lo - first) % kQ4ChannelGroup);
      } else {
        if (s.keys_by_channel) w.key_phase = (lo - first) % kQ4ChannelGroup;
        attend(w);
      }
    }
  }
  if (parts == 1) return;
  for (long i = 0; i < items; ++i) {
    const int b = static_cast<int>(i / s.num_kv_heads);
    float* o = out + i * heads * d;
    if (s.cache_len - 1 < start[b]) {
      std::memset(o, 0, sizeof(float) * heads * d);
      continue;
    }
    MergeChunks(part.data() + i * parts * heads * d, lse.data() + i * parts * heads, parts,
                heads, d, o);
  }
}

}  // namespace strata::kernels::cpu
