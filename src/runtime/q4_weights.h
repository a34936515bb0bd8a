// A model's weights in 4 bits (kernels/cpu/weight_q4.h, `--compress-weight`): every matrix whose
// rows are whole groups of the model's Model::q4_group() (policy's StoredQ4: the token and
// position embeddings, the projections, an untied output projection) quantized once, or, where a
// GGUF file holds it in Q4_0, Q4_1 or Q4_K blocks, those blocks taken as they are
// (Model::GgufQ4Planes); vectors (norms, biases) and other matrices stay as they are, as in
// FlexGen. The engine stores the planes in the weights' homes and expands a layer once per layer
// per token step; RoundTripped() is the same quantize-then-expand for the frozen reference engine
// (tests/reference/), which a 4-bit run is held to. A store written by `strata convert
// --compress-weight` already holds the planes: they are used as stored, not quantized again.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "src/memory/weight_homes.h"
#include "src/model/model.h"

namespace strata {

// Quantizes the matrix `w` (f32, f16 or bf16) into kernels/cpu/weight_q4.h's planes in groups of
// `group`, sized by WeightQ4CodeBytes / WeightQ4ParamHalves. REQUIRES: a 2-D `w` whose rows are
// whole groups.
void QuantizeWeight(const TensorView& w, int group, uint8_t* codes, uint16_t* params);

class Q4Weights {
 public:
  // Quantizes `model`'s matrices (parallel over rows; weights made on demand are made one matrix
  // at a time for it), or takes the planes of its kQ4 tensors (a 4-bit store's) as they are.
  // REQUIRES: `model` outlives this object.
  explicit Q4Weights(const Model& model);

  // The planes of the 4-bit matrix whose model data is `source.data`. REQUIRES: it is one.
  Q4Planes Planes(const TensorView& source) const;
  // For CopyWeightsHome.
  WeightQ4PlanesOf PlanesOf() const;

  // The weights with every 4-bit matrix expanded back to fp32 (a tied output projection stays
  // the expanded embedding). Expanded on the first call, then kept.
  // REQUIRES: !model.weights_on_demand() (its other tensors are not in memory).
  const ModelWeights& RoundTripped();

 private:
  struct Entry {
    TensorView source;
    const uint8_t* codes = nullptr;  // owned_codes, or the store's
    const uint16_t* params = nullptr;
    std::vector<uint8_t> owned_codes;
    std::vector<uint16_t> owned_params;
  };
  void Add(const TensorView& t);

  const Model& model_;
  const int group_;                      // Model::q4_group()
  std::map<const void*, Entry> planes_;  // by the model tensor's data
  std::unique_ptr<ModelWeights> round_tripped_;
  std::vector<std::vector<float>> expanded_;
};

}  // namespace strata
