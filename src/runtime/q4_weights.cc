#include "src/runtime/q4_weights.h"

#include "kernels/cpu/weight_q4.h"
#include "src/core/check.h"

namespace strata {
namespace {

using kernels::cpu::WeightQ4Source;

WeightQ4Source SourceType(DType dtype) {
  switch (dtype) {
    case DType::kF32:
      return WeightQ4Source::kF32;
    case DType::kF16:
      return WeightQ4Source::kF16;
    case DType::kBF16:
      return WeightQ4Source::kBF16;
  }
  return WeightQ4Source::kF32;
}

bool Quantized(const TensorView& t) {
  return t.present() && t.shape.size() == 2 && kernels::cpu::WeightQ4Supports(t.dim(1));
}

}  // namespace

Q4Weights::Q4Weights(const ModelWeights& weights) : weights_(weights) {
  Quantize(weights.token_embedding);
  Quantize(weights.position_embedding);
  Quantize(weights.lm_head);  // a tied one is the embedding, quantized once
  for (const LayerWeights& l : weights.layers) {
    for (const TensorView* t : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w_gate, &l.w_up, &l.w_down}) {
      Quantize(*t);
    }
  }
}

void Q4Weights::Quantize(const TensorView& t) {
  if (!Quantized(t) || planes_.count(t.data) > 0) return;
  const long rows = static_cast<long>(t.dim(0)), cols = static_cast<long>(t.dim(1));
  Entry& p = planes_[t.data];
  p.source = t;
  p.codes.resize(kernels::cpu::WeightQ4CodeBytes(rows, cols));
  p.params.resize(kernels::cpu::WeightQ4ParamHalves(rows, cols));
  kernels::cpu::QuantizeWeightQ4(SourceType(t.dtype), t.data, rows, cols, p.codes.data(),
                                 p.params.data());
}

WeightQ4Planes Q4Weights::Planes(const TensorView& source) const {
  const auto it = planes_.find(source.data);
  STRATA_CHECK(it != planes_.end() && it->second.source.shape == source.shape);
  return {it->second.codes.data(), it->second.params.data()};
}

WeightQ4PlanesOf Q4Weights::PlanesOf() const {
  return [this](const TensorView& source) { return Planes(source); };
}

const ModelWeights& Q4Weights::RoundTripped() {
  if (round_tripped_ != nullptr) return *round_tripped_;
  std::map<const void*, const float*> expanded;
  for (const auto& [data, p] : planes_) {
    const long rows = static_cast<long>(p.source.dim(0)), cols = static_cast<long>(p.source.dim(1));
    std::vector<float>& out = expanded_.emplace_back(static_cast<size_t>(rows * cols));
    kernels::cpu::ExpandWeightQ4(p.codes.data(), p.params.data(), rows, cols, out.data());
    expanded[data] = out.data();
  }
  round_tripped_ = std::make_unique<ModelWeights>(weights_);
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
