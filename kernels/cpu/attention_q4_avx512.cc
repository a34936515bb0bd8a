// The AVX-512 path of DecodeAttentionQ4 (see attention_q4.h). Compiled for AVX-512 (F, BW, DQ,
// VL, VBMI) by function attributes only, so the library still runs on CPUs without it;
// attention_q4.cc dispatches here after checking the CPU at run time.
//
// One pass over the work item, 16 tokens (a tile) at a time, with an online softmax: the tile's
// key codes give its scores, the scores update the running max and sum, and the tile's value
// codes are weighted by the probabilities, so scores never leave L1. Codes are widened by bit
// manipulation only (no integer-to-float conversion, see Unpacker): each lane holds
// x = 2 + n/8 for its code n, and the algebra absorbs the offset: per group
// q·k' = 8·scale·(q·x) + (minimum - 16·scale)·Σq, and likewise for the values.
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/cpu/attention_q4_paths.h"

// GCC 12's AVX-512 intrinsics build their pass-through operand from _mm512_undefined_*(), which
// -W(maybe-)uninitialized flag once inlined here (GCC bug 105593, fixed in GCC 13).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

#define STRATA_AVX512 \
  __attribute__((target("avx512f,avx512bw,avx512dq,avx512vl,avx512vbmi,fma,f16c")))
#define STRATA_AVX512_INLINE STRATA_AVX512 __attribute__((always_inline)) inline
#define STRATA_AVX512_OUTLINE STRATA_AVX512 __attribute__((noinline))

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

// Which element of its 64-element group lane i % 16 of unpacked vector i / 16 holds (Unpacker).
constexpr int Element(int i) { return 8 * (i % 16 / 2) + 2 * (i / 16) + i % 2; }

// Widens the 32 code bytes of a group (64 nibbles) into 4 vectors of x = 2 + n/8 = 2 (1 + n/16):
// a broadcast load, a shift and a mask turn them into 64 bytes of one nibble each (byte e holds
// element e), then per vector one masked VBMI multishift moves 16 of those bytes, 3 bits up, into
// the mantissa of 2.0 (byte 2 of the lane; the window's other bits fall in the zero high halves of
// the nibble's byte and of the byte below, so no further masking is needed). In qword Q, vector j
// takes bytes 2j and 2j + 1 of that qword.
struct Unpacker {
  __m512i control[4];
  __m512i shift;  // per 16-bit word: 0 in the low 256 bits, 4 in the high ones
  __m512i low;    // 0x0F in every byte
  __m512i two;    // 2.0f in every lane
};

STRATA_AVX512_INLINE Unpacker MakeUnpacker() {
  Unpacker u;
  for (int j = 0; j < 4; ++j) {
    // Byte 2 of each dword: the window starts 3 bits below byte k = 2j (even lane) or 2j + 1.
    const long long even = (8 * (2 * j) - 3) & 63, odd = (8 * (2 * j + 1) - 3) & 63;
    u.control[j] = _mm512_set1_epi64((even << 16) | (odd << 48));
  }
  u.shift = _mm512_inserti64x4(_mm512_setzero_si512(), _mm256_set1_epi16(4), 1);
  u.low = _mm512_set1_epi8(0x0F);
  u.two = _mm512_set1_epi32(0x40000000);
  return u;
}

// Byte e = nibble e of the group at c (low nibbles are elements 0..31, high ones 32..63).
STRATA_AVX512_INLINE __m512i Nibbles(const uint8_t* c, const Unpacker& u) {
  const __m512i bytes =
      _mm512_broadcast_i64x4(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(c)));
  return _mm512_and_si512(_mm512_srlv_epi16(bytes, u.shift), u.low);
}

// Lane L of vector j: x = 2 + n/8 for element Element(16 j + L).
STRATA_AVX512_INLINE __m512 Widen(__m512i nibbles, int j, const Unpacker& u) {
  return _mm512_castsi512_ps(
      _mm512_mask_multishift_epi64_epi8(u.two, 0x4444444444444444ull, u.control[j], nibbles));
}

// The 64 codes of one group, widened: n[j] is vector j of Unpacker.
struct Codes64 {
  __m512 n[4];
};

STRATA_AVX512_INLINE Codes64 Unpack64(const uint8_t* c, const Unpacker& u) {
  const __m512i b = Nibbles(c, u);
  return {{Widen(b, 0, u), Widen(b, 1, u), Widen(b, 2, u), Widen(b, 3, u)}};
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

// part[(h * groups + g) * kTile + t] = the 16 lane-wise partial products q_h·x of token t, group
// g (q permuted as the codes unpack): each key row is unpacked once for all the query heads.
// Rows n.. of the tile are zeroed. H > 0 fixes the head count at compile time (and needs a full
// tile), which lets the compiler unroll the tile; H == 0 takes it from `heads`.
template <int H>
STRATA_AVX512_OUTLINE void TileDots(const float* q, int heads, int d, const uint8_t* codes, int n,
                                    const Unpacker& control, __m512* part) {
  const int groups = d / 64, nh = H > 0 ? H : heads;
  for (int g = 0; g < groups; ++g) {
#pragma GCC unroll 16
    for (int t = 0; t < kTile; ++t) {
      __m512* p = part + g * kTile + t;
      if (H == 0 && t >= n) {
        for (int h = 0; h < nh; ++h) p[h * groups * kTile] = _mm512_setzero_ps();
        continue;
      }
      const Codes64 k = Unpack64(codes + static_cast<long>(t) * (d / 2) + 32 * g, control);
      for (int h = 0; h < nh; ++h) {
        const float* qh = q + h * d + 64 * g;
        // Two short chains rather than one long one: heads overlap better.
        const __m512 a = _mm512_fmadd_ps(_mm512_load_ps(qh + 32), k.n[2],
                                         _mm512_mul_ps(_mm512_load_ps(qh), k.n[0]));
        const __m512 b = _mm512_fmadd_ps(_mm512_load_ps(qh + 48), k.n[3],
                                         _mm512_mul_ps(_mm512_load_ps(qh + 16), k.n[1]));
        p[h * groups * kTile] = _mm512_add_ps(a, b);
      }
    }
  }
}

// TileDots with the head count fixed at compile time for full tiles of up to 8 heads.
STRATA_AVX512 void AnyTileDots(const float* q, int heads, int d, const uint8_t* codes, int n,
                               const Unpacker& control, __m512* part) {
  switch (n == kTile ? heads : 0) {
    case 1:
      return TileDots<1>(q, heads, d, codes, n, control, part);
    case 2:
      return TileDots<2>(q, heads, d, codes, n, control, part);
    case 3:
      return TileDots<3>(q, heads, d, codes, n, control, part);
    case 4:
      return TileDots<4>(q, heads, d, codes, n, control, part);
    case 5:
      return TileDots<5>(q, heads, d, codes, n, control, part);
    case 6:
      return TileDots<6>(q, heads, d, codes, n, control, part);
    case 7:
      return TileDots<7>(q, heads, d, codes, n, control, part);
    case 8:
      return TileDots<8>(q, heads, d, codes, n, control, part);
    default:
      return TileDots<0>(q, heads, d, codes, n, control, part);
  }
}

// a[h][i] += wt[h · wt_stride] · x_i, x_i vector v0 + i (Unpacker order) of the group at row.
template <int H, int V>
STRATA_AVX512_INLINE void AddValueRow(const uint8_t* row, const float* wt, int wt_stride, int v0,
                                      const Unpacker& control, __m512 (&a)[H][V]) {
  const __m512i nibbles = Nibbles(row, control);
  __m512 x[V];
  for (int i = 0; i < V; ++i) x[i] = Widen(nibbles, v0 + i, control);
  for (int h = 0; h < H; ++h) {
    const __m512 weight = _mm512_set1_ps(wt[h * wt_stride]);
    for (int i = 0; i < V; ++i) a[h][i] = _mm512_fmadd_ps(weight, x[i], a[h][i]);
  }
}

// For H query heads and the V vectors v0.. of a group's 4 (Unpacker order): acc_h = corr_h · acc_h
// + the sum over the tile's n tokens of wt_h[t] · x_t, x_t the unpacked value codes, each row
// unpacked once for the H heads; corr_h = corr[h · corr_stride]. The tile is summed apart and
// then added, so that a long context adds into acc once per tile, not once per token (rounding
// error grows with the chain length, and Σ wt · x, about 16 · Σ p · scale, cancels with the
// minimum's term later).
// The loop takes tokens in pairs; one or two heads give the odd tokens their own accumulators to
// keep the FMA chains short (more heads already have enough independent chains).
template <int H, int V>
STRATA_AVX512_OUTLINE void TileValues(const uint8_t* codes, int n, int d, const float* wt,
                                      int wt_stride, const float* corr, int corr_stride,
                                      const Unpacker& control, int v0, float* acc) {
  constexpr bool kSplit = H <= 2;
  __m512 even[H][V], odd[H][V];
  for (int h = 0; h < H; ++h) {
    for (int i = 0; i < V; ++i) even[h][i] = odd[h][i] = _mm512_setzero_ps();
  }
  const uint8_t* row = codes;
  const long row_bytes = d / 2;
  int t = 0;
  for (; t + 1 < n; t += 2, row += 2 * row_bytes) {
    AddValueRow<H, V>(row, wt + t, wt_stride, v0, control, even);
    AddValueRow<H, V>(row + row_bytes, wt + t + 1, wt_stride, v0, control, kSplit ? odd : even);
  }
  if (t < n) AddValueRow<H, V>(row, wt + t, wt_stride, v0, control, even);
  for (int h = 0; h < H; ++h) {
    const __m512 c = _mm512_set1_ps(corr[h * corr_stride]);
    for (int i = 0; i < V; ++i) {
      const __m512 sum = kSplit ? _mm512_add_ps(even[h][i], odd[h][i]) : even[h][i];
      float* a = acc + h * d + 16 * (v0 + i);
      _mm512_store_ps(a, _mm512_fmadd_ps(c, _mm512_load_ps(a), sum));
    }
  }
}

// TileValues for H heads over a whole group: up to 4 heads take the 4 vectors at once, 5 to 8
// heads two at a time (so that the accumulators stay in registers).
template <int H>
STRATA_AVX512 void GroupValues(const uint8_t* codes, int n, int d, const float* wt,
                               const float* corr, int corr_stride, const Unpacker& control,
                               float* acc) {
  if constexpr (H <= 4) {
    TileValues<H, 4>(codes, n, d, wt, kTile, corr, corr_stride, control, 0, acc);
  } else {
    TileValues<H, 2>(codes, n, d, wt, kTile, corr, corr_stride, control, 0, acc);
    TileValues<H, 2>(codes, n, d, wt, kTile, corr, corr_stride, control, 2, acc);
  }
}

// Asks for the codes and params of the tile 128 tokens ahead of t0: with the hardware prefetcher
// alone the core waits on DRAM.
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

// The state of one work item between tiles.
struct Pass {
  int d, groups, heads;
  const Work* w;
  __m512* part;     // [heads, groups, kTile] vectors
  float* kparams;   // [groups, 2, kTile]
  float* vparams;   // [groups, 2, kTile]
  float* weights;   // 2 x [groups, heads, kTile]: 8 · probability · value scale, per tile parity
  float* corr;      // 2 x [heads rounded up to 16]: the tile's rescale factor, per tile parity
  int corr_stride;  // floats between the two parities of `corr`
  __m512* state;    // per head: Σ probability (lane-wise), running max (lane 0), then per group
                    // Σ probability · (minimum - 16 · value scale), lane-wise
  int slots;        // vectors of `state` per head
  float* qp;        // [heads, head_dim], permuted as the codes unpack
  float* acc;       // [heads, head_dim], same order
  Unpacker control;
};

// Scores of the tile at t0 from the key codes, then the online-softmax update: the weights and
// rescale factors for the tile's values go to parity `b` of the buffers.
STRATA_AVX512 void ScoreTile(const Pass& s, int t0, int b) {
  const Work& w = *s.w;
  const int d = s.d, groups = s.groups, heads = s.heads;
  const __m512 eight = _mm512_set1_ps(8.0f), sixteen = _mm512_set1_ps(16.0f);
  PrefetchAhead(w.k_codes, w.k_params, t0, w.len, d);
  PrefetchAhead(w.v_codes, w.v_params, t0, w.len, d);
  const int n = std::min(kTile, w.len - t0);
  const __mmask16 valid = static_cast<__mmask16>((1u << n) - 1);
  UnpackParams(w.k_params + static_cast<long>(t0) * 2 * groups, valid, groups, s.kparams);
  UnpackParams(w.v_params + static_cast<long>(t0) * 2 * groups, valid, groups, s.vparams);
  AnyTileDots(s.qp, heads, d, w.k_codes + static_cast<long>(t0) * (d / 2), n, s.control, s.part);
  float* wt = s.weights + b * groups * heads * kTile;
  for (int h = 0; h < heads; ++h) {
    __m512 score = _mm512_setzero_ps();
    for (int g = 0; g < groups; ++g) {
      const __m512 scale = _mm512_loadu_ps(s.kparams + 2 * g * kTile);
      const __m512 offset =
          _mm512_fnmadd_ps(sixteen, scale, _mm512_loadu_ps(s.kparams + (2 * g + 1) * kTile));
      score = _mm512_fmadd_ps(_mm512_mul_ps(eight, scale),
                              Reduce16(s.part + (h * groups + g) * kTile, 1), score);
      score = _mm512_fmadd_ps(offset, _mm512_set1_ps(w.qsum[h * groups + g]), score);
    }
    __m512* st = s.state + h * s.slots;
    float& max = *reinterpret_cast<float*>(st + 1);
    float& corr = s.corr[b * s.corr_stride + h];
    const float tile_max = _mm512_mask_reduce_max_ps(valid, score);
    corr = 1.0f;
    if (tile_max > max) {  // rescale what was accumulated under the old max (0 at first)
      corr = std::exp(max - tile_max);
      max = tile_max;
      st[0] = _mm512_mul_ps(st[0], _mm512_set1_ps(corr));
      for (int g = 0; g < groups; ++g) st[2 + g] = _mm512_mul_ps(st[2 + g], _mm512_set1_ps(corr));
    }
    const __m512 p = _mm512_maskz_mov_ps(valid, Exp(_mm512_sub_ps(score, _mm512_set1_ps(max))));
    st[0] = _mm512_add_ps(st[0], p);
    for (int g = 0; g < groups; ++g) {
      const __m512 scale = _mm512_loadu_ps(s.vparams + 2 * g * kTile);
      const __m512 offset =
          _mm512_fnmadd_ps(sixteen, scale, _mm512_loadu_ps(s.vparams + (2 * g + 1) * kTile));
      _mm512_store_ps(wt + (g * heads + h) * kTile, _mm512_mul_ps(p, _mm512_mul_ps(eight, scale)));
      st[2 + g] = _mm512_fmadd_ps(p, offset, st[2 + g]);
    }
  }
}

// Adds the value codes of the tile at t0, weighted by parity `b` of the buffers, to the outputs.
STRATA_AVX512 void ValueTile(const Pass& s, int t0, int b) {
  const int d = s.d, heads = s.heads, n = std::min(kTile, s.w->len - t0);
  const uint8_t* codes = s.w->v_codes + static_cast<long>(t0) * (d / 2);
  const float* wt = s.weights + b * s.groups * heads * kTile;
  for (int g = 0; g < s.groups; ++g) {
    for (int h = 0; h < heads; h += 8) {
      const uint8_t* c = codes + 32 * g;
      const float* wg = wt + (g * heads + h) * kTile;
      const float* corr = s.corr + b * s.corr_stride + h;
      float* a = s.acc + h * d + 64 * g;
      switch (std::min(8, heads - h)) {
        case 1:
          GroupValues<1>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 2:
          GroupValues<2>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 3:
          GroupValues<3>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 4:
          GroupValues<4>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 5:
          GroupValues<5>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 6:
          GroupValues<6>(c, n, d, wg, corr, 1, s.control, a);
          break;
        case 7:
          GroupValues<7>(c, n, d, wg, corr, 1, s.control, a);
          break;
        default:
          GroupValues<8>(c, n, d, wg, corr, 1, s.control, a);
          break;
      }
    }
  }
}

}  // namespace

// Software-pipelined over tiles: the scores and softmax of tile i + 1 are computed before the
// values of tile i, so that the latency of the softmax chain (reductions, exp) overlaps with
// independent work instead of stalling the value loop that depends on it.
STRATA_AVX512 void AttendAvx512(const Work& w) {
  const int d = w.head_dim, groups = d / 64, heads = w.heads;
  const Layout l = ScratchLayout(heads, d, w.len);
  Pass s;
  s.d = d;
  s.groups = groups;
  s.heads = heads;
  s.w = &w;
  s.part = reinterpret_cast<__m512*>(w.scratch + l.part);
  s.kparams = w.scratch + l.kparams;
  s.vparams = w.scratch + l.vparams;
  s.weights = w.scratch + l.weights;
  s.corr = w.scratch + l.corr;
  s.corr_stride = (heads + 15) / 16 * 16;
  s.state = reinterpret_cast<__m512*>(w.scratch + l.sums);
  s.slots = 2 + groups;
  s.qp = w.scratch + l.qperm;
  s.acc = w.scratch + l.acc;
  s.control = MakeUnpacker();

  for (int h = 0; h < heads; ++h) {
    for (int i = 0; i < d; ++i) s.qp[h * d + i] = w.q[h * d + i / 64 * 64 + Element(i % 64)];
    __m512* st = s.state + h * s.slots;
    st[0] = _mm512_setzero_ps();
    st[1] = _mm512_set1_ps(-INFINITY);
    for (int g = 0; g < groups; ++g) st[2 + g] = _mm512_setzero_ps();
  }
  std::memset(s.acc, 0, sizeof(float) * heads * d);
  ScoreTile(s, 0, 0);
  for (int t0 = 0; t0 < w.len; t0 += kTile) {
    const int b = (t0 / kTile) & 1;
    if (t0 + kTile < w.len) ScoreTile(s, t0 + kTile, b ^ 1);
    ValueTile(s, t0, b);
  }
  for (int h = 0; h < heads; ++h) {
    const __m512* st = s.state + h * s.slots;
    const float inv = 1.0f / _mm512_reduce_add_ps(st[0]);
    for (int g = 0; g < groups; ++g) {
      const float m = _mm512_reduce_add_ps(st[2 + g]);
      const float* a = s.acc + h * d + 64 * g;
      float* o = w.out + h * d + 64 * g;
      for (int i = 0; i < 64; ++i) o[Element(i)] = (a[i] + m) * inv;
    }
  }
}

}  // namespace strata::kernels::cpu::q4
