// The device writer and reader of the 4-bit KV cache against host references written from the
// format header: identical bytes, identical dequantized values.
#include <cstdint>
#include <vector>

#include "kernels/cpu/kv_q4.h"
#include "kernels/kv_q4_format.h"
#include "src/backend/cuda/ops.h"
#include "tests/backend/gpu_test_util.h"
#include "tests/backend/q4_reference.h"

namespace strata::testing {
namespace {

class KvQ4Test : public GpuTest {};

struct WriteCase {
  int batch, kv_heads, head_dim, max_len, tokens, first_slot;
  bool rotate;
};

TEST_F(KvQ4Test, WriteQ4CacheMatchesTheFormatBitForBit) {
  std::mt19937_64 rng(TestSeed());
  SCOPED_TRACE(TestSeed());
  for (const WriteCase c : {WriteCase{1, 1, 16, 4, 1, 3, false}, WriteCase{2, 3, 32, 9, 5, 2, false},
                            WriteCase{2, 2, 64, 70, 64, 6, false}, WriteCase{1, 4, 128, 20, 1, 19, false},
                            WriteCase{3, 2, 128, 33, 17, 0, true}, WriteCase{1, 2, 256, 8, 3, 4, true},
                            WriteCase{2, 1, 48, 5, 2, 1, false}, WriteCase{1, 1, 64, 3, 3, 0, true}}) {
    SCOPED_TRACE(::testing::Message() << "batch " << c.batch << " kv_heads " << c.kv_heads
                                      << " head_dim " << c.head_dim << " tokens " << c.tokens
                                      << " rotate " << c.rotate);
    const int d = c.head_dim;
    const size_t rows = static_cast<size_t>(c.batch) * c.tokens * c.kv_heads;
    std::vector<float> x = RandomNormals(rng, rows * d);
    for (int i = 0; i < d; ++i) x[i] = 0.25f;  // a constant group: scale 0, all codes 0
    x[d] = 3.0f;  // an outlier
    const size_t slots = static_cast<size_t>(c.batch) * c.kv_heads * c.max_len;
    const int code_bytes = kernels::Q4CodeBytes(d);
    const int param_halves = kernels::Q4ParamHalves(d);
    std::vector<uint8_t> want_codes(slots * code_bytes, 0xAB);
    std::vector<uint16_t> want_params(slots * param_halves, 0x7BCD);
    std::vector<float> row(static_cast<size_t>(d));
    for (size_t w = 0; w < rows; ++w) {
      const int h = static_cast<int>(w % c.kv_heads);
      const int t = static_cast<int>((w / c.kv_heads) % c.tokens);
      const int b = static_cast<int>(w / (static_cast<size_t>(c.kv_heads) * c.tokens));
      std::copy(x.begin() + w * d, x.begin() + (w + 1) * d, row.begin());
      if (c.rotate) RefHadamard(row.data(), d);
      const size_t slot = (static_cast<size_t>(b) * c.kv_heads + h) * c.max_len + c.first_slot + t;
      RefQuantizeRow(row.data(), d, want_codes.data() + slot * code_bytes,
                     want_params.data() + slot * param_halves);
    }
    // The CPU twin writes the same bytes (slots it does not write keep their filler).
    std::vector<uint8_t> cpu_codes(slots * code_bytes, 0xAB);
    std::vector<uint16_t> cpu_params(slots * param_halves, 0x7BCD);
    kernels::cpu::WriteQ4Cache(kernels::cpu::Q4CacheShape{c.batch, c.kv_heads, c.max_len, d},
                               x.data(), c.tokens, c.first_slot, c.rotate, cpu_codes.data(),
                               cpu_params.data());
    ASSERT_EQ(cpu_codes, want_codes);
    ASSERT_EQ(cpu_params, want_params);
    DeviceArray<float> dx(x);
    DeviceArray<uint8_t> codes(std::vector<uint8_t>(slots * code_bytes, 0xAB));
    DeviceArray<uint16_t> params(std::vector<uint16_t>(slots * param_halves, 0x7BCD));
    cuda_ops::Q4CacheShape s{c.batch, c.kv_heads, c.max_len, d};
    ASSERT_EQ(cuda_ops::WriteQ4Cache(s, dx.get(), c.tokens, c.first_slot, c.rotate, codes.get(),
                                     reinterpret_cast<__half*>(params.get()), nullptr),
              cudaSuccess);
    const std::vector<uint8_t> got_codes = codes.Download();
    const std::vector<uint16_t> got_params = params.Download();
    for (size_t i = 0; i < want_codes.size(); ++i) ASSERT_EQ(got_codes[i], want_codes[i]) << i;
    for (size_t i = 0; i < want_params.size(); ++i) ASSERT_EQ(got_params[i], want_params[i]) << i;

    // The reader: every slot, written or not, dequantizes exactly as the host reader does.
    DeviceArray<float> out(slots * d);
    out.Poison();
    ASSERT_EQ(cuda_ops::DequantizeQ4Cache(s, codes.get(), reinterpret_cast<const __half*>(params.get()),
                                          out.get(), nullptr),
              cudaSuccess);
    const std::vector<float> got = out.Download();
    std::vector<float> want(static_cast<size_t>(d));
    for (size_t slot = 0; slot < slots; ++slot) {
      RefDequantizeRow(want_codes.data() + slot * code_bytes, want_params.data() + slot * param_halves,
                       d, want.data());
      for (int i = 0; i < d; ++i) {
        const float g = got[slot * d + i];
        ASSERT_TRUE(g == want[i] || (std::isnan(g) && std::isnan(want[i]))) << slot << " " << i;
      }
    }
  }
}

TEST_F(KvQ4Test, RejectsShapesOutsideTheFormat) {
  cuda_ops::Q4CacheShape s{1, 1, 4, 96};
  EXPECT_EQ(cuda_ops::WriteQ4Cache(s, nullptr, 1, 0, false, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);
  s.head_dim = 48;
  EXPECT_EQ(cuda_ops::WriteQ4Cache(s, nullptr, 1, 0, true, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // rotation needs a power of two
  s.head_dim = 64;
  EXPECT_EQ(cuda_ops::WriteQ4Cache(s, nullptr, 2, 3, false, nullptr, nullptr, nullptr),
            cudaErrorInvalidValue);  // past max_len
}

}  // namespace
}  // namespace strata::testing
