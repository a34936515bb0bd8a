#include "bench/cpu/memory_bandwidth.h"

#include <immintrin.h>
#include <omp.h>
#include <time.h>

#include <algorithm>
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

double ProcessCpuSeconds() {
  timespec t;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return static_cast<double>(t.tv_sec) + 1e-9 * static_cast<double>(t.tv_nsec);
}

ReadBandwidth MeasureReadBandwidth(long bytes, int threads, int reps) {
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
  ReadBandwidth best;
  volatile float sink = 0;
  for (int r = 0; r < reps; ++r) {
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = ProcessCpuSeconds();
    float total = 0;
#pragma omp parallel num_threads(threads) reduction(+ : total)
    {
      const long chunk = n / threads;
      total += sum(p + chunk * omp_get_thread_num(), chunk);
    }
    const double cpu = ProcessCpuSeconds() - cpu0;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    sink = sink + total;
    best.wall_gbps = std::max(best.wall_gbps, sizeof(float) * n / s / 1e9);
    best.cpu_gbps = std::max(best.cpu_gbps, sizeof(float) * n / cpu / 1e9);
  }
  std::free(p);
  return best;
}

}  // namespace strata::bench
