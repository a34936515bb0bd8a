// The CUDA backend's tensor-core GEMMs through cuBLASLt: fp16/bf16 inputs, fp32 accumulation
// (split-K partial sums too), y fp32 or rounded once to the inputs' type, the bias and a ReLU in
// the epilogue. The algorithm of each shape (gemm_plans.h's LtGemmKey) is cuBLASLt's heuristic's
// first choice, asked once and kept: a run has a few shapes (each Linear's at the prefill rows
// and at a decode step's), so after its first step it only launches.
#pragma once

#include <cublasLt.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "src/backend/cuda/gemm_plans.h"

namespace strata {

class LtGemm {
 public:
  LtGemm();  // aborts when cuBLASLt cannot start (cuda_check.h)
  ~LtGemm();
  LtGemm(const LtGemm&) = delete;
  LtGemm& operator=(const LtGemm&) = delete;

  // y = x * w^T (+ bias) (ReLU) as `key` (LtGemmKeyOf the same operands) says, queued on
  // `stream` with `workspace_bytes` of device workspace at `workspace` (the same size at every
  // call, kept until the GEMM is done). false, queueing nothing, when cuBLASLt has no algorithm
  // for the key (remembered too): the caller computes it another way. Thread-safe.
  bool Run(const LtGemmKey& key, const GemmOperands& operands, void* workspace,
           size_t workspace_bytes, cudaStream_t stream);

  // Shapes planned so far, each asked of the heuristic once (with or without an algorithm).
  size_t planned() const;

 private:
  struct Plan;
  const Plan& PlanFor(const LtGemmKey& key, const GemmOperands& operands, size_t workspace_bytes);

  cublasLtHandle_t handle_ = nullptr;
  mutable std::mutex mutex_;  // guards plans_ and each plan's descriptor while a GEMM is queued
  std::unordered_map<LtGemmKey, std::unique_ptr<Plan>, LtGemmKeyHash> plans_;
};

}  // namespace strata
