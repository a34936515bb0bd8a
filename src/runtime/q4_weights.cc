#include "src/runtime/q4_weights.h"

#include "src/backend/q4_sizes.h"
#include "src/backend/weight_q4_host.h"
#include "src/core/check.h"

namespace strata {
namespace {

bool Quantized(const TensorView& t, int group) {
  return t.present() && t.shape.size() == 2 && WeightQ4Supports(t.dim(1), group);
}

}  // namespace

void QuantizeWeight(const TensorView& w, int group, uint8_t* codes, uint16_t* params) {
  QuantizeWeightQ4OnHost(w.dtype, w.data, w.dim(0), w.dim(1), group, codes, params);
}

Q4Weights::Q4Weights(const Model& model) : model_(model), group_(model.q4_group()) {
  const ModelWeights& weights = model.weights();
  Add(weights.token_embedding);
  Add(weights.position_embedding);
  Add(weights.lm_head);  // a tied one is the embedding, quantized once
  for (const LayerWeights& l : weights.layers) {
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      Add(*t);
    }
  }
}

void Q4Weights::Add(const TensorView& t) {
  if (!Quantized(t, group_) || planes_.count(t.data) > 0) return;
  Entry& p = planes_[t.data];
  p.source = t;
  if (t.dtype == DType::kQ4) {
    const auto* stored = static_cast<const Q4Planes*>(t.data);
    p.codes = stored->codes;
    p.params = stored->params;
    return;
  }
  const long rows = static_cast<long>(t.dim(0)), cols = static_cast<long>(t.dim(1));
  p.owned_codes.resize(static_cast<size_t>(WeightQ4CodeBytes(rows, cols)));
  p.owned_params.resize(static_cast<size_t>(WeightQ4ParamHalves(rows, cols, group_)));
  if (model_.weights_on_demand()) {  // made for the quantizer, one matrix at a time
    std::vector<uint8_t> bytes(t.bytes());
    model_.ReadTensorBytes(t, 0, bytes.size(), bytes.data());
    TensorView made = t;
    made.data = bytes.data();
    QuantizeWeight(made, group_, p.owned_codes.data(), p.owned_params.data());
  } else if (!model_.GgufQ4Planes(t, p.owned_codes.data(), p.owned_params.data())) {
    QuantizeWeight(t, group_, p.owned_codes.data(), p.owned_params.data());
  }
  p.codes = p.owned_codes.data();
  p.params = p.owned_params.data();
}

Q4Planes Q4Weights::Planes(const TensorView& source) const {
  const auto it = planes_.find(source.data);
  STRATA_CHECK(it != planes_.end() && it->second.source.shape == source.shape);
  return {it->second.codes, it->second.params, group_};
}

WeightQ4PlanesOf Q4Weights::PlanesOf() const {
  return [this](const TensorView& source) { return Planes(source); };
}

const ModelWeights& Q4Weights::RoundTripped() {
  STRATA_CHECK(!model_.weights_on_demand());
  if (round_tripped_ != nullptr) return *round_tripped_;
  std::map<const void*, const float*> expanded;
  for (const auto& [data, p] : planes_) {
    const long rows = static_cast<long>(p.source.dim(0)), cols = static_cast<long>(p.source.dim(1));
    std::vector<float>& out = expanded_.emplace_back(static_cast<size_t>(rows * cols));
    ExpandWeightQ4OnHost(p.codes, p.params, rows, cols, group_, out.data());
    expanded[data] = out.data();
  }
  round_tripped_ = std::make_unique<ModelWeights>(model_.weights());
  auto swap = [&expanded](TensorView& t) {
    const auto it = expanded.find(t.data);
    if (!t.present() || it == expanded.end()) return;
    t.dtype = DType::kF32;
    t.data = it->second;
  };
  ModelWeights& w = *round_tripped_;
  swap(w.token_embedding);
  swap(w.position_embedding);
  swap(w.lm_head);
  for (LayerWeights& l : w.layers) {
    for (TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) swap(*t);
  }
  return w;
}

}  // namespace strata
