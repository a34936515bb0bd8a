#include "kernels/cpu/gemm.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>

#define STRATA_AVX2 __attribute__((target("avx2,fma")))
#define STRATA_AVX512 __attribute__((target("avx512f,fma")))

namespace strata::kernels::cpu {

bool GemmIsaAvailable(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAuto:
    case GemmIsa::kScalar:
      return true;
    case GemmIsa::kAvx2:
      return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case GemmIsa::kAvx512:
      return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("fma");
  }
  return false;
}

GemmIsa ResolveGemmIsa(GemmIsa isa) {
  if (isa != GemmIsa::kAuto) return isa;
  if (GemmIsaAvailable(GemmIsa::kAvx512)) return GemmIsa::kAvx512;
  if (GemmIsaAvailable(GemmIsa::kAvx2)) return GemmIsa::kAvx2;
  return GemmIsa::kScalar;
}

const char* GemmIsaName(GemmIsa isa) {
  switch (isa) {
    case GemmIsa::kAuto:
      return "auto";
    case GemmIsa::kScalar:
      return "scalar";
    case GemmIsa::kAvx2:
      return "avx2";
    case GemmIsa::kAvx512:
      return "avx512";
  }
  return "?";
}

namespace {

constexpr int kL = kGemmLanes;
// Register block: up to kMr rows of A against up to kNr rows of B, kMr * kNr lane vectors.
constexpr int kMr = 4;
constexpr int kNr = 4;
// Cache block of one thread's work item: rows of A and rows of B.
constexpr int kTileRows = 64;
constexpr int kTileCols = 64;

// The folded lane sums of an mr x nr register block over k in [0, k16): sums[i * kNr + j] for
// A row i and B row j, before the tail products. Every path computes exactly the scalar path's
// values: the same fused multiply-adds per lane, then the same pairwise adds of the fold (the
// SIMD paths add vector halves, which pairs lane l with lane l + half as the scalar loop does).
using BlockFn = void (*)(int k16, const float* a, long lda, int mr, const float* b, long ldb,
                         int nr, float* sums);

// The fold of 16 lane sums: l += l + 8, then + 4, + 2, + 1.
float FoldLanes(float* s) {
  for (int half = kL / 2; half >= 1; half /= 2) {
    for (int l = 0; l < half; ++l) s[l] = s[l] + s[l + half];
  }
  return s[0];
}

template <int MR, int NR>
void ScalarSums(int k16, const float* a, long lda, const float* b, long ldb, float* sums) {
  float acc[MR][NR][kL] = {};
  for (int k = 0; k < k16; k += kL) {
    for (int i = 0; i < MR; ++i) {
      for (int j = 0; j < NR; ++j) {
        for (int l = 0; l < kL; ++l) {
          acc[i][j][l] = std::fma(a[i * lda + k + l], b[j * ldb + k + l], acc[i][j][l]);
        }
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) sums[i * kNr + j] = FoldLanes(acc[i][j]);
  }
}

// Lanes 0-3 of x: (l0 + l2) + (l1 + l3), the fold's last two steps.
STRATA_AVX2 __attribute__((always_inline)) inline float FoldQuarter(__m128 x) {
  const __m128 two = _mm_add_ps(x, _mm_movehl_ps(x, x));
  return _mm_cvtss_f32(_mm_add_ss(two, _mm_shuffle_ps(two, two, 1)));
}

template <int MR, int NR>
STRATA_AVX2 void Avx2Sums(int k16, const float* a, long lda, const float* b, long ldb,
                          float* sums) {
  __m256 lo[MR][NR], hi[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) lo[i][j] = hi[i][j] = _mm256_setzero_ps();
  }
  for (int k = 0; k < k16; k += kL) {
    for (int j = 0; j < NR; ++j) {
      const __m256 b_lo = _mm256_loadu_ps(b + j * ldb + k);
      const __m256 b_hi = _mm256_loadu_ps(b + j * ldb + k + 8);
      for (int i = 0; i < MR; ++i) {
        lo[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i * lda + k), b_lo, lo[i][j]);
        hi[i][j] = _mm256_fmadd_ps(_mm256_loadu_ps(a + i * lda + k + 8), b_hi, hi[i][j]);
      }
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      const __m256 eight = _mm256_add_ps(lo[i][j], hi[i][j]);
      sums[i * kNr + j] = FoldQuarter(
          _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1)));
    }
  }
}

template <int MR, int NR>
STRATA_AVX512 void Avx512Sums(int k16, const float* a, long lda, const float* b, long ldb,
                              float* sums) {
  __m512 acc[MR][NR];
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) acc[i][j] = _mm512_setzero_ps();
  }
  for (int k = 0; k < k16; k += kL) {
    __m512 av[MR];
    for (int i = 0; i < MR; ++i) av[i] = _mm512_loadu_ps(a + i * lda + k);
    for (int j = 0; j < NR; ++j) {
      const __m512 bv = _mm512_loadu_ps(b + j * ldb + k);
      for (int i = 0; i < MR; ++i) acc[i][j] = _mm512_fmadd_ps(av[i], bv, acc[i][j]);
    }
  }
  for (int i = 0; i < MR; ++i) {
    for (int j = 0; j < NR; ++j) {
      // The halves are read back through memory: GCC 12's 512-bit extracts and shuffles warn of
      // an undefined operand.
      alignas(64) float lanes[kL];
      _mm512_store_ps(lanes, acc[i][j]);
      const __m256 eight = _mm256_add_ps(_mm256_load_ps(lanes), _mm256_load_ps(lanes + 8));
      sums[i * kNr + j] = FoldQuarter(
          _mm_add_ps(_mm256_castps256_ps128(eight), _mm256_extractf128_ps(eight, 1)));
    }
  }
}

// Turns a path's template into a BlockFn over every block shape up to kMr x kNr.
#define STRATA_GEMM_BLOCK_FN(Name, Template)                                               \
  void Name(int k16, const float* a, long lda, int mr, const float* b, long ldb, int nr,  \
            float* sums) {                                                                 \
    using Fn = void (*)(int, const float*, long, const float*, long, float*);             \
    static constexpr Fn kTable[kMr][kNr] = {                                               \
        {Template<1, 1>, Template<1, 2>, Template<1, 3>, Template<1, 4>},                  \
        {Template<2, 1>, Template<2, 2>, Template<2, 3>, Template<2, 4>},                  \
        {Template<3, 1>, Template<3, 2>, Template<3, 3>, Template<3, 4>},                  \
        {Template<4, 1>, Template<4, 2>, Template<4, 3>, Template<4, 4>}};                 \
    kTable[mr - 1][nr - 1](k16, a, lda, b, ldb, sums);                                     \
  }
STRATA_GEMM_BLOCK_FN(ScalarBlock, ScalarSums)
STRATA_GEMM_BLOCK_FN(Avx2Block, Avx2Sums)
STRATA_GEMM_BLOCK_FN(Avx512Block, Avx512Sums)
#undef STRATA_GEMM_BLOCK_FN

// The folded sum plus the tail products k16 <= k' < k.
float AddTail(float sum, int k16, int k, const float* a, const float* b) {
  for (int t = k16; t < k; ++t) sum = std::fma(a[t], b[t], sum);
  return sum;
}

BlockFn BlockOf(GemmIsa isa) {
  switch (ResolveGemmIsa(isa)) {
    case GemmIsa::kAvx512:
      return Avx512Block;
    case GemmIsa::kAvx2:
      return Avx2Block;
    default:
      return ScalarBlock;
  }
}

}  // namespace

float GemmNTElement(int k, const float* a, const float* b) {
  float sum;
  const int k16 = k - k % kL;
  ScalarSums<1, 1>(k16, a, k, b, k, &sum);
  return AddTail(sum, k16, k, a, b);
}

void GemmNT(int m, int n, int k, const float* a, const float* b, float* c, int ldc,
            bool accumulate, GemmIsa isa) {
  const BlockFn block = BlockOf(isa);
  const int k16 = k - k % kL;
  const int tiles_m = (m + kTileRows - 1) / kTileRows;
  const int tiles_n = (n + kTileCols - 1) / kTileCols;
  // One cache tile is not worth waking the other threads for.
#pragma omp parallel if (tiles_m * tiles_n > 1)
  {
    float sums[kMr * kNr];
#pragma omp for collapse(2) schedule(static)
    for (int tn = 0; tn < tiles_n; ++tn) {
      for (int tm = 0; tm < tiles_m; ++tm) {
        const int i_end = std::min(m, (tm + 1) * kTileRows);
        const int j_end = std::min(n, (tn + 1) * kTileCols);
        for (int j0 = tn * kTileCols; j0 < j_end; j0 += kNr) {
          const int nr = std::min(kNr, j_end - j0);
          for (int i0 = tm * kTileRows; i0 < i_end; i0 += kMr) {
            const int mr = std::min(kMr, i_end - i0);
            const float* ai = a + static_cast<long>(i0) * k;
            const float* bj = b + static_cast<long>(j0) * k;
            block(k16, ai, k, mr, bj, k, nr, sums);
            for (int i = 0; i < mr; ++i) {
              float* ci = c + static_cast<long>(i0 + i) * ldc + j0;
              for (int j = 0; j < nr; ++j) {
                const float sum = AddTail(sums[i * kNr + j], k16, k, ai + static_cast<long>(i) * k,
                                          bj + static_cast<long>(j) * k);
                ci[j] = accumulate ? ci[j] + sum : sum;
              }
            }
          }
        }
      }
    }
  }
}

}  // namespace strata::kernels::cpu
