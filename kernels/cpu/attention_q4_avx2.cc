// The AVX2 + FMA path of DecodeAttentionQ4 (see attention_q4.h): the AVX-512 path's algorithm on
// 8-wide vectors, with tiles of 8 tokens. Compiled for AVX2 by function attributes only;
// attention_q4.cc dispatches here after checking the CPU at run time.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_q4_paths.h"
#include "kernels/kv_q4_format.h"

#define STRATA_AVX2 __attribute__((target("avx2,fma,f16c")))
#define STRATA_AVX2_INLINE STRATA_AVX2 __attribute__((always_inline)) inline

namespace strata::kernels::cpu::q4 {
namespace {

constexpr int kTile8 = 8;  // tokens per tile here (<= kTile, so the scratch fits)

// e^x for x <= 0 (Cephes expf: about 1 ulp), flushing below e^-87 towards zero.
STRATA_AVX2_INLINE __m256 Exp(__m256 x) {
  x = _mm256_max_ps(x, _mm256_set1_ps(-87.0f));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  const __m256 y = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  // 2^n built in the exponent field; n >= -126 after the clamp above.
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

STRATA_AVX2_INLINE float Sum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  return _mm_cvtss_f32(_mm_add_ss(s, _mm_movehdup_ps(s)));
}

// Lane t of the result = sum of the 8 lanes of v[t].
STRATA_AVX2_INLINE __m256 Reduce8(const __m256* v) {
  __m256 t[4], u[2];
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm256_add_ps(_mm256_unpacklo_ps(v[2 * i], v[2 * i + 1]),
                         _mm256_unpackhi_ps(v[2 * i], v[2 * i + 1]));
  }
  for (int i = 0; i < 2; ++i) {
    const __m256d a = _mm256_castps_pd(t[2 * i]);
    const __m256d b = _mm256_castps_pd(t[2 * i + 1]);
    u[i] = _mm256_add_ps(_mm256_castpd_ps(_mm256_unpacklo_pd(a, b)),
                         _mm256_castpd_ps(_mm256_unpackhi_pd(a, b)));
  }
  return _mm256_add_ps(_mm256_permute2f128_ps(u[0], u[1], 0x20),
                       _mm256_permute2f128_ps(u[0], u[1], 0x31));
}

// The 64 codes of one group as floats in element order: byte j holds elements j and j + 32.
struct Codes64 {
  __m256 n[8];
};

STRATA_AVX2_INLINE Codes64 Unpack64(const uint8_t* c) {
  const __m256i low = _mm256_set1_epi32(0xF);
  Codes64 r;
  for (int j = 0; j < 4; ++j) {
    const __m256i b =
        _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * j)));
    r.n[j] = _mm256_cvtepi32_ps(_mm256_and_si256(b, low));
    r.n[j + 4] = _mm256_cvtepi32_ps(_mm256_srli_epi32(b, 4));
  }
  return r;
}

// out[g][0][t] = scale and out[g][1][t] = minimum of group g for the tile's tokens (0 past n).
STRATA_AVX2 void UnpackParams(const uint16_t* params, int n, int groups, float* out) {
  for (int g = 0; g < groups; ++g) {
    alignas(16) uint16_t scale[kTile8] = {}, minimum[kTile8] = {};
    for (int t = 0; t < n; ++t) {
      scale[t] = params[2 * (t * groups + g)];
      minimum[t] = params[2 * (t * groups + g) + 1];
    }
    _mm256_storeu_ps(out + 2 * g * kTile8,
                     _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(scale))));
    _mm256_storeu_ps(out + (2 * g + 1) * kTile8,
                     _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(minimum))));
  }
}

// part[h][g][t] = the 8 lane-wise partial products q_h·n of token t, group g, q_h read from
// qt[t] + h · head_dim (w.q, or the query of the token's key group): each key row is unpacked
// once for all the query heads. Rows n.. of the tile are zeroed.
STRATA_AVX2_INLINE void TileDots(const Work& w, const uint8_t* codes, int n, const float* const* qt,
                                 __m256* part) {
  const int d = w.head_dim, groups = d / 64;
  for (int t = 0; t < kTile8; ++t) {
    for (int g = 0; g < groups; ++g) {
      if (t >= n) {
        for (int h = 0; h < w.heads; ++h) part[(h * groups + g) * kTile8 + t] = _mm256_setzero_ps();
        continue;
      }
      const Codes64 k = Unpack64(codes + static_cast<long>(t) * (d / 2) + 32 * g);
      for (int h = 0; h < w.heads; ++h) {
        const float* q = qt[t] + h * d + 64 * g;
        __m256 a0 = _mm256_mul_ps(_mm256_loadu_ps(q), k.n[0]);
        __m256 a1 = _mm256_mul_ps(_mm256_loadu_ps(q + 8), k.n[1]);
        for (int i = 2; i < 8; i += 2) {
          a0 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * i), k.n[i], a0);
          a1 = _mm256_fmadd_ps(_mm256_loadu_ps(q + 8 * i + 8), k.n[i + 1], a1);
        }
        part[(h * groups + g) * kTile8 + t] = _mm256_add_ps(a0, a1);
      }
    }
  }
}

// For H query heads: o_h[32 elements of group g, from `half` * 32] += sum over the tile's n
// tokens of wt_h[t] * n_t (each row unpacked once for the H heads). Half a group at a time, so
// that the accumulators and codes fit in the 16 registers.
template <int H>
STRATA_AVX2 void TileValues(const uint8_t* codes, int half, int n, int d, const float* wt,
                            int wt_stride, float* o) {
  const __m256i low = _mm256_set1_epi32(0xF);
  const __m128i shift = _mm_cvtsi32_si128(4 * half);
  __m256 a[H][4];
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) a[h][i] = _mm256_setzero_ps();
  }
  for (int t = 0; t < n; ++t) {
    const uint8_t* c = codes + static_cast<long>(t) * (d / 2);
    __m256 v[4];
    for (int j = 0; j < 4; ++j) {  // byte j of a group holds elements j and j + 32
      const __m256i b =
          _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(c + 8 * j)));
      v[j] = _mm256_cvtepi32_ps(_mm256_and_si256(_mm256_srl_epi32(b, shift), low));
    }
    for (int h = 0; h < H; ++h) {
      const __m256 weight = _mm256_set1_ps(wt[h * wt_stride + t]);
      for (int i = 0; i < 4; ++i) a[h][i] = _mm256_fmadd_ps(weight, v[i], a[h][i]);
    }
  }
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < 4; ++i) {
      float* dst = o + h * d + 32 * half + 8 * i;
      _mm256_storeu_ps(dst, _mm256_add_ps(_mm256_loadu_ps(dst), a[h][i]));
    }
  }
}

// Asks for the codes and params (`halves` fp16 values per token) of the tile 128 tokens ahead of
// t0, as the AVX-512 path does.
STRATA_AVX2_INLINE void PrefetchAhead(const uint8_t* codes, const uint16_t* params, int halves,
                                      int t0, int len, int d) {
  const int t = t0 + 128;
  if (t >= len) return;
  const char* c = reinterpret_cast<const char*>(codes + static_cast<long>(t) * (d / 2));
  for (int i = 0; i < kTile8 * d / 2; i += 64) _mm_prefetch(c + i, _MM_HINT_T0);
  const char* p = reinterpret_cast<const char*>(params + static_cast<long>(t) * halves);
  for (int i = 0; i < kTile8 * halves * 2; i += 64) _mm_prefetch(p + i, _MM_HINT_T0);
}

// Keys by channel: the query of one key group, q' = q times the group's channel scales for every
// head (qg, [heads, d]), and q·minimums per head (bias), from the group's params (scale of channel
// c at 2c, minimum at 2c + 1). Then q'·n + bias is each of the group's scores. The params are
// widened once for all heads, into `widened` (scales, then minima; 2 · d floats).
STRATA_AVX2 void ChannelQuery(const Work& w, const uint16_t* params, float* widened, float* qg,
                              float* bias) {
  const int d = w.head_dim;
  float* scales = widened;
  float* minima = widened + d;
  for (int c = 0; c < d; c += 8) {
    // Channels c..c + 7 as {scale, minimum} pairs; even lanes are scales, odd ones minima.
    const __m256 a =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(params + 2 * c)));
    const __m256 b =
        _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(params + 2 * c + 8)));
    // Within each 128-bit lane: a's pairs 0-1 (2-3) then b's; the permute restores c order.
    const __m256 even = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(2, 0, 2, 0));
    const __m256 odd = _mm256_shuffle_ps(a, b, _MM_SHUFFLE(3, 1, 3, 1));
    _mm256_storeu_ps(scales + c, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(even),
                                                                        _MM_SHUFFLE(3, 1, 2, 0))));
    _mm256_storeu_ps(minima + c, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(odd),
                                                                        _MM_SHUFFLE(3, 1, 2, 0))));
  }
  for (int h = 0; h < w.heads; ++h) {
    const float* q = w.q + h * d;
    float* out = qg + h * d;
    __m256 dot = _mm256_setzero_ps();
    for (int c = 0; c < d; c += 8) {
      const __m256 x = _mm256_loadu_ps(q + c);
      _mm256_storeu_ps(out + c, _mm256_mul_ps(x, _mm256_loadu_ps(scales + c)));
      dot = _mm256_fmadd_ps(x, _mm256_loadu_ps(minima + c), dot);
    }
    bias[h] = Sum(dot);
  }
}

// Stores head h's scores of the tile at t0 and raises its running maximum (the first vector of
// its `sums`, see AttendAvx2) by those of the tile's tokens.
STRATA_AVX2_INLINE void StoreScore(const Work& w, const Layout& l, int h, int t0, __m256 score,
                                   float* scores) {
  _mm256_store_ps(scores + h * l.stride + t0, score);
  const __m256 valid = _mm256_castsi256_ps(
      _mm256_cmpgt_epi32(_mm256_set1_epi32(w.len - t0), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7)));
  auto* max = reinterpret_cast<__m256*>(w.scratch + l.sums + h * (2 + w.head_dim / 64) * 16);
  *max = _mm256_max_ps(*max, _mm256_blendv_ps(*max, score, valid));
}

// Keys by channel: scores[h][t] = q'·n + bias of token t's key group (ChannelQuery), for every
// token. A tile may straddle two groups; the queries of the last two groups sit in `chq` and
// `chbias` by the parity of their index (token 0's group is group 0).
STRATA_AVX2 void ChannelScores(const Work& w, const Layout& l, __m256* part, float* scores) {
  constexpr int kC = kQ4ChannelGroup;
  const int d = w.head_dim, groups = d / 64, heads = w.heads;
  const int group_halves = Q4ChannelParamHalves(d);
  float* qg[2] = {w.scratch + l.chq, w.scratch + l.chq + heads * d};
  float* widened = w.scratch + l.chq + 2 * heads * d;
  float* bias[2] = {w.scratch + l.chbias, w.scratch + l.chbias + (heads + 15) / 16 * 16};
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  int ready = -1;  // the last group whose query is in place
  for (int t0 = 0; t0 < w.len; t0 += kTile8) {
    PrefetchAhead(w.k_codes, w.k_params, group_halves, t0, w.len, d);
    const int n = std::min(kTile8, w.len - t0);
    const int first = (t0 + w.key_phase) / kC, last = (t0 + n - 1 + w.key_phase) / kC;
    while (ready < last) {
      ++ready;
      const uint16_t* p = w.k_params + (static_cast<long>(ready) * kC - w.key_phase) * group_halves;
      ChannelQuery(w, p, widened, qg[ready & 1], bias[ready & 1]);
    }
    // The tile's first `in_first` tokens are in group `first`, the rest in the next.
    const int in_first = std::min(n, (first + 1) * kC - w.key_phase - t0);
    const float* qt[kTile8];
    for (int t = 0; t < kTile8; ++t) qt[t] = qg[(t < in_first ? first : last) & 1];
    TileDots(w, w.k_codes + static_cast<long>(t0) * (d / 2), n, qt, part);
    const __m256 second =
        _mm256_castsi256_ps(_mm256_cmpgt_epi32(lane, _mm256_set1_epi32(in_first - 1)));
    for (int h = 0; h < heads; ++h) {
      __m256 score = _mm256_blendv_ps(_mm256_set1_ps(bias[first & 1][h]),
                                      _mm256_set1_ps(bias[last & 1][h]), second);
      for (int g = 0; g < groups; ++g) {
        score = _mm256_add_ps(score, Reduce8(part + (h * groups + g) * kTile8));
      }
      StoreScore(w, l, h, t0, score, scores);
    }
  }
}

}  // namespace

// Three passes over the work item, as in the AVX-512 path: scores from the key codes, softmax,
// then the value codes weighted by the probabilities.
STRATA_AVX2 void AttendAvx2(const Work& w) {
  const int d = w.head_dim, groups = d / 64, heads = w.heads;
  const Layout l = ScratchLayout(heads, d, w.len);
  auto* part = reinterpret_cast<__m256*>(w.scratch + l.part);  // [heads, groups, kTile8] vectors
  float* kparams = w.scratch + l.kparams;                      // [groups, 2, kTile8]
  float* vparams = w.scratch + l.vparams;
  float* wt = w.scratch + l.weights;     // [groups, heads, kTile8]: prob * value scale
  float* scores = w.scratch + l.scores;  // [heads, l.stride], then probabilities
  // Per head, 2 + groups vectors (one per 64-byte line): max, then sum, and the minimum's share.
  auto sums = [&](int h, int i) -> __m256& {
    return *reinterpret_cast<__m256*>(w.scratch + l.sums + (h * (2 + groups) + i) * 16);
  };
  const __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  auto valid = [&](int t0) STRATA_AVX2 {
    return _mm256_castsi256_ps(_mm256_cmpgt_epi32(_mm256_set1_epi32(w.len - t0), lane));
  };

  for (int h = 0; h < heads; ++h) sums(h, 0) = _mm256_set1_ps(-INFINITY);
  if (w.key_phase >= 0) {
    ChannelScores(w, l, part, scores);
  } else {
    const float* qt[kTile8];
    std::fill(qt, qt + kTile8, w.q);
    // scores = scale * (q·n) + minimum * Σq per group
    for (int t0 = 0; t0 < w.len; t0 += kTile8) {
      PrefetchAhead(w.k_codes, w.k_params, 2 * groups, t0, w.len, d);
      const int n = std::min(kTile8, w.len - t0);
      UnpackParams(w.k_params + static_cast<long>(t0) * 2 * groups, n, groups, kparams);
      TileDots(w, w.k_codes + static_cast<long>(t0) * (d / 2), n, qt, part);
      for (int h = 0; h < heads; ++h) {
        __m256 score = _mm256_setzero_ps();
        for (int g = 0; g < groups; ++g) {
          score = _mm256_fmadd_ps(_mm256_loadu_ps(kparams + 2 * g * kTile8),
                                  Reduce8(part + (h * groups + g) * kTile8), score);
          score = _mm256_fmadd_ps(_mm256_loadu_ps(kparams + (2 * g + 1) * kTile8),
                                  _mm256_set1_ps(w.qsum[h * groups + g]), score);
        }
        StoreScore(w, l, h, t0, score, scores);
      }
    }
  }
  for (int h = 0; h < heads; ++h) {  // probabilities, unnormalised; zero past the last token
    const __m256 m8 = sums(h, 0);
    __m128 m4 = _mm_max_ps(_mm256_castps256_ps128(m8), _mm256_extractf128_ps(m8, 1));
    m4 = _mm_max_ps(m4, _mm_movehl_ps(m4, m4));
    const float max_score = _mm_cvtss_f32(_mm_max_ss(m4, _mm_movehdup_ps(m4)));
    const __m256 max = _mm256_set1_ps(max_score);
    __m256 sum = _mm256_setzero_ps();
    for (int t0 = 0; t0 < w.len; t0 += kTile8) {
      float* s = scores + h * l.stride + t0;
      const __m256 p = _mm256_and_ps(valid(t0), Exp(_mm256_sub_ps(_mm256_load_ps(s), max)));
      _mm256_store_ps(s, p);
      sum = _mm256_add_ps(sum, p);
    }
    sums(h, 1) = sum;
    if (w.lse != nullptr) w.lse[h] = max_score + std::log(Sum(sum));
    for (int g = 0; g < groups; ++g) sums(h, 2 + g) = _mm256_setzero_ps();
  }
  std::memset(w.out, 0, sizeof(float) * heads * d);
  for (int t0 = 0; t0 < w.len; t0 += kTile8) {  // out += p * (scale * n + minimum) per group
    PrefetchAhead(w.v_codes, w.v_params, 2 * groups, t0, w.len, d);
    const int n = std::min(kTile8, w.len - t0);
    UnpackParams(w.v_params + static_cast<long>(t0) * 2 * groups, n, groups, vparams);
    for (int h = 0; h < heads; ++h) {
      const __m256 p = _mm256_load_ps(scores + h * l.stride + t0);
      for (int g = 0; g < groups; ++g) {
        _mm256_storeu_ps(wt + (g * heads + h) * kTile8,
                         _mm256_mul_ps(p, _mm256_loadu_ps(vparams + 2 * g * kTile8)));
        sums(h, 2 + g) =
            _mm256_fmadd_ps(p, _mm256_loadu_ps(vparams + (2 * g + 1) * kTile8), sums(h, 2 + g));
      }
    }
    const uint8_t* codes = w.v_codes + static_cast<long>(t0) * (d / 2);
    for (int g = 0; g < groups; ++g) {
      for (int h = 0; h < heads; h += 2) {
        const float* wg = wt + (g * heads + h) * kTile8;
        float* o = w.out + h * d + 64 * g;
        for (int half = 0; half < 2; ++half) {
          if (heads - h == 1) {
            TileValues<1>(codes + 32 * g, half, n, d, wg, kTile8, o);
          } else {
            TileValues<2>(codes + 32 * g, half, n, d, wg, kTile8, o);
          }
        }
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    const __m256 inv = _mm256_set1_ps(1.0f / Sum(sums(h, 1)));
    for (int g = 0; g < groups; ++g) {
      const __m256 m = _mm256_set1_ps(Sum(sums(h, 2 + g)));
      float* o = w.out + h * d + 64 * g;
      for (int i = 0; i < 64; i += 8) {
        _mm256_storeu_ps(o + i, _mm256_mul_ps(_mm256_add_ps(_mm256_loadu_ps(o + i), m), inv));
      }
    }
  }
}

}  // namespace strata::kernels::cpu::q4
