#include "src/backend/q4_sizes.h"

#include "kernels/cpu/weight_q4.h"
#include "kernels/kv_q4_format.h"

namespace strata {

static_assert(kKvQ4ChannelGroup == kernels::kQ4ChannelGroup);
static_assert(kWeightQ4Group == kernels::cpu::kWeightQ4Group);

int KvQ4CodeBytes(int head_dim) { return kernels::Q4CodeBytes(head_dim); }
int KvQ4ParamHalves(int head_dim) { return kernels::Q4ParamHalves(head_dim); }
int KvQ4ChannelParamHalves(int head_dim) { return kernels::Q4ChannelParamHalves(head_dim); }

int64_t WeightQ4CodeBytes(int64_t rows, int64_t cols) {
  return static_cast<int64_t>(kernels::cpu::WeightQ4CodeBytes(rows, cols));
}
int64_t WeightQ4ParamHalves(int64_t rows, int64_t cols, int group) {
  return static_cast<int64_t>(kernels::cpu::WeightQ4ParamHalves(rows, cols, group));
}
bool WeightQ4Supports(int64_t cols, int group) {
  return kernels::cpu::WeightQ4Supports(cols, group);
}

}  // namespace strata
