// Element-wise MLP activations, fp32, in place.
#pragma once

#include <cstddef>

namespace strata::kernels::cpu {

void Relu(float* x, size_t n);
// Exact GELU: 0.5 x (1 + erf(x / sqrt 2)), as OPT's "gelu".
void Gelu(float* x, size_t n);
// gate[i] = silu(gate[i]) * up[i] — the SwiGLU of the Llama MLP.
void SiluMul(float* gate, const float* up, size_t n);

}  // namespace strata::kernels::cpu
