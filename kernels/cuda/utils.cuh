// Small device helpers shared by the kernels of kernels/cuda: warp reductions, fp16 bit
// reinterpretation, the 4-bit unpack trick, the tensor-core MMA, and the DISPATCH macros that turn
// run-time sizes into compile-time constants over closed sets.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/params.h"

namespace strata::kernels::cuda {

// ---- dispatch ----

// Runs the body with kHeadDim a constant for each supported head size; any other size makes the
// enclosing launcher return cudaErrorInvalidValue.
#define STRATA_DISPATCH_DECODE_HEAD_DIM(head_dim, kHeadDim, ...) \
  switch (head_dim) {                                           \
    case 64: {                                                  \
      constexpr int kHeadDim = 64;                              \
      __VA_ARGS__                                               \
      break;                                                    \
    }                                                           \
    case 128: {                                                 \
      constexpr int kHeadDim = 128;                             \
      __VA_ARGS__                                               \
      break;                                                    \
    }                                                           \
    default:                                                    \
      return cudaErrorInvalidValue;                             \
  }

// Runs the body with kMaxHeadDim the smallest of 64, 128, 256 that holds head_dim.
#define STRATA_DISPATCH_MAX_HEAD_DIM(head_dim, kMaxHeadDim, ...) \
  if ((head_dim) <= 64) {                                       \
    constexpr int kMaxHeadDim = 64;                             \
    __VA_ARGS__                                                 \
  } else if ((head_dim) <= 128) {                               \
    constexpr int kMaxHeadDim = 128;                            \
    __VA_ARGS__                                                 \
  } else if ((head_dim) <= 256) {                               \
    constexpr int kMaxHeadDim = 256;                            \
    __VA_ARGS__                                                 \
  } else {                                                      \
    return cudaErrorInvalidValue;                               \
  }

// Runs the body with T the element type of an activation or weight of ElemType `type` (float,
// __half or __nv_bfloat16); any other value makes the enclosing launcher return
// cudaErrorInvalidValue.
#define STRATA_DISPATCH_ELEM_TYPE(type, T, ...) \
  switch (type) {                               \
    case ElemType::kF32: {                      \
      using T = float;                          \
      __VA_ARGS__                               \
      break;                                    \
    }                                           \
    case ElemType::kF16: {                      \
      using T = __half;                         \
      __VA_ARGS__                               \
      break;                                    \
    }                                           \
    case ElemType::kBF16: {                     \
      using T = __nv_bfloat16;                  \
      __VA_ARGS__                               \
      break;                                    \
    }                                           \
    default:                                    \
      return cudaErrorInvalidValue;             \
  }

// ---- device helpers ----

// An element of any of the three types as fp32 (exact), and fp32 rounded to one (to nearest
// even): the kernels over activations compute in fp32 and round only what they store.
__device__ __forceinline__ float AsFloat(float x) { return x; }
__device__ __forceinline__ float AsFloat(__half x) { return __half2float(x); }
__device__ __forceinline__ float AsFloat(__nv_bfloat16 x) { return __bfloat162float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

constexpr unsigned kFullMask = 0xffffffffu;

// One element of a table of type t at index i, widened to float (exact for all three types).
__device__ __forceinline__ float LoadAsFloat(const void* table, ElemType t, int64_t i) {
  if (t == ElemType::kF32) return static_cast<const float*>(table)[i];
  const uint16_t bits = static_cast<const uint16_t*>(table)[i];
  if (t == ElemType::kF16) return __half2float(__ushort_as_half(bits));
  return __uint_as_float(static_cast<uint32_t>(bits) << 16);
}

__device__ __forceinline__ float WarpMax(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v = fmaxf(v, __shfl_xor_sync(kFullMask, v, offset));
  return v;
}

__device__ __forceinline__ float WarpSum(float v) {
  for (int offset = 16; offset > 0; offset /= 2) v += __shfl_xor_sync(kFullMask, v, offset);
  return v;
}

__device__ __forceinline__ uint32_t HalfBits2(__half2 h) {
  return *reinterpret_cast<const uint32_t*>(&h);
}

__device__ __forceinline__ __half2 Half2FromBits(uint32_t u) {
  return *reinterpret_cast<const __half2*>(&u);
}

// Packs two floats into an fp16 pair (lo in the low 16 bits), round to nearest even.
__device__ __forceinline__ uint32_t PackHalf2(float lo, float hi) {
  return HalfBits2(__floats2half2_rn(lo, hi));
}

// The nibbles at bits [shift, shift + 4) and [shift + 16, shift + 20) of w as the fp16 pair
// {1024 + n_lo, 1024 + n_hi}: OR-ing a nibble into the mantissa of 1024.0 (0x6400) makes the
// number 1024 + n exactly, with no integer-to-float conversion.
template <int kShift>
__device__ __forceinline__ uint32_t NibblesPlus1024(uint32_t w) {
  return ((w >> kShift) & 0x000F000Fu) | 0x64006400u;
}

// {n_lo, n_hi} as exact fp16 values.
template <int kShift>
__device__ __forceinline__ __half2 Nibbles(uint32_t w) {
  return __hsub2(Half2FromBits(NibblesPlus1024<kShift>(w)), __half2half2(__ushort_as_half(0x6400)));
}

// d += a * b on the tensor cores: a 16x16 fp16 A (row-major fragment a[4]), a 16x8 fp16 B
// (column-major fragment b[2]), an fp32 16x8 accumulator d[4]; fragment layouts as in the PTX
// ISA for mma.m16n8k16 (lane = 4 * group + thread_in_group):
//   a[0] = A[group][2t, 2t+1]      a[1] = A[group+8][2t, 2t+1]
//   a[2] = A[group][2t+8, 2t+9]    a[3] = A[group+8][2t+8, 2t+9]
//   b[0] = B[2t, 2t+1][group]      b[1] = B[2t+8, 2t+9][group]
//   d[0..1] = D[group][2t, 2t+1]   d[2..3] = D[group+8][2t, 2t+1]
// sm_75 has only the k8 shape; two of those make one k16.
__device__ __forceinline__ void MmaF16(float (&d)[4], const uint32_t (&a)[4],
                                       const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
      "{%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 750
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(b[0]));
  asm("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a[2]), "r"(a[3]), "r"(b[1]));
#elif defined(__CUDA_ARCH__)
  __trap();  // no tensor-core MMA below sm_75
#endif
}

// The unnormalised Walsh–Hadamard transform of x[d] in place (kernels/cpu/hadamard.h's butterflies;
// the caller scales by 1/sqrt(d)), by one warp; x is complete for every lane on return.
// REQUIRES: d a power of two; x shared memory that only this warp uses, written and the warp
// synchronised (__syncwarp) before the call; every lane calls.
__device__ __forceinline__ void WarpHadamard(float* x, int d, int lane) {
  for (int len = 1; len < d; len <<= 1) {
    for (int p = lane; p < d / 2; p += 32) {
      const int i = (p / len) * 2 * len + p % len;
      const float a = x[i];
      const float c = x[i + len];
      x[i] = a + c;
      x[i + len] = a - c;
    }
    __syncwarp();
  }
}

// Decode attention's queries: rows [0, kRows) of s_q get q's rows [0, heads) (kHeadDim floats each,
// `heads` <= kRows; the other rows 0), then, when `rotate`, the unnormalised Walsh–Hadamard
// transform of each row, as the keys were rotated. Returns the scale the rotation still owes the
// scores (1/sqrt(kHeadDim), or 1). Every thread of the block (kThreads) calls; the rows are
// complete for all of them on return.
template <int kRows, int kHeadDim, int kThreads, int kStride>
__device__ __forceinline__ float LoadQueryRows(float (*s_q)[kStride], const float* q, int heads,
                                               bool rotate) {
  for (int i = threadIdx.x; i < kRows * kHeadDim; i += kThreads) {
    const int hh = i / kHeadDim;
    const int d = i % kHeadDim;
    s_q[hh][d] = hh < heads ? q[static_cast<int64_t>(hh) * kHeadDim + d] : 0.0f;
  }
  __syncthreads();
  if (!rotate) return 1.0f;
  for (int len = 1; len < kHeadDim; len <<= 1) {
    for (int i = threadIdx.x; i < kRows * kHeadDim / 2; i += kThreads) {
      const int hh = i / (kHeadDim / 2);
      const int pair = i % (kHeadDim / 2);
      const int j = (pair / len) * 2 * len + pair % len;
      const float x = s_q[hh][j];
      const float y = s_q[hh][j + len];
      s_q[hh][j] = x + y;
      s_q[hh][j + len] = x - y;
    }
    __syncthreads();
  }
  return 1.0f / sqrtf(static_cast<float>(kHeadDim));
}

// Grid size for a grid-stride loop over n elements with `threads` per block.
inline unsigned GridFor(int64_t n, int threads) {
  const int64_t blocks = (n + threads - 1) / threads;
  return static_cast<unsigned>(blocks < 65535 * 8 ? (blocks < 1 ? 1 : blocks) : 65535 * 8);
}

}  // namespace strata::kernels::cuda
