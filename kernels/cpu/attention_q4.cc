#include "kernels/cpu/attention_q4.h"

#include <cstring>
#include <numeric>
#include <vector>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/cpu/hadamard.h"
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
             __builtin_cpu_supports("avx512vbmi");
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
  const long work = static_cast<long>(s.batch) * s.num_kv_heads;
#pragma omp parallel
  {
    std::vector<float> qs(static_cast<size_t>(heads) * d);
    std::vector<float> qsum(static_cast<size_t>(heads) * groups);
    std::vector<q4::ScratchLine> scratch(q4::ScratchLayout(heads, d, s.cache_len).total / 16);
#pragma omp for schedule(dynamic, 1)
    for (long i = 0; i < work; ++i) {
      const int b = static_cast<int>(i / s.num_kv_heads);
      const long head0 = i * heads;  // == b * num_heads + kv_head * heads
      float* o = out + head0 * d;
      const int first = start[b];
      if (s.cache_len - 1 < first) {
        std::memset(o, 0, sizeof(float) * heads * d);
        continue;
      }
      std::memcpy(qs.data(), q + head0 * d, sizeof(float) * heads * d);
      if (s.keys_rotated) HadamardRotate(qs.data(), heads, d);
      for (float& x : qs) x *= s.scale;
      for (int j = 0; j < heads * groups; ++j) {
        const float* x = qs.data() + static_cast<long>(j) * (d / groups);
        qsum[static_cast<size_t>(j)] = std::accumulate(x, x + d / groups, 0.0f);
      }
      const long row = i * s.max_len + first;
      q4::Work w;
      w.heads = heads;
      w.head_dim = d;
      w.len = s.cache_len - first;
      w.q = qs.data();
      w.qsum = qsum.data();
      w.k_codes = k.codes + row * Q4CodeBytes(d);
      w.k_params = k.params + row * Q4ParamHalves(d);
      w.v_codes = v.codes + row * Q4CodeBytes(d);
      w.v_params = v.params + row * Q4ParamHalves(d);
      w.out = o;
      w.scratch = scratch.data()->f;
      attend(w);
    }
  }
}

}  // namespace strata::kernels::cpu
