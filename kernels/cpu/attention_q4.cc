#include "kernels/cpu/attention_q4.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/cpu/hadamard.h"
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

}  // namespace

void DecodeAttentionQ4(const DecodeAttentionQ4Shape& s, const float* q, Q4CacheView k,
                       Q4CacheView v, const int* start, float* out, Q4Isa isa) {
  const int d = s.head_dim;
  const int heads = s.num_heads / s.num_kv_heads;
  const int groups = d / Q4Group(d);
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
  // Work items are (sequence, KV head) pairs. With fewer of them than threads, each is split into
  // `chunks` token ranges (flash-decoding across threads), merged by their log-sum-exp.
  const long items = static_cast<long>(s.batch) * s.num_kv_heads;
  const long threads = CpuThreads();
  int chunks = 1;
  if (items < threads) {
    const long wanted = (threads + items - 1) / items;
    chunks = static_cast<int>(std::max(1L, std::min<long>(wanted, s.cache_len / kMinSplitTokens)));
  }
  const int span_max = (s.cache_len + chunks - 1) / chunks;
  std::vector<float> part, lse;
  if (chunks > 1) {
    part.resize(static_cast<size_t>(items) * chunks * heads * d);
    lse.resize(static_cast<size_t>(items) * chunks * heads);
  }
#pragma omp parallel
  {
    std::vector<float> qs(static_cast<size_t>(heads) * d);
    std::vector<float> qsum(static_cast<size_t>(heads) * groups);
    std::vector<q4::ScratchLine> scratch(q4::ScratchLayout(heads, d, span_max).total / 16);
#pragma omp for schedule(dynamic, 1)
    for (long j = 0; j < items * chunks; ++j) {
      const long i = j / chunks;
      const int c = static_cast<int>(j % chunks);
      const int b = static_cast<int>(i / s.num_kv_heads);
      const long head0 = i * heads;  // == b * num_heads + kv_head * heads
      float* o = chunks == 1 ? out + head0 * d : part.data() + j * heads * d;
      float* range_lse = chunks == 1 ? nullptr : lse.data() + j * heads;
      const int first = start[b];
      const int span = (s.cache_len - first + chunks - 1) / chunks;
      const int lo = first + c * span, hi = std::min(s.cache_len, lo + span);
      if (hi <= lo) {  // all padding, or an empty range of a short sequence
        std::memset(o, 0, sizeof(float) * heads * d);
        if (range_lse != nullptr) std::fill(range_lse, range_lse + heads, -INFINITY);
        continue;
      }
      std::memcpy(qs.data(), q + head0 * d, sizeof(float) * heads * d);
      if (s.keys_rotated) HadamardRotate(qs.data(), heads, d);
      for (float& x : qs) x *= s.scale;
      for (int g = 0; g < heads * groups; ++g) {
        const float* x = qs.data() + static_cast<long>(g) * (d / groups);
        qsum[static_cast<size_t>(g)] = std::accumulate(x, x + d / groups, 0.0f);
      }
      const long row = i * s.max_len + lo;
      q4::Work w;
      w.heads = heads;
      w.head_dim = d;
      w.len = hi - lo;
      w.q = qs.data();
      w.qsum = qsum.data();
      w.k_codes = k.codes + row * Q4CodeBytes(d);
      w.k_params = k.params + row * Q4ParamHalves(d);
      w.v_codes = v.codes + row * Q4CodeBytes(d);
      w.v_params = v.params + row * Q4ParamHalves(d);
      w.out = o;
      w.lse = range_lse;
      w.scratch = scratch.data()->f;
      attend(w);
    }
  }
  if (chunks == 1) return;
  for (long i = 0; i < items; ++i) {
    const int b = static_cast<int>(i / s.num_kv_heads);
    float* o = out + i * heads * d;
    if (s.cache_len - 1 < start[b]) {
      std::memset(o, 0, sizeof(float) * heads * d);
      continue;
    }
    MergeChunks(part.data() + i * chunks * heads * d, lse.data() + i * chunks * heads, chunks,
                heads, d, o);
  }
}

}  // namespace strata::kernels::cpu
