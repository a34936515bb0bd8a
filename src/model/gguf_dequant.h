// Expansion of GGUF tensor data to F32, with exactly ggml's block layouts and arithmetic
// (ggml-common.h, dequantize_row_* in ggml-quants.c), 32-element blocks:
//   Q4_0: fp16 d, 16 bytes; element j = d * ((q[j] & 15) - 8), element j+16 = d * ((q[j] >> 4) - 8)
//   Q4_1: fp16 d, fp16 m, 16 bytes; the same nibbles, x = d * q + m
//   Q5_0: fp16 d, uint32 qh, 16 bytes; the nibbles plus bit j of qh as bit 4, x = d * (q - 16)
//   Q5_1: fp16 d, fp16 m, uint32 qh, 16 bytes; x = d * q + m
//   Q8_0: fp16 d, 32 int8; x = d * q
// and 256-element super-blocks of sub-blocks with their own quantized scales (the "K-quants"):
//   Q2_K: 16 x (4-bit scale, 4-bit min), 2-bit values, fp16 d and dmin; x = d*sc * q - dmin*m
//   Q3_K: 3-bit values (2 low bits, a high bit mask), 16 signed 6-bit scales, fp16 d
//   Q4_K: fp16 d and dmin, 8 x (6-bit scale, 6-bit min) in 12 bytes, 4-bit values
//   Q5_K: as Q4_K plus a fifth bit per value
//   Q6_K: 6-bit values (4 low bits, 2 high bits), 16 int8 scales, fp16 d; x = d*sc * (q - 32)
// and the two 4-bit types on a non-linear grid of 16 values v[q] (ggml's kvalues_iq4nl):
//   IQ4_NL: fp16 d, 16 bytes (32 elements, nibbles as Q4_0); x = d * v[q]
//   IQ4_XS: 256 elements: fp16 d, 8 signed 6-bit sub-block scales, 128 bytes; x = d*sc * v[q]
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

// True when DequantizeGguf() handles ggml type `type` (GgufDequantizableTypes(); not Q8_K,
// which ggml keeps for intermediate products, nor the other IQ types and the TQ types).
bool GgufCanDequantize(uint32_t type);
// Those types' names, for messages: "F32, F16, BF16, Q4_0, ..., IQ4_XS".
std::string GgufDequantizableTypes();

// Expands `n` elements of ggml type `type` at `src` into `dst`; large tensors are split over
// OpenMP threads. Unsupported, naming the type, when GgufCanDequantize(type) is false.
// REQUIRES: n is a multiple of the type's block size; `src` holds the n elements' blocks and
// `dst` n floats; no alignment is required of either.
Status DequantizeGguf(uint32_t type, const uint8_t* src, int64_t n, float* dst);

// Expands GGUF tensor data of `type` and outermost-first `shape` ([rows, cols] when
// `unpermute_heads` > 0) into `dst`, undoing llama.cpp's q/k permutation for that many heads
// (UnpermuteGgufQk) when `unpermute_heads` > 0. REQUIRES as DequantizeGguf, for the shape's numel.
Status ExpandGgufTensor(uint32_t type, const uint8_t* src, const std::vector<int64_t>& shape,
                        int unpermute_heads, float* dst);

// The 6-bit scale and minimum of sub-block j (0-7) of a Q4_K or Q5_K super-block from its 12
// packed bytes (ggml's get_scale_min_k4).
void GgufScaleMinK4(int j, const uint8_t* packed, int* scale, int* min);

// Undoes the row permutation llama.cpp's converter applies to attn_q/attn_k for its interleaved
// RoPE, giving Hugging Face's rotate-half layout. With rows split into `n_head` heads of head_dim
// rows each, HF row h*head_dim + j*head_dim/2 + i is GGUF row h*head_dim + 2*i + j (j in {0, 1}).
// REQUIRES: rows is a multiple of 2 * n_head; `src` and `dst` ([rows, cols]) do not overlap.
void UnpermuteGgufQk(const float* src, int64_t rows, int64_t cols, int64_t n_head, float* dst);

}  // namespace strata
