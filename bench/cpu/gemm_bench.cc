// Throughput of the CPU GEMM (kernels/cpu/gemm.h) per instruction-set path, in GFLOP/s, against
// the machine's fused multiply-add peak measured in the same run (the same path's vector FMAs on
// registers only, every thread busy): the bound no GEMM can pass.
//
//   gemm_bench [--threads N] [--seconds S]
//
// Shapes are those of a forward pass: prefill rows against the default model's projections
// (576 x 576, 1536 x 576, 576 x 1536), a decode step's few rows, a vocabulary projection, and a
// 7B model's 4096 x 4096. Every figure is the best of repeated runs over --seconds (default 0.5).
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/gemm.h"
#include "kernels/cpu/threads.h"

namespace strata::bench {
namespace {

namespace k = kernels::cpu;

// Best rate of fn over `seconds`, given the flops of one call.
template <typename Fn>
double BestGflops(double flops, double seconds, Fn fn) {
  fn();
  double best = 0;
  const auto start = std::chrono::steady_clock::now();
  while (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() <
         seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    fn();
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, flops / s / 1e9);
  }
  return best;
}

constexpr long kPeakSteps = 1 << 22;

// Independent FMA chains on registers: 12 of them hide the FMA latency on every x86 core.
__attribute__((target("avx512f,fma"))) float PeakAvx512() {
  __m512 acc[12];
  for (auto& a : acc) a = _mm512_set1_ps(1.0f);
  const __m512 x = _mm512_set1_ps(0.999999f), y = _mm512_set1_ps(1e-7f);
  for (long i = 0; i < kPeakSteps; ++i) {
    for (auto& a : acc) a = _mm512_fmadd_ps(a, x, y);
  }
  float out[16];
  __m512 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_ps(s, acc[i]);
  _mm512_storeu_ps(out, s);
  return out[0];
}

__attribute__((target("avx2,fma"))) float PeakAvx2() {
  __m256 acc[12];
  for (auto& a : acc) a = _mm256_set1_ps(1.0f);
  const __m256 x = _mm256_set1_ps(0.999999f), y = _mm256_set1_ps(1e-7f);
  for (long i = 0; i < kPeakSteps; ++i) {
    for (auto& a : acc) a = _mm256_fmadd_ps(a, x, y);
  }
  float out[8];
  __m256 s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm256_add_ps(s, acc[i]);
  _mm256_storeu_ps(out, s);
  return out[0];
}

// The FMA peak of `isa` with every thread busy, GFLOP/s.
double PeakGflops(k::GemmIsa isa, double seconds) {
  const int lanes = isa == k::GemmIsa::kAvx512 ? 16 : 8;
  const double flops = 2.0 * lanes * 12 * kPeakSteps * omp_get_max_threads();
  volatile float sink = 0;
  return BestGflops(flops, seconds, [&] {
#pragma omp parallel
    {
      const float v = isa == k::GemmIsa::kAvx512 ? PeakAvx512() : PeakAvx2();
      if (v == 12345.0f) sink = v;
    }
  });
}

struct Shape {
  const char* what;
  int m, n, k;
};

const Shape kShapes[] = {
    {"prefill q/o (576)", 512, 576, 576},   {"prefill up (1536)", 512, 1536, 576},
    {"prefill down (1536)", 512, 576, 1536}, {"decode, 8 rows", 8, 1536, 576},
    {"vocabulary, 8 rows", 8, 49152, 576},  {"7B, 64 rows", 64, 4096, 4096},
    {"7B, 1 row", 1, 4096, 4096},
};

}  // namespace
}  // namespace strata::bench

int main(int argc, char** argv) {
  using namespace strata::bench;
  double seconds = 0.5;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (!std::strcmp(argv[i], "--threads")) k::SetCpuThreads(std::atoi(argv[i + 1]));
    if (!std::strcmp(argv[i], "--seconds")) seconds = std::atof(argv[i + 1]);
  }
  std::printf("gemm_bench: %d threads, best of %.1f s per cell\n", omp_get_max_threads(), seconds);
  std::mt19937 rng(1);
  std::normal_distribution<float> normal;
  // The scalar path is the fixed order's reference (and the fallback for CPUs without AVX2 and
  // FMA, where its fused multiply-adds are emulated): not timed.
  for (k::GemmIsa isa : {k::GemmIsa::kAvx512, k::GemmIsa::kAvx2}) {
    if (!k::GemmIsaAvailable(isa)) continue;
    const double peak = PeakGflops(isa, seconds);
    std::printf("\n%s path, FMA peak %.1f GFLOP/s\n", k::GemmIsaName(isa), peak);
    std::printf("%-22s %5s %6s %5s %9s %7s\n", "shape", "m", "n", "k", "GFLOP/s", "% peak");
    for (const Shape& s : kShapes) {
      std::vector<float> a(static_cast<size_t>(s.m) * s.k), b(static_cast<size_t>(s.n) * s.k),
          c(static_cast<size_t>(s.m) * s.n);
      for (float& x : a) x = normal(rng);
      for (float& x : b) x = normal(rng);
      const double g = BestGflops(2.0 * s.m * s.n * s.k, seconds, [&] {
        k::GemmNT(s.m, s.n, s.k, a.data(), b.data(), c.data(), s.n, false, isa);
      });
      std::printf("%-22s %5d %6d %5d %9.1f %6.0f%%\n", s.what, s.m, s.n, s.k, g, 100 * g / peak);
    }
  }
  return 0;
}
