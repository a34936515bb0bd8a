// The accounting's description (policy/model_spec.h) of a loaded model, so that a run's bytes can
// be set next to the plan's figures for the same model.
#pragma once

#include "policy/model_spec.h"
#include "src/core/status.h"
#include "src/model/model.h"

namespace strata {

// Unsupported when a ModelSpec cannot describe the model byte for byte: weights of more than one
// dtype, or biases on some projections but not others. `activation_dtype_bytes` is what the
// backend keeps its activations in (Backend::ActivationType; 4: the fp32 CPU backend).
Result<ModelSpec> ModelSpecOf(const Model& model, int activation_dtype_bytes = 4);

// The model's weights as Backend::ActivationType takes them: kBF16 when a tensor is BF16 (a
// model trained in bf16), else kF16 when one is F16, else kF32 (4-bit tensors do not count).
DType WeightDTypeOf(const Model& model);

}  // namespace strata
