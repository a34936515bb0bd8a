// The orthonormal Walsh–Hadamard transform over a head: the "rotated keys" option of the 4-bit KV
// cache. H = H_n / sqrt(n) (Sylvester order) is symmetric and orthonormal, so (Hq)·(Hk) = q·k:
// rotating keys before quantization and queries before the dot product leaves scores unchanged
// in exact arithmetic while spreading a few outlier channels over the whole head, which shrinks
// the per-group range the 4-bit codes must cover. Values are never rotated.
#pragma once

namespace strata::kernels::cpu {

// True when `dim` is a power of two (the only sizes the fast transform supports).
constexpr bool HadamardSupports(int dim) { return dim > 0 && (dim & (dim - 1)) == 0; }

// x[rows, dim] = x * H, row by row, in place. Applying it twice gives back x (up to rounding).
// REQUIRES: HadamardSupports(dim).
void HadamardRotate(float* x, long rows, int dim);

}  // namespace strata::kernels::cpu
