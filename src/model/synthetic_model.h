// Synthetic models: a Model with the shapes of a config and random weights, for `strata bench`
// and tests of code that needs a model of a given size but not its knowledge. No file is read;
// tokenizer data is empty.
#pragma once

#include <cstdint>
#include <memory>

#include "src/core/dtype.h"
#include "src/core/status.h"
#include "src/model/model.h"

namespace strata {

// Weights of matrices are uniform in [-a, a] with a = 1 / sqrt(in_features), from `seed`, so that
// hidden states stay in range through any depth; norm weights are 1 and biases 0. Every tensor is
// stored in `dtype` (F16 or BF16 halves the bytes, as checkpoints store them). InvalidArgument
// when the config does not validate.
Result<std::unique_ptr<Model>> MakeSyntheticModel(const ModelConfig& config, DType dtype,
                                                  uint64_t seed = 1);

}  // namespace strata
