// Writing and reading the 4-bit KV cache in the format of kernels/kv_q4_format.h (CPU side). The
// writer here is the one the runtime uses for prefill (many tokens) and decode (one token per
// step); the row reader is the reference every attention kernel and test checks against.
#pragma once

#include <cstdint>

#include "kernels/kv_q4_format.h"

namespace strata::kernels::cpu {

// Quantizes one group x[g] into codes[g / 2] and params[2] = {scale, minimum} as fp16 bits,
// exactly as kv_q4_format.h says: scale and minimum are rounded to fp16 first, each code is
// clamp(round-to-nearest-even((x - minimum) / scale), 0, 15), every code is 0 when the rounded
// scale is 0 (max == min), and byte j holds element j (low nibble) and element j + g/2 (high).
// REQUIRES: g even; x finite.
void QuantizeQ4Group(const float* x, int g, uint8_t* codes, uint16_t* params);

// One token of one head: Q4Groups(head_dim) groups (the last one shorter at head_dim 80 and 96),
// codes[Q4CodeBytes(head_dim)], params[Q4ParamHalves(head_dim)]. REQUIRES: head_dim valid for
// the format.
void QuantizeQ4Row(const float* x, int head_dim, uint8_t* codes, uint16_t* params);
// x[i] = code * float(scale) + float(minimum): what every reader of the format computes.
void DequantizeQ4Row(const uint8_t* codes, const uint16_t* params, int head_dim, float* x);

// One layer's keys (or values) in the cache: planes as in kv_q4_format.h.
struct Q4CacheShape {
  int batch = 0;
  int num_kv_heads = 0;
  int max_len = 0;
  int head_dim = 0;
};

// Quantizes rows[batch * tokens, num_kv_heads * head_dim] (token-major, as a Linear writes them)
// into slots [first_slot, first_slot + tokens) of the planes: tokens == 1 is a decode step's
// append, tokens > 1 a prefill. With `rotate`, each head vector is Walsh–Hadamard rotated before
// quantization (keys only; see hadamard.h). Parallel over rows (OpenMP).
// REQUIRES: 0 <= first_slot, first_slot + tokens <= max_len; rotate => head_dim a power of two.
void WriteQ4Cache(const Q4CacheShape& s, const float* rows, int tokens, int first_slot, bool rotate,
                  uint8_t* codes, uint16_t* params);

}  // namespace strata::kernels::cpu
