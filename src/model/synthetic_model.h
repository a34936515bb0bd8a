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

// Where a synthetic model's weights are.
enum class SyntheticWeights {
  kInMemory,  // in buffers the Model owns, filled when it is made: any engine runs it
  kOnDemand,  // nowhere: Model::ReadTensorBytes makes any range of a tensor when asked, so the
              // offloading engine writes them straight to their homes and nothing else holds
              // them (Model::weights_on_demand)
};

// Weights of matrices are uniform in [-a, a] with a = 1 / sqrt(in_features), from `seed`, so that
// hidden states stay in range through any depth; norm weights are 1 and biases 0. Each element is
// one of 65536 evenly spaced levels in that range chosen by a counter-based hash of (seed, tensor,
// index), so a range of a tensor is the same whichever way, in whatever order and on however many
// threads it is made (in parallel, OpenMP), and the two kinds of SyntheticWeights hold the same
// bytes. Every tensor is stored in `dtype` (F16 or BF16 halves the bytes, as checkpoints store
// them; the levels rounded to it). InvalidArgument when the config does not validate or `dtype`
// is not F32, F16 or BF16; ResourceExhausted when kOnDemand cannot reserve the address space.
Result<std::unique_ptr<Model>> MakeSyntheticModel(
    const ModelConfig& config, DType dtype, uint64_t seed = 1,
    SyntheticWeights weights = SyntheticWeights::kInMemory);

}  // namespace strata
