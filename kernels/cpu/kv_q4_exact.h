// The exact side rows of the 4-bit KV cache (Q4ExactRows in attention_q4.h): per (sequence, KV
// head), fp32 copies of the keys and values of the sequence's first `sink` real tokens and of a
// ring of its `window` most recent ones. Every token is still quantized into the 4-bit planes as
// usual; decode attention reads these tokens from here instead, since the first token (the
// attention sink) and the latest ones carry most of the weight and most of the error.
#pragma once

namespace strata::kernels::cpu {

// Floats of one plane (keys or values) of the exact rows of `batch` sequences.
long ExactRowsFloats(int batch, int num_kv_heads, int head_dim, int sink, int window);

// Stores the exact tokens among rows src[batch * tokens, num_kv_heads * head_dim] (token-major,
// as a Linear writes them), written at slots [first_slot, first_slot + tokens): slot t of
// sequence b is its token t - start[b] (none before start[b]), placed by Q4ExactRows' rule into
// keys and values [batch, num_kv_heads, sink + window, head_dim]. Keys are given as the 4-bit
// cache gets them (smoothed already when it is) and rotated here when `rotate_keys`.
// REQUIRES: sink, window >= 0; a power-of-two head_dim when rotate_keys.
void WriteExactRows(int batch, int num_kv_heads, int head_dim, int sink, int window,
                    const float* k_rows, const float* v_rows, int tokens, int first_slot,
                    const int* start, bool rotate_keys, float* keys, float* values);

}  // namespace strata::kernels::cpu
