// A GGUF file's 4-bit blocks as strata's 4-bit weight planes (kernels/cpu/weight_q4.h, groups of
// 32), without expanding and quantizing again: each 32-element block or sub-block becomes one
// group, its codes unchanged.
//   Q4_0: x = d * (q - 8): scale d, minimum -8 d; both exact in fp16 (unless -8 d overflows it,
//         which GgufQ4Planes refuses), so every element is the fp32 value ggml expands it to.
//   Q4_1: x = d * q + m: scale d, minimum m; exact likewise.
//   Q4_K: x = (d * sc) * q - dmin * m per 32-element sub-block (6-bit sc and m): scale and minimum
//         are those products rounded to fp16 (relative error at most 2^-11 each), and the codes'
//         nibbles move into the planes' order (a Q4_K byte holds elements l and l + 32 of a pair
//         of sub-blocks; a group's byte j holds its elements j and j + 16).
#pragma once

#include <cstdint>

namespace strata {

// Whether GgufQ4Planes takes ggml type `type`.
bool GgufHasQ4Blocks(uint32_t type);

// Writes the [rows, cols] tensor of `type` at `src` (rows whole blocks each, back to back) as
// codes [rows, cols / 2] and params [rows, cols / 32, 2], undoing llama.cpp's q/k row permutation
// for `unpermute_heads` heads when positive (UnpermuteGgufQk's row order). Parallel over rows.
// False when a scale or minimum the planes need overflows fp16 (a Q4_0 scale above 8188, say):
// the planes are then unusable, and the caller quantizes the tensor's expansion instead.
// REQUIRES: GgufHasQ4Blocks(type); cols a multiple of the type's block size; rows a multiple of
// 2 * unpermute_heads when it is positive.
bool GgufQ4Planes(uint32_t type, const uint8_t* src, int64_t rows, int64_t cols,
                  int unpermute_heads, uint8_t* codes, uint16_t* params);

}  // namespace strata
