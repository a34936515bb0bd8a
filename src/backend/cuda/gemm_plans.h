// What a Linear's GEMM asks of cuBLASLt, as plain C++ (no CUDA header), so that CI checks it
// without a GPU: which GEMMs run on cuBLASLt, their epilogue, and the key under which the CUDA
// backend chooses an algorithm once and keeps it (gemm_lt.h). Thread-safe pure functions.
#pragma once

#include <cstddef>
#include <cstdint>

#include "src/backend/cuda/cuda_scratch.h"
#include "src/backend/memory.h"

namespace strata {

// What cuBLASLt applies to the fp32 accumulator before it rounds to the output type: nothing, a
// bias broadcast over the rows, a ReLU, or the bias and then the ReLU. Adding the bias there
// rounds once (an AddBias kernel after a half-output GEMM rounds twice) and saves a pass over the
// output; ReLU commutes with rounding, so fusing it changes no value.
enum class GemmEpilogue { kNone, kBias, kRelu, kBiasRelu };
GemmEpilogue EpilogueOf(bool bias, bool relu);
const char* GemmEpilogueName(GemmEpilogue epilogue);  // "none", "bias", "relu", "bias_relu"

// Whether a Linear on `path` runs on cuBLASLt: every path whose GEMM inputs are fp16/bf16 (the
// tensor-core GEMMs, all of a GPU run's), with y fp32 or of the inputs' type. The fp32 paths stay
// on cublasGemmEx, with the bias and the activation as kernels after it.
bool RunsOnLt(GemmPath path);

// The largest power of two, at most 256, that divides `address` (256 for null): cuBLASLt's
// algorithms each need their operands aligned to some such number, and its heuristic picks only
// among those the operands satisfy.
uint32_t AlignmentOf(const void* address);

// One shape of a Linear's GEMM as cuBLASLt plans it: y[m, n] = x[m, k] * w[n, k]^T with inputs of
// `inputs`' type (kF16 or kBF16), y of `output`'s (kF32 or the inputs'), the epilogue, and the
// alignment of each operand (AlignmentOf), on which the choice of algorithm depends too.
struct LtGemmKey {
  int m = 0;
  int n = 0;
  int k = 0;
  SpanType inputs = SpanType::kF16;
  SpanType output = SpanType::kF16;
  GemmEpilogue epilogue = GemmEpilogue::kNone;
  uint32_t x_alignment = 256;
  uint32_t w_alignment = 256;
  uint32_t y_alignment = 256;
  uint32_t bias_alignment = 256;  // 256 without a bias

  bool operator==(const LtGemmKey&) const = default;
};

struct LtGemmKeyHash {
  size_t operator()(const LtGemmKey& key) const;
};

// The device operands of one GEMM: x [m, k], w [n, k] (a Linear weight as stored), the bias
// (n values of y's type; null for none), y [m, n]; all contiguous.
struct GemmOperands {
  const void* x = nullptr;
  const void* w = nullptr;
  const void* bias = nullptr;
  void* y = nullptr;
};

// The key of y[m, n] = x[m, k] * w[n, k]^T (+ bias) (ReLU when relu) over `operands`.
// REQUIRES (checked): inputs kF16 or kBF16; output kF32 or inputs; m, n, k > 0.
LtGemmKey LtGemmKeyOf(int m, int n, int k, SpanType inputs, SpanType output, bool relu,
                      const GemmOperands& operands);

}  // namespace strata
