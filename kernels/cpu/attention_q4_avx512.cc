// The AVX-512 path of DecodeAttentionQ4 (see attention_q4.h). Compiled for AVX-512 by function
// attributes only, so the library still runs on CPUs without it; attention_q4.cc dispatches here
// after checking the CPU at run time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_q4_paths.h"

// GCC 12's AVX-512 intrinsics build their pass-through operand from _mm512_undefined_*(), which
// -W(maybe-)uninitialized flag once inlined here (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define STRATA_AVX512 __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,fma,f16c")))
#define STRATA_AVX512_INLINE STRATA_AVX512 __attribute__((always_inline)) inline

namespace strata::kernels::cpu::q4 {
namespace {

// e^x for x <= 0 (Cephes expf: about 1 ulp), flushing below e^-87 towards zero.
STRATA_AVX512_INLINE __m512 Exp(__m512 x) {
  x = _mm512_max_ps(x, _mm512_set1_ps(-87.0f));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(x, _mm512_set1_ps(1.44269504088896341f)),
                                        _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(0.693359375f), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(-2.12194440e-4f), r);
  __m512 p = _mm512_set1_ps(1.9875691500e-4f);
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.3981999507e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(8.3334519073e-3f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(4.1665795894e-2f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(1.6666665459e-1f));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(5.0000001201e-1f));
  const __m512 y = _mm512_fmadd_ps(p, _mm512_mul_ps(r, r), _mm512_add_ps(r, _mm512_set1_ps(1.0f)));
  return _mm512_scalef_ps(y, n);
}

// Lane t of the result = sum of the 16 lanes of v[t * stride]: a transpose-and-add tree, ~3 ops a
// vector.
STRATA_AVX512_INLINE __m512 Reduce16(const __m512* v, int stride) {
  __m512 t[8], u[4];
  for (int i = 0; i < 8; ++i) {
    const __m512 a = v[2 * i * stride], b = v[(2 * i + 1) * stride];
    t[i] = _mm512_add_ps(_mm512_unpacklo_ps(a, b), _mm512_unpackhi_ps(a, b));
  }
  for (int i = 0; i < 4; ++i) {  // 128-bit lane L of u[i]: lane-L sums of v[4i .. 4i+3]
    const __m512d a = _mm512_castps_pd(t[2 * i]);
    const __m512d b = _mm512_castps_pd(t[2 * i + 1]);
    u[i] = _mm512_add_ps(_mm512_castpd_ps(_mm512_unpacklo_pd(a, b)),
                         _mm512_castpd_ps(_mm512_unpackhi_pd(a, b)));
  }
  const __m512 w0 = _mm512_add_ps(_mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(u[0], u[1], _MM_SHUFFLE(3, 2, 3, 2)));
  const __m512 w1 = _mm512_add_ps(_mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(1, 0, 1, 0)),
                                  _mm512_shuffle_f32x4(u[2], u[3], _MM_SHUFFLE(3, 2, 3, 2)));
  return _mm512_add_ps(_mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(2, 0, 2, 0)),
                       _mm512_shuffle_f32x4(w0, w1, _MM_SHUFFLE(3, 1, 3, 1)));
}

// The 64 codes of one group as floats in element order: byte j holds elements j and j + 32.
struct Codes64 {
  __m512 n[4];
};

STRATA_AVX512_INLINE Codes64 Unpack64(const uint8_t* c) {
  const __m512i low = _mm512_set1_epi32(0xF);
  const __m512i b0 = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c)));
  const __m512i b1 =
      _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(c + 16)));
  return {
      {_mm512_cvtepi32_ps(_mm512_and_si512(b0, low)), _mm512_cvtepi32_ps(_mm512_and_si512(b1, low)),
       _mm512_cvtepi32_ps(_mm512_srli_epi32(b0, 4)), _mm512_cvtepi32_ps(_mm512_srli_epi32(b1, 4))}};
}

// out[g][0][t] = scale and out[g][1][t] = minimum of group g for the tile's tokens (0 past n).
STRATA_AVX512 void UnpackParams(const uint16_t* params, __mmask16 valid, int groups, float* out) {
  const __m512i index =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(groups));
  for (int g = 0; g < groups; ++g) {
    // One 32-bit word per token and group: scale in the low half, minimum in the high half.
    const void* base = params + 2 * g;
    const __m512i pairs =
        groups == 1 ? _mm512_maskz_loadu_epi32(valid, base)
                    : _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), valid, index, base, 4);
    _mm512_storeu_ps(out + 2 * g * kTile, _mm512_cvtph_ps(_mm512_cvtepi32_epi16(pairs)));
    _mm512_storeu_ps(out + (2 * g + 1) * kTile,
                     _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(pairs, 16))));
  }
}

// part[g][t][h] = the 16 lane-wise partial products q_h·n of token t, group g: each key row is
// unpacked once for all the query heads. Rows n.. of the tile are zeroed.
STRATA_AVX512 void TileDots(const Work& w, const uint8_t* codes, int n, __m512* part) {
  const int d = w.head_dim, groups = d / 64;
  for (int t = 0; t < kTile; ++t) {
    for (int g = 0; g < groups; ++g) {
      if (t >= n) {
        for (int h = 0; h < w.heads; ++h) part[(g * kTile + t) * w.heads + h] = _mm512_setzero_ps();
        continue;
      }
      const Codes64 k = Unpack64(codes + static_cast<long>(t) * (d / 2) + 32 * g);
      for (int h = 0; h < w.heads; ++h) {
        const float* q = w.q + h * d + 64 * g;
        // Two short chains rather than one long one: heads overlap better.
        const __m512 a = _mm512_fmadd_ps(_mm512_loadu_ps(q + 32), k.n[2],
                                         _mm512_mul_ps(_mm512_loadu_ps(q), k.n[0]));
        const __m512 b = _mm512_fmadd_ps(_mm512_loadu_ps(q + 48), k.n[3],
                                         _mm512_mul_ps(_mm512_loadu_ps(q + 16), k.n[1]));
        part[(g * kTile + t) * w.heads + h] = _mm512_add_ps(a, b);
      }
    }
  }
}

// For H query heads: o_h[64 of group g] += sum over the tile's n tokens of wt_h[t] * n_t, the
// value codes of group g (each row unpacked once for the H heads). A single head gets two
// accumulator sets (even and odd tokens) to keep its FMA chains short; more heads already have
// enough independent chains, and two sets of them would not fit in the 32 registers.
template <int H>
STRATA_AVX512 void TileValues(const uint8_t* codes, int n, int d, const float* wt, int wt_stride,
                              float* o) {
  constexpr int kSets = H == 1 ? 2 : 1;
  __m512 a[kSets][H][4];
  for (int s = 0; s < kSets; ++s) {
    for (int h = 0; h < H; ++h) {
      for (int i = 0; i < 4; ++i) a[s][h][i] = _mm512_setzero_ps();
    }
  }
  for (int t = 0; t < n; ++t) {
    const Codes64 v = Unpack64(codes + static_cast<long>(t) * (d / 2));
    const int s = kSets == 2 ? (t & 1) : 0;
    for (int h = 0; h < H; ++h) {
      const __m512 weight = _mm512_set1_ps(wt[h * wt_stride + t]);
      for (int i = 0; i < 4; ++i) a[s][h][i] = _mm512_fmadd_ps(weight, v.n[i], a[s][h][i]);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) {
      __m512 sum = a[0][h][i];
      if (kSets == 2) sum = _mm512_add_ps(sum, a[kSets - 1][h][i]);
      float* dst = o + h * d + 16 * i;
      _mm512_storeu_ps(dst, _mm512_add_ps(_mm512_loadu_ps(dst), sum));
    }
  }
}

// Asks for the codes and params of the tile 128 tokens ahead of t0: with the hardware prefetcher
// alone the core waits on DRAM (this gained about 20% at one query head per KV head here).
STRATA_AVX512_INLINE void PrefetchAhead(const uint8_t* codes, const uint16_t* params, int t0,
                                        int len, int d) {
  constexpr int kPrefetchTiles = 8;
  const int t = t0 + kPrefetchTiles * kTile;
  if (t >= len) return;
  const char* c = reinterpret_cast<const char*>(codes + static_cast<long>(t) * (d / 2));
  for (int i = 0; i < kTile * d / 2; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(params + static_cast<long>(t) * (d / 32)),
               _MM_HINT_T0);
}

}  // namespace

// Three passes over the work item: scores from the key codes, softmax over the scores, then the
// value codes weighted by the probabilities. Each pass streams its plane once.
STRATA_AVX512 void AttendAvx512(const Work& w) {
  const int d = w.head_dim, groups = d / 64, heads = w.heads;
  const Layout l = ScratchLayout(heads, d, w.len);
  auto* part = reinterpret_cast<__m512*>(w.scratch + l.part);  // [groups, kTile, heads] vectors
  float* kparams = w.scratch + l.kparams;                      // [groups, 2, kTile]
  float* vparams = w.scratch + l.vparams;
  float* wt = w.scratch + l.weights;     // [groups, heads, kTile]: prob * value scale
  float* scores = w.scratch + l.scores;  // [heads, l.stride], then probabilities
  auto* sums = reinterpret_cast<__m512*>(w.scratch + l.sums);  // [heads, 2 + groups] vectors

  for (int h = 0; h < heads; ++h) sums[h * (2 + groups)] = _mm512_set1_ps(-INFINITY);
  for (int t0 = 0; t0 < w.len; t0 += kTile) {  // scores = scale * (q·n) + minimum * Σq per group
    PrefetchAhead(w.k_codes, w.k_params, t0, w.len, d);
    const int n = std::min(kTile, w.len - t0);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    UnpackParams(w.k_params + static_cast<long>(t0) * 2 * groups, valid, groups, kparams);
    TileDots(w, w.k_codes + static_cast<long>(t0) * (d / 2), n, part);
    for (int h = 0; h < heads; ++h) {
      __m512 score = _mm512_setzero_ps();
      for (int g = 0; g < groups; ++g) {
        score = _mm512_fmadd_ps(_mm512_loadu_ps(kparams + 2 * g * kTile),
                                Reduce16(part + g * kTile * heads + h, heads), score);
        score = _mm512_fmadd_ps(_mm512_loadu_ps(kparams + (2 * g + 1) * kTile),
                                _mm512_set1_ps(w.qsum[h * groups + g]), score);
      }
      _mm512_store_ps(scores + h * l.stride + t0, score);
      __m512& max = sums[h * (2 + groups)];
      max = _mm512_mask_max_ps(max, valid, max, score);
    }
  }
  for (int h = 0; h < heads; ++h) {  // probabilities, unnormalised; zero past the last token
    const __m512 max = _mm512_set1_ps(_mm512_reduce_max_ps(sums[h * (2 + groups)]));
    __m512 sum = _mm512_setzero_ps();
    for (int t0 = 0; t0 < w.len; t0 += kTile) {
      const __mmask16 valid = static_cast<__mmask16>((1u << std::min(kTile, w.len - t0)) - 1);
      float* s = scores + h * l.stride + t0;
      const __m512 p = _mm512_maskz_mov_ps(valid, Exp(_mm512_sub_ps(_mm512_load_ps(s), max)));
      _mm512_store_ps(s, p);
      sum = _mm512_add_ps(sum, p);
    }
    sums[h * (2 + groups)] = sum;
    for (int g = 0; g < groups; ++g) sums[h * (2 + groups) + 2 + g] = _mm512_setzero_ps();
  }
  std::memset(w.out, 0, sizeof(float) * heads * d);
  for (int t0 = 0; t0 < w.len; t0 += kTile) {  // out += p * (scale * n + minimum) per group
    PrefetchAhead(w.v_codes, w.v_params, t0, w.len, d);
    const int n = std::min(kTile, w.len - t0);
    const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
    UnpackParams(w.v_params + static_cast<long>(t0) * 2 * groups, valid, groups, vparams);
    for (int h = 0; h < heads; ++h) {
      const __m512 p = _mm512_load_ps(scores + h * l.stride + t0);
      for (int g = 0; g < groups; ++g) {
        _mm512_store_ps(wt + (g * heads + h) * kTile,
                        _mm512_mul_ps(p, _mm512_loadu_ps(vparams + 2 * g * kTile)));
        __m512& m = sums[h * (2 + groups) + 2 + g];  // the minimum's share, summed at the end
        m = _mm512_fmadd_ps(p, _mm512_loadu_ps(vparams + (2 * g + 1) * kTile), m);
      }
    }
    const uint8_t* codes = w.v_codes + static_cast<long>(t0) * (d / 2);
    for (int g = 0; g < groups; ++g) {
      for (int h = 0; h < heads; h += 4) {
        const float* wg = wt + (g * heads + h) * kTile;
        float* o = w.out + h * d + 64 * g;
        switch (std::min(4, heads - h)) {
          case 1:
            TileValues<1>(codes + 32 * g, n, d, wg, kTile, o);
            break;
          case 2:
            TileValues<2>(codes + 32 * g, n, d, wg, kTile, o);
            break;
          case 3:
            TileValues<3>(codes + 32 * g, n, d, wg, kTile, o);
            break;
          default:
            TileValues<4>(codes + 32 * g, n, d, wg, kTile, o);
            break;
        }
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    const __m512 inv = _mm512_set1_ps(1.0f / _mm512_reduce_add_ps(sums[h * (2 + groups)]));
    for (int g = 0; g < groups; ++g) {
      const __m512 m = _mm512_set1_ps(_mm512_reduce_add_ps(sums[h * (2 + groups) + 2 + g]));
      float* o = w.out + h * d + 64 * g;
      for (int i = 0; i < 64; i += 16) {
        _mm512_storeu_ps(o + i, _mm512_mul_ps(_mm512_add_ps(_mm512_loadu_ps(o + i), m), inv));
      }
    }
  }
}

}  // namespace strata::kernels::cpu::q4
