#include "src/backend/cuda/gemm_lt.h"

#include <cstdint>

#include "src/backend/cuda/cuda_check.h"
#include "src/core/check.h"

namespace strata {
namespace {

cudaDataType_t CudaTypeOf(SpanType type) {
  return type == SpanType::kF32   ? CUDA_R_32F
         : type == SpanType::kF16 ? CUDA_R_16F
                                  : CUDA_R_16BF;
}

cublasLtEpilogue_t LtEpilogueOf(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::kNone: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::kBias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::kRelu: return CUBLASLT_EPILOGUE_RELU;
    case GemmEpilogue::kBiasRelu: return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

template <typename T>
void SetDesc(cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attribute, const T& value) {
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescSetAttribute(desc, attribute, &value, sizeof(value)));
}

template <typename T>
void SetPreference(cublasLtMatmulPreference_t preference,
                   cublasLtMatmulPreferenceAttributes_t attribute, const T& value) {
  STRATA_CUBLAS_CHECK(
      cublasLtMatmulPreferenceSetAttribute(preference, attribute, &value, sizeof(value)));
}

}  // namespace

// One shape's descriptors and its algorithm. cuBLASLt is column-major: row-major y[m, n] is
// column-major y^T[n, m] = w x^T, with w[n, k] row-major read as a column-major [k, n]
// transposed (cuBLASLt's A) and x[m, k] as a column-major [k, m] (its B); the bias, one value per
// row of that y^T, is one per output feature.
struct LtGemm::Plan {
  cublasLtMatmulDesc_t desc = nullptr;
  cublasLtMatrixLayout_t w_layout = nullptr;
  cublasLtMatrixLayout_t x_layout = nullptr;
  cublasLtMatrixLayout_t y_layout = nullptr;
  cublasLtMatmulAlgo_t algo{};
  size_t workspace_bytes = 0;  // what the algorithm needs
  bool found = false;          // the heuristic gave an algorithm

  Plan() = default;
  Plan(const Plan&) = delete;
  Plan& operator=(const Plan&) = delete;
  ~Plan() {
    if (y_layout != nullptr) cublasLtMatrixLayoutDestroy(y_layout);
    if (x_layout != nullptr) cublasLtMatrixLayoutDestroy(x_layout);
    if (w_layout != nullptr) cublasLtMatrixLayoutDestroy(w_layout);
    if (desc != nullptr) cublasLtMatmulDescDestroy(desc);
  }
};

LtGemm::LtGemm() { STRATA_CUBLAS_CHECK(cublasLtCreate(&handle_)); }

LtGemm::~LtGemm() {
  plans_.clear();
  if (handle_ != nullptr) cublasLtDestroy(handle_);
}

const LtGemm::Plan& LtGemm::PlanFor(const LtGemmKey& key, const GemmOperands& operands,
                                    size_t workspace_bytes) {
  auto [it, inserted] = plans_.try_emplace(key);
  if (!inserted) return *it->second;
  it->second = std::make_unique<Plan>();
  Plan& plan = *it->second;
  const cudaDataType_t inputs = CudaTypeOf(key.inputs);
  const cudaDataType_t output = CudaTypeOf(key.output);
  STRATA_CUBLAS_CHECK(cublasLtMatmulDescCreate(&plan.desc, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSA, int32_t{CUBLAS_OP_T});
  SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_TRANSB, int32_t{CUBLAS_OP_N});
  SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_EPILOGUE, LtEpilogueOf(key.epilogue));
  // The heuristic reads the bias pointer's alignment (the key holds it), not the bias.
  if (operands.bias != nullptr) {
    SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, operands.bias);
  }
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.w_layout, inputs, key.k, key.n, key.k));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.x_layout, inputs, key.k, key.m, key.k));
  STRATA_CUBLAS_CHECK(cublasLtMatrixLayoutCreate(&plan.y_layout, output, key.n, key.m, key.n));

  cublasLtMatmulPreference_t preference = nullptr;
  STRATA_CUBLAS_CHECK(cublasLtMatmulPreferenceCreate(&preference));
  SetPreference(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, uint64_t{workspace_bytes});
  // Split-K sums in fp32, never in a half output (the accumulation the header promises).
  if (key.output != SpanType::kF32) {
    SetPreference(preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK,
                  uint32_t{CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE});
  }
  SetPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, key.w_alignment);
  SetPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, key.x_alignment);
  SetPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, key.y_alignment);
  SetPreference(preference, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, key.y_alignment);
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
      handle_, plan.desc, plan.w_layout, plan.x_layout, plan.y_layout, plan.y_layout, preference,
      1, &result, &found);
  cublasLtMatmulPreferenceDestroy(preference);
  // NOT_SUPPORTED is cuBLASLt's "no algorithm for this"; anything else is a bug.
  if (st != CUBLAS_STATUS_NOT_SUPPORTED) STRATA_CUBLAS_CHECK(st);
  plan.found = st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS;
  if (plan.found) {
    plan.algo = result.algo;
    plan.workspace_bytes = result.workspaceSize;
  }
  return plan;
}

bool LtGemm::Run(const LtGemmKey& key, const GemmOperands& operands, void* workspace,
                 size_t workspace_bytes, cudaStream_t stream) {
  const std::lock_guard<std::mutex> lock(mutex_);
  const Plan& plan = PlanFor(key, operands, workspace_bytes);
  if (!plan.found) return false;
  STRATA_CHECK_MSG(plan.workspace_bytes <= workspace_bytes,
                   "a cuBLASLt GEMM needs more workspace than it was planned with");
  if (operands.bias != nullptr) {
    SetDesc(plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, operands.bias);
  }
  const float alpha = 1.0f;
  const float beta = 0.0f;
  STRATA_CUBLAS_CHECK(cublasLtMatmul(handle_, plan.desc, &alpha, operands.w, plan.w_layout,
                                     operands.x, plan.x_layout, &beta, operands.y, plan.y_layout,
                                     operands.y, plan.y_layout, &plan.algo, workspace,
                                     workspace_bytes, stream));
  return true;
}

size_t LtGemm::planned() const {
  const std::lock_guard<std::mutex> lock(mutex_);
  return plans_.size();
}

}  // namespace strata
