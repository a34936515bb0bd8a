// Token sampling for a batch of rows of logits: greedy, temperature, top-k, top-p, with a seed per
// request. CUDA twin of kernels/cpu/sampling.cc's SampleToken, with the same semantics step by
// step:
//   greedy (temperature <= 0 or top_k == 1): argmax of the raw logits, lowest id on ties;
//   otherwise keys = logits / temperature (fp32), ordered most likely first with ties by id;
//   keep the top_k first (0 or -1: all); probabilities exp(key - max) in fp64; with top_p < 1 keep
//   the smallest prefix whose normalised mass reaches top_p (the crossing token included);
//   draw u = UniformDraw(seed, step) (SplitMix64, bit-identical to the CPU) and return the first
//   kept token whose running mass exceeds u · kept mass (the last kept one if rounding leaves none).
// The order comes from a stable segmented radix sort (CUB, SortPolicy below) of (key, id) pairs;
// the sums run as block-wide fp64 scans instead of a sequential loop, so a draw can differ from the
// CPU only when u falls within a few ulp of a boundary between two tokens.
#pragma once

#include <cuda_runtime.h>

#include <climits>
#include <cstddef>
#include <cstdint>
#include <cub/device/dispatch/dispatch_radix_sort.cuh>

#include "kernels/cuda/utils.cuh"

namespace strata::kernels::cuda {

namespace sampling {

inline constexpr int kThreads = 256;

// CUB's segmented radix sort tuning for sm_80 and later, but for the alternate (5-bit) passes
// 384 threads x 9 keys instead of x 11: CUB's own shape spills 24 bytes under ptxas for sm_90,
// and no strata kernel spills (issue 28; scripts/ptxas_report.sh). The only policy in its chain,
// so every architecture runs it.
struct SortPolicy : cub::ChainedPolicy<500, SortPolicy, SortPolicy> {
  using SegmentedPolicy =
      cub::AgentRadixSortDownsweepPolicy<192, 39, float, cub::BLOCK_LOAD_TRANSPOSE,
                                         cub::LOAD_DEFAULT, cub::RADIX_RANK_MEMOIZE,
                                         cub::BLOCK_SCAN_WARP_SCANS, 6>;
  using AltSegmentedPolicy =
      cub::AgentRadixSortDownsweepPolicy<384, 9, float, cub::BLOCK_LOAD_TRANSPOSE,
                                         cub::LOAD_DEFAULT, cub::RADIX_RANK_MEMOIZE,
                                         cub::BLOCK_SCAN_WARP_SCANS, 5>;
};
struct SortPolicyHub {
  using MaxPolicy = SortPolicy;
};

// cub::DeviceSegmentedRadixSort::SortPairsDescending over all 32 key bits, with SortPolicy: the
// inputs are left as they are and the sorted pairs land in keys_out and ids_out. With a null
// `storage`, sets `storage_bytes` and does nothing else.
inline cudaError_t SortPairsDescending(void* storage, size_t& storage_bytes, const float* keys_in,
                                       float* keys_out, const int32_t* ids_in, int32_t* ids_out,
                                       int n, int segments, const int* begin, const int* end,
                                       cudaStream_t stream) {
  cub::DoubleBuffer<float> keys(const_cast<float*>(keys_in), keys_out);
  cub::DoubleBuffer<int32_t> ids(const_cast<int32_t*>(ids_in), ids_out);
  using Sort = cub::DispatchSegmentedRadixSort<cub::SortOrder::Descending, float, int32_t,
                                               const int*, const int*, int, SortPolicyHub>;
  return Sort::Dispatch(storage, storage_bytes, keys, ids, n, segments, begin, end, 0, 32,
                        /*is_overwrite_okay=*/false, stream);
}

__host__ __device__ inline uint64_t SplitMix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

__device__ __forceinline__ bool Greedy(const SamplingParams& p) {
  return p.temperature <= 0.0f || p.top_k == 1;
}

// Workspace carving: sorted and unsorted (key, id) planes, segment offsets, then CUB's storage.
struct Workspace {
  float* keys_in;
  float* keys_out;
  int32_t* ids_in;
  int32_t* ids_out;
  int* offsets;
  void* cub_storage;
  size_t cub_bytes;
};

inline size_t AlignUp(size_t x) { return (x + 255) / 256 * 256; }

inline Workspace Carve(void* base, int batch, int vocab, size_t cub_bytes) {
  const size_t plane = AlignUp(sizeof(float) * static_cast<size_t>(batch) * vocab);
  char* p = static_cast<char*>(base);
  Workspace w;
  w.keys_in = reinterpret_cast<float*>(p);
  w.keys_out = reinterpret_cast<float*>(p + plane);
  w.ids_in = reinterpret_cast<int32_t*>(p + 2 * plane);
  w.ids_out = reinterpret_cast<int32_t*>(p + 3 * plane);
  w.offsets = reinterpret_cast<int*>(p + 4 * plane);
  w.cub_storage = p + 4 * plane + AlignUp(sizeof(int) * (static_cast<size_t>(batch) + 1));
  w.cub_bytes = cub_bytes;
  return w;
}

inline size_t FixedBytes(int batch, int vocab) {
  return 4 * AlignUp(sizeof(float) * static_cast<size_t>(batch) * vocab) +
         AlignUp(sizeof(int) * (static_cast<size_t>(batch) + 1));
}

// ---- kernels ----

// Inclusive scan of one double per thread across the block; returns the block total too.
__device__ double BlockInclusiveScan(double x, double* total) {
  __shared__ double warp_sums[kThreads / 32];
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  for (int offset = 1; offset < 32; offset *= 2) {
    const double y = __shfl_up_sync(kFullMask, x, offset);
    if (lane >= offset) x += y;
  }
  if (lane == 31) warp_sums[warp] = x;
  __syncthreads();
  double before = 0.0;
  double sum = 0.0;
  for (int w = 0; w < kThreads / 32; ++w) {
    if (w < warp) before += warp_sums[w];
    sum += warp_sums[w];
  }
  __syncthreads();
  *total = sum;
  return before + x;
}

// Argmax of every row (lowest id on ties); the sampling kernel later overwrites non-greedy rows.
__global__ void __launch_bounds__(kThreads) ArgmaxKernel(const float* logits, int vocab,
                                                         int32_t* out) {
  __shared__ float s_val[kThreads / 32];
  __shared__ int s_idx[kThreads / 32];
  const float* row = logits + static_cast<int64_t>(blockIdx.x) * vocab;
  float best = -INFINITY;
  int best_i = INT_MAX;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float v = row[i];
    if (v > best || (v == best && i < best_i)) {
      best = v;
      best_i = i;
    }
  }
  for (int offset = 16; offset > 0; offset /= 2) {
    const float v = __shfl_xor_sync(kFullMask, best, offset);
    const int i = __shfl_xor_sync(kFullMask, best_i, offset);
    if (v > best || (v == best && i < best_i)) {
      best = v;
      best_i = i;
    }
  }
  if (threadIdx.x % 32 == 0) {
    s_val[threadIdx.x / 32] = best;
    s_idx[threadIdx.x / 32] = best_i;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kThreads / 32; ++w) {
      if (s_val[w] > best || (s_val[w] == best && s_idx[w] < best_i)) {
        best = s_val[w];
        best_i = s_idx[w];
      }
    }
    out[blockIdx.x] = best_i == INT_MAX ? 0 : best_i;  // all NaN: id 0, like the CPU
  }
}

// keys = logits / temperature and ids = 0..vocab-1 for every row, plus the segment offsets.
__global__ void PrepareKeysKernel(const float* logits, int batch, int vocab,
                                  const SamplingParams* params, float* keys, int32_t* ids,
                                  int* offsets) {
  const int64_t n = static_cast<int64_t>(batch) * vocab;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int r = static_cast<int>(i / vocab);
    const float t = params[r].temperature;
    keys[i] = t > 0.0f ? logits[i] / t : logits[i];
    ids[i] = static_cast<int32_t>(i % vocab);
    if (i % vocab == 0) offsets[r] = static_cast<int>(i);
    if (i == n - 1) offsets[batch] = static_cast<int>(n);
  }
}

// exp(key - max_key) in fp64, as the CPU computes it. Below -746 the result is exactly 0 in IEEE
// arithmetic anyway; saying so up front removes the spill ptxas otherwise makes across exp's slow
// path in the loops below (issue 28).
__device__ __forceinline__ double Weight(float key, double max_key) {
  const double x = static_cast<double>(key) - max_key;
  return x < -746.0 ? 0.0 : exp(x);
}

// One block per non-greedy row over its sorted (key, id) pairs.
__global__ void __launch_bounds__(kThreads)
    SampleSortedKernel(const float* keys, const int32_t* ids, int vocab,
                       const SamplingParams* params, int32_t* out) {
  __shared__ int s_found;
  const SamplingParams p = params[blockIdx.x];
  if (Greedy(p)) return;
  const float* k = keys + static_cast<int64_t>(blockIdx.x) * vocab;
  const int32_t* id = ids + static_cast<int64_t>(blockIdx.x) * vocab;
  int keep = vocab;
  if (p.top_k > 0 && p.top_k < vocab) keep = p.top_k;
  const double max_key = k[0];

  double part = 0.0;
  for (int i = threadIdx.x; i < keep; i += kThreads) part += Weight(k[i], max_key);
  double total = 0.0;
  BlockInclusiveScan(part, &total);

  // First index i < keep whose inclusive prefix mass satisfies `crossed`; keep - 1 when none does.
  auto first_crossing = [&](auto crossed) {
    double carry = 0.0;
    for (int base = 0; base < keep; base += kThreads) {
      const int i = base + threadIdx.x;
      const double pr = i < keep ? Weight(k[i], max_key) : 0.0;
      double chunk = 0.0;
      const double prefix = carry + BlockInclusiveScan(pr, &chunk);
      if (threadIdx.x == 0) s_found = INT_MAX;
      __syncthreads();
      if (i < keep && crossed(prefix)) atomicMin(&s_found, i);
      __syncthreads();
      const int found = s_found;
      __syncthreads();  // s_found is reset by the next chunk
      if (found != INT_MAX) return found;
      carry += chunk;
    }
    return keep - 1;
  };

  if (p.top_p < 1.0f) {
    const double top_p = p.top_p;
    keep = first_crossing([&](double prefix) { return prefix / total >= top_p; }) + 1;
    double kept = 0.0;
    part = 0.0;
    for (int i = threadIdx.x; i < keep; i += kThreads) {
      part += Weight(k[i], max_key);
    }
    BlockInclusiveScan(part, &kept);
    total = kept;
  }
  const uint64_t bits = SplitMix64(SplitMix64(p.seed) ^ (p.step * 0xD1B54A32D192ED03ull));
  const double target = static_cast<double>(bits >> 11) * 0x1.0p-53 * total;
  const int chosen = first_crossing([&](double prefix) { return target < prefix; });
  if (threadIdx.x == 0) out[blockIdx.x] = id[chosen];
}

}  // namespace sampling

// ---- launchers ----

// Device scratch SampleTokens needs for `batch` rows of `vocab` logits (sorting planes and CUB's
// temporary storage). REQUIRES: batch * vocab < 2^31.
inline cudaError_t SampleTokensWorkspaceBytes(int batch, int vocab, size_t* bytes) {
  if (batch < 0 || vocab <= 0 || static_cast<int64_t>(batch) * vocab >= INT_MAX) {
    return cudaErrorInvalidValue;
  }
  size_t cub_bytes = 0;
  const cudaError_t err = sampling::SortPairsDescending(nullptr, cub_bytes, nullptr, nullptr,
                                                        nullptr, nullptr, batch * vocab, batch,
                                                        nullptr, nullptr, nullptr);
  if (err != cudaSuccess) return err;
  *bytes = sampling::FixedBytes(batch, vocab) + cub_bytes;
  return cudaSuccess;
}

// out[r] = the token drawn from logits[r, :] with params[r] (device memory, params one per row).
// `any_sampling` is false when every row is greedy: then only the argmax runs and no workspace is
// touched (a non-greedy row would get its argmax). workspace: SampleTokensWorkspaceBytes bytes,
// 256-byte aligned.
inline cudaError_t SampleTokens(const float* logits, int batch, int vocab,
                                const SamplingParams* params, bool any_sampling, void* workspace,
                                size_t workspace_bytes, int32_t* out, cudaStream_t stream) {
  if (batch < 0 || vocab <= 0) return cudaErrorInvalidValue;
  if (batch == 0) return cudaSuccess;
  sampling::ArgmaxKernel<<<batch, sampling::kThreads, 0, stream>>>(logits, vocab, out);
  cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess || !any_sampling) return err;
  size_t needed = 0;
  err = SampleTokensWorkspaceBytes(batch, vocab, &needed);
  if (err != cudaSuccess) return err;
  if (workspace == nullptr || workspace_bytes < needed ||
      reinterpret_cast<uintptr_t>(workspace) % 256 != 0) {
    return cudaErrorInvalidValue;
  }
  const size_t fixed = sampling::FixedBytes(batch, vocab);
  const sampling::Workspace w = sampling::Carve(workspace, batch, vocab, needed - fixed);
  const int64_t n = static_cast<int64_t>(batch) * vocab;
  sampling::PrepareKeysKernel<<<GridFor(n, 256), 256, 0, stream>>>(logits, batch, vocab, params,
                                                                   w.keys_in, w.ids_in, w.offsets);
  err = cudaGetLastError();
  if (err != cudaSuccess) return err;
  size_t cub_bytes = w.cub_bytes;
  err = sampling::SortPairsDescending(w.cub_storage, cub_bytes, w.keys_in, w.keys_out, w.ids_in,
                                      w.ids_out, static_cast<int>(n), batch, w.offsets,
                                      w.offsets + 1, stream);
  if (err != cudaSuccess) return err;
  sampling::SampleSortedKernel<<<batch, sampling::kThreads, 0, stream>>>(w.keys_out, w.ids_out,
                                                                         vocab, params, out);
  return cudaGetLastError();
}

}  // namespace strata::kernels::cuda
