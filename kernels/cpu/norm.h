// Normalisations over the last dimension, fp32, one row per token. In-place is allowed (y == x).
#pragma once

namespace strata::kernels::cpu {

// y = (x - mean) / sqrt(var + eps) * weight + bias, per row of `dim` elements.
void LayerNorm(const float* x, const float* weight, const float* bias, float eps, int rows, int dim,
               float* y);
// y = x / sqrt(mean(x^2) + eps) * weight, per row (Llama's RMSNorm, computed in fp32).
void RmsNorm(const float* x, const float* weight, float eps, int rows, int dim, float* y);

}  // namespace strata::kernels::cpu
