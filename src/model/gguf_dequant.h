// Expansion of GGUF tensor data to F32, with exactly ggml's block layouts:
//   Q4_0: fp16 d, 16 bytes; element j = d * ((q[j] & 15) - 8), element j+16 = d * ((q[j] >> 4) - 8)
//   Q4_1: fp16 d, fp16 m, 16 bytes; the same nibbles, x = d * q + m
//   Q8_0: fp16 d, 32 int8; x = d * q
#pragma once

#include <cstdint>

#include "src/core/status.h"

namespace strata {

// True when DequantizeGguf() handles ggml type `type` (F32, F16, BF16, Q4_0, Q4_1, Q8_0).
bool GgufCanDequantize(uint32_t type);

// Expands `n` elements of ggml type `type` at `src` into `dst`; large tensors are split over
// OpenMP threads. Unsupported, naming the type, when GgufCanDequantize(type) is false.
// REQUIRES: n is a multiple of the type's block size; `src` holds the n elements' blocks and
// `dst` n floats; no alignment is required of either.
Status DequantizeGguf(uint32_t type, const uint8_t* src, int64_t n, float* dst);

// Undoes the row permutation llama.cpp's converter applies to attn_q/attn_k for its interleaved
// RoPE, giving Hugging Face's rotate-half layout. With rows split into `n_head` heads of head_dim
// rows each, HF row h*head_dim + j*head_dim/2 + i is GGUF row h*head_dim + 2*i + j (j in {0, 1}).
// REQUIRES: rows is a multiple of 2 * n_head; `src` and `dst` ([rows, cols]) do not overlap.
void UnpermuteGgufQk(const float* src, int64_t rows, int64_t cols, int64_t n_head, float* dst);

}  // namespace strata
