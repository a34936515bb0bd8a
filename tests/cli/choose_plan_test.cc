// ChoosePlan (src/cli/policy_flags.h) with a device backend that takes scratch besides the arena:
// the searched plan's device tier plus the scratch of that plan fit --gpu-memory, the tier's
// capacity stays --gpu-memory, and scratch that leaves no room is an error rather than a plan
// that fails when the arena is allocated.
#include <gtest/gtest.h>

#include "policy/memory_accounting.h"
#include "policy/model_spec.h"
#include "src/cli/policy_flags.h"

namespace strata {
namespace {

constexpr int64_t kGiB = int64_t{1} << 30;

struct Inputs {
  ModelSpec model;
  HardwareSpec hardware;
  Workload workload{512, 32, 0};
  PolicyFlags flags;
};

Inputs OptOn16GiB() {
  Inputs in;
  in.model = LoadModelSpecYaml(ResolveConfigFile("models", "opt-30b").value()).value();
  in.hardware = LoadHardwareSpecYaml(ResolveConfigFile("hardware", "h100-80g").value()).value();
  in.flags.gpu_memory_bytes = 16 * kGiB;
  return in;
}

int64_t GpuBytes(const Inputs& in, const Plan& plan) {
  return AccountMemory(in.model, in.workload, plan).value().total_bytes.gpu_bytes;
}

TEST(ChoosePlanTest, TheSearchLeavesRoomForTheDeviceBackendsScratch) {
  const Inputs in = OptOn16GiB();
  const Result<ChosenPlan> alone = ChoosePlan(in.flags, in.model, in.workload, in.hardware, 64);
  ASSERT_TRUE(alone.ok()) << alone.status().message();
  ASSERT_TRUE(alone->searched);
  const int64_t alone_gpu = GpuBytes(in, alone->plan);
  EXPECT_LE(alone_gpu, 16 * kGiB);

  // Scratch that grows with the micro-batch, as a GEMM's converted activations do.
  const DeviceScratchFn scratch = [](const Plan& p) {
    return int64_t{256} * (1 << 20) + int64_t{p.gpu_batch_size} * 64 * (1 << 20);
  };
  const Result<ChosenPlan> with = ChoosePlan(in.flags, in.model, in.workload, in.hardware, 64,
                                             scratch);
  ASSERT_TRUE(with.ok()) << with.status().message();
  EXPECT_EQ(with->device_capacity_bytes, 16 * kGiB);
  const int64_t with_gpu = GpuBytes(in, with->plan);
  EXPECT_LE(with_gpu + scratch(with->plan), 16 * kGiB)
      << "arena " << with_gpu << " + scratch " << scratch(with->plan);
  // Without the scratch the search filled the device; it could not have fitted both.
  EXPECT_GT(alone_gpu + scratch(alone->plan), 16 * kGiB);
}

TEST(ChoosePlanTest, ScratchThatLeavesNoRoomIsAnError) {
  const Inputs in = OptOn16GiB();
  const Result<ChosenPlan> r = ChoosePlan(in.flags, in.model, in.workload, in.hardware, 64,
                                          [](const Plan&) { return 16 * kGiB; });
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--policy auto"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace strata
