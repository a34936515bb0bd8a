#include "bench/cpu/memory_bandwidth.h"

#include <immintrin.h>
#include <omp.h>

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>

namespace strata::bench {
namespace {

__attribute__((target("avx512f"))) float SumAvx512(const float* p, long n) {
  __m512 a0 = _mm512_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (long i = 0; i < n; i += 64) {
    a0 = _mm512_add_ps(a0, _mm512_load_ps(p + i));
    a1 = _mm512_add_ps(a1, _mm512_load_ps(p + i + 16));
    a2 = _mm512_add_ps(a2, _mm512_load_ps(p + i + 32));
    a3 = _mm512_add_ps(a3, _mm512_load_ps(p + i + 48));
  }
  float lanes[16];
  _mm512_storeu_ps(lanes, _mm512_add_ps(_mm512_add_ps(a0, a1), _mm512_add_ps(a2, a3)));
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

__attribute__((target("avx2"))) float SumAvx2(const float* p, long n) {
  __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (long i = 0; i < n; i += 32) {
    a0 = _mm256_add_ps(a0, _mm256_load_ps(p + i));
    a1 = _mm256_add_ps(a1, _mm256_load_ps(p + i + 8));
    a2 = _mm256_add_ps(a2, _mm256_load_ps(p + i + 16));
    a3 = _mm256_add_ps(a3, _mm256_load_ps(p + i + 24));
  }
  float lanes[8];
  _mm256_storeu_ps(lanes, _mm256_add_ps(_mm256_add_ps(a0, a1), _mm256_add_ps(a2, a3)));
  float s = 0;
  for (float x : lanes) s += x;
  return s;
}

float SumSse(const float* p, long n) {
  __m128 a0 = _mm_setzero_ps(), a1 = a0, a2 = a0, a3 = a0;
  for (long i = 0; i < n; i += 16) {
    a0 = _mm_add_ps(a0, _mm_load_ps(p + i));
    a1 = _mm_add_ps(a1, _mm_load_ps(p + i + 4));
    a2 = _mm_add_ps(a2, _mm_load_ps(p + i + 8));
    a3 = _mm_add_ps(a3, _mm_load_ps(p + i + 12));
  }
  float lanes[4];
  _mm_storeu_ps(lanes, _mm_add_ps(_mm_add_ps(a0, a1), _mm_add_ps(a2, a3)));
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}

}  // namespace

double MeasureReadBandwidthGbps(long bytes, int threads, int reps) {
  const long n = bytes / static_cast<long>(sizeof(float)) / (64 * threads) * (64 * threads);
  auto* p = static_cast<float*>(std::aligned_alloc(64, sizeof(float) * n));
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < n; ++i) p[i] = 1.0f;  // first touch by the reading thread
  float (*sum)(const float*, long) = SumSse;
  if (__builtin_cpu_supports("avx512f")) {
    sum = SumAvx512;
  } else if (__builtin_cpu_supports("avx2")) {
    sum = SumAvx2;
  }
  double best = 0;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const long chunk = n / threads;
      total += sum(p + chunk * omp_get_thread_num(), chunk);
    }
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    if (sizeof(float) * n / s / 1e9 > best) best = sizeof(float) * n / s / 1e9;
  }
  std::free(p);
  return best;
}

}  // namespace strata::bench
