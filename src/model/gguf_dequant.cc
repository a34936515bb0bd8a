#include "src/model/gguf_dequant.h"

#include <cstring>

#include "src/core/dtype.h"
#include "src/model/gguf.h"

namespace strata {
namespace {

constexpr int64_t kBlock = 32;                // elements per Q4_0/Q4_1/Q8_0 block
constexpr int64_t kParallelMinBlocks = 4096;  // below this, threads cost more than they save

inline float LoadHalf(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return HalfToFloat(h);
}

void BlockQ4_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const uint8_t* q = b + 2;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>((q[j] & 0x0F) - 8);
    y[j + 16] = d * static_cast<float>((q[j] >> 4) - 8);
  }
}

void BlockQ4_1(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  const float m = LoadHalf(b + 2);
  const uint8_t* q = b + 4;
  for (int j = 0; j < 16; ++j) {
    y[j] = d * static_cast<float>(q[j] & 0x0F) + m;
    y[j + 16] = d * static_cast<float>(q[j] >> 4) + m;
  }
}

void BlockQ8_0(const uint8_t* b, float* y) {
  const float d = LoadHalf(b);
  for (int j = 0; j < 32; ++j) {
    int8_t q;
    std::memcpy(&q, b + 2 + j, 1);
    y[j] = d * static_cast<float>(q);
  }
}

template <void (*kBlockFn)(const uint8_t*, float*), int64_t kBlockBytes>
void ExpandBlocks(const uint8_t* src, int64_t n, float* dst) {
  const int64_t blocks = n / kBlock;
#pragma omp parallel for schedule(static) if (blocks >= kParallelMinBlocks)
  for (int64_t i = 0; i < blocks; ++i) kBlockFn(src + i * kBlockBytes, dst + i * kBlock);
}

// F16/BF16 in chunks of whole blocks of kBlock elements plus a serial tail.
template <float (*kConvert)(uint16_t)>
void ExpandHalves(const uint8_t* src, int64_t n, float* dst) {
  const int64_t blocks = n / kBlock;
#pragma omp parallel for schedule(static) if (blocks >= kParallelMinBlocks)
  for (int64_t i = 0; i < blocks; ++i) {
    for (int64_t j = i * kBlock; j < (i + 1) * kBlock; ++j) {
      uint16_t h;
      std::memcpy(&h, src + 2 * j, 2);
      dst[j] = kConvert(h);
    }
  }
  for (int64_t j = blocks * kBlock; j < n; ++j) {
    uint16_t h;
    std::memcpy(&h, src + 2 * j, 2);
    dst[j] = kConvert(h);
  }
}

}  // namespace

bool GgufCanDequantize(uint32_t type) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
    case GgmlType::kF16:
    case GgmlType::kBF16:
    case GgmlType::kQ4_0:
    case GgmlType::kQ4_1:
    case GgmlType::kQ8_0:
      return true;
  }
  return false;
}

Status DequantizeGguf(uint32_t type, const uint8_t* src, int64_t n, float* dst) {
  switch (static_cast<GgmlType>(type)) {
    case GgmlType::kF32:
      std::memcpy(dst, src, static_cast<size_t>(n) * 4);
      return Status::Ok();
    case GgmlType::kF16:
      ExpandHalves<HalfToFloat>(src, n, dst);
      return Status::Ok();
    case GgmlType::kBF16:
      ExpandHalves<Bf16ToFloat>(src, n, dst);
      return Status::Ok();
    case GgmlType::kQ4_0:
      ExpandBlocks<BlockQ4_0, 18>(src, n, dst);
      return Status::Ok();
    case GgmlType::kQ4_1:
      ExpandBlocks<BlockQ4_1, 20>(src, n, dst);
      return Status::Ok();
    case GgmlType::kQ8_0:
      ExpandBlocks<BlockQ8_0, 34>(src, n, dst);
      return Status::Ok();
  }
  return Status::Unsupported("ggml type " + GgmlTypeName(type) +
                             " cannot be expanded (strata reads F32, F16, BF16, Q4_0, Q4_1, "
                             "Q8_0); re-quantize the model to one of these");
}

void UnpermuteGgufQk(const float* src, int64_t rows, int64_t cols, int64_t n_head, float* dst) {
  const int64_t head_dim = rows / n_head, half = head_dim / 2;
  const size_t row_bytes = static_cast<size_t>(cols) * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * cols >= kParallelMinBlocks * kBlock)
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t h = r / head_dim, j = (r % head_dim) / half, i = r % half;
    std::memcpy(dst + r * cols, src + (h * head_dim + 2 * i + j) * cols, row_bytes);
  }
}

}  // namespace strata
