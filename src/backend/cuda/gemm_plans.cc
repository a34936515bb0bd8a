#include "src/backend/cuda/gemm_plans.h"

#include <bit>
#include <functional>

#include "src/core/check.h"

namespace strata {

GemmEpilogue EpilogueOf(bool bias, bool relu) {
  if (bias) return relu ? GemmEpilogue::kBiasRelu : GemmEpilogue::kBias;
  return relu ? GemmEpilogue::kRelu : GemmEpilogue::kNone;
}

const char* GemmEpilogueName(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::kNone: return "none";
    case GemmEpilogue::kBias: return "bias";
    case GemmEpilogue::kRelu: return "relu";
    case GemmEpilogue::kBiasRelu: return "bias_relu";
  }
  return "?";
}

bool RunsOnLt(GemmPath path) {
  return path == GemmPath::kHalfTensorCore || path == GemmPath::kHalf ||
         path == GemmPath::kRoundedWeight;
}

uint32_t AlignmentOf(const void* address) {
  const auto a = reinterpret_cast<uintptr_t>(address);
  if (a % 256 == 0) return 256;
  return uint32_t{1} << std::countr_zero(a);
}

size_t LtGemmKeyHash::operator()(const LtGemmKey& key) const {
  size_t h = 0;
  const auto mix = [&h](uint64_t v) {
    h ^= std::hash<uint64_t>{}(v) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  };
  mix(static_cast<uint32_t>(key.m));
  mix(static_cast<uint32_t>(key.n));
  mix(static_cast<uint32_t>(key.k));
  mix(static_cast<uint64_t>(key.inputs) << 16 | static_cast<uint64_t>(key.output) << 8 |
      static_cast<uint64_t>(key.epilogue));
  mix(uint64_t{key.x_alignment} << 32 | key.w_alignment);
  mix(uint64_t{key.y_alignment} << 32 | key.bias_alignment);
  return h;
}

LtGemmKey LtGemmKeyOf(int m, int n, int k, SpanType inputs, SpanType output, bool relu,
                      const GemmOperands& operands) {
  STRATA_CHECK_MSG(inputs == SpanType::kF16 || inputs == SpanType::kBF16,
                   "a cuBLASLt GEMM's inputs are not fp16 or bf16");
  STRATA_CHECK_MSG(output == SpanType::kF32 || output == inputs,
                   "a cuBLASLt GEMM's output is neither fp32 nor of its inputs' type");
  STRATA_CHECK(m > 0 && n > 0 && k > 0);
  LtGemmKey key;
  key.m = m;
  key.n = n;
  key.k = k;
  key.inputs = inputs;
  key.output = output;
  key.epilogue = EpilogueOf(operands.bias != nullptr, relu);
  key.x_alignment = AlignmentOf(operands.x);
  key.w_alignment = AlignmentOf(operands.w);
  key.y_alignment = AlignmentOf(operands.y);
  key.bias_alignment = AlignmentOf(operands.bias);
  return key;
}

}  // namespace strata
