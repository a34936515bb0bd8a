#include "src/cli/device_flags.h"

#include <CLI/CLI.hpp>

#include "policy/memory_accounting.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/core/log.h"
#include "src/memory/model_spec_of.h"
#include "src/memory/placement.h"

namespace strata {

void AddDeviceFlag(CLI::App* cmd, std::string* device) {
  cmd->add_option("--device", *device,
                  "Where the device tier lives and computes: cuda (GPU 0), cpu, or auto (cuda "
                  "when a GPU is usable)")
      ->check(CLI::IsMember({"auto", "cuda", "cpu"}))
      ->capture_default_str();
}

void AddActivationsFlag(CLI::App* cmd, std::string* activations) {
  cmd->add_option("--activations", *activations,
                  "Element type of the device's activations: auto (fp16, or bf16 for a bf16 "
                  "model, on a GPU; fp32 on the CPU), fp32, fp16 or bf16")
      ->check(CLI::IsMember({"auto", "fp32", "fp16", "bf16"}))
      ->capture_default_str();
}

void AddGpuMemoryFlag(CLI::App* cmd, int64_t* bytes) {
  cmd->add_option("--gpu-memory", *bytes,
                  "Device memory the run may take, e.g. 16GiB (0: a searched plan's profile "
                  "capacity, else what the placement needs); a large GPU can stand in for a "
                  "small one")
      ->transform(CLI::AsSizeValue(/*kb_is_1000=*/true));
  cmd->add_option_function<double>(
         "--gpu-mem-gib",
         [bytes](double gib) { *bytes = static_cast<int64_t>(gib * double(int64_t{1} << 30)); },
         "The same in GiB (the older spelling of --gpu-memory)")
      ->check(CLI::NonNegativeNumber);
}

Result<Backends> MakeBackends(const std::string& device, int64_t gpu_memory_bytes,
                              const std::string& activations) {
  if (device != "auto" && device != "cuda" && device != "cpu") {
    return Status::InvalidArgument("--device " + device + " is not one of auto, cuda, cpu");
  }
  std::optional<SpanType> type;
  if (activations == "fp32") type = SpanType::kF32;
  if (activations == "fp16") type = SpanType::kF16;
  if (activations == "bf16") type = SpanType::kBF16;
  if (!type && activations != "auto") {
    return Status::InvalidArgument("--activations " + activations +
                                   " is not one of auto, fp32, fp16, bf16");
  }
  const std::string kept = type ? ", " + activations + " activations" : "";
  if (gpu_memory_bytes < 0) {
    return Status::InvalidArgument("--gpu-memory must be a size of at least 0");
  }
  Backends b;
  b.cpu = MakeCpuBackend();
  if (device != "cpu") {
    std::string why_not;
    std::string name;
    b.device = MakeGpuBackend(type, &why_not, &b.device_free_bytes, &name);
    if (b.device == nullptr) {
      if (device == "cuda") {
        const bool says_what_to_do = why_not.find("--device cpu") != std::string::npos;
        return Status::Unsupported("--device cuda: " + why_not +
                                   (says_what_to_do ? "" : "; use --device cpu to compute on the CPU"));
      }
      LogInfo("--device auto: computing on the CPU (" + why_not + ")");
      b.description = "cpu (" + why_not + ")";
    } else {
      b.kind = DeviceKind::kCuda;
      b.description =
          "cuda (" + name + ", " + FormatBytes(b.device_free_bytes) + " free" + kept + ")";
      if (gpu_memory_bytes > b.device_free_bytes) {
        return Status::ResourceExhausted(
            "--gpu-memory " + FormatBytes(gpu_memory_bytes) + " is more than the " +
            FormatBytes(b.device_free_bytes) + " free on " + name +
            "; give at most that, or free the GPU of other processes (nvidia-smi shows them)");
      }
      return b;
    }
  }
  CpuBackendOptions cpu;
  cpu.activations = type.value_or(SpanType::kF32);
  b.device = MakeCpuBackend(cpu);
  if (b.description.empty()) b.description = "cpu";
  b.description += kept;
  return b;
}

int ActivationBytesOn(const Backend& device, const Model& model) {
  return static_cast<int>(SpanElementBytes(device.ActivationType(WeightDTypeOf(model))));
}

DeviceScratchFn DeviceScratchOf(const Backend& device, const Model& model,
                                const Workload& workload) {
  const SpanType activations = device.ActivationType(WeightDTypeOf(model));
  return [&device, &model, workload, activations](const Plan& plan) {
    const BlockShape shape{plan.gpu_batch_size, plan.num_gpu_batches, workload.prompt_len,
                           workload.prompt_len + workload.gen_len};
    return static_cast<int64_t>(
        device.ScratchBytes(OpLimitsOf(model, plan, shape, activations)));
  };
}

void FitProfileToDevice(const Backends& backends, const std::string& origin,
                        std::optional<HardwareSpec>& hardware) {
  if (!hardware) return;
  const bool cuda = backends.kind == DeviceKind::kCuda;
  if (cuda == hardware->gpu_emulated) {
    LogWarn("hardware profile " + origin + " was measured " +
            (cuda ? "without a GPU, and this run computes on one"
                  : "with a GPU, and this run computes on the CPU") +
            ": its plans and predictions are for the other device; run `strata profile` with "
            "the --device of this run");
  }
  if (cuda && hardware->gpu_capacity_bytes > backends.device_free_bytes) {
    LogInfo("hardware profile " + origin + ": GPU capacity " +
            FormatBytes(hardware->gpu_capacity_bytes) + " lowered to the " +
            FormatBytes(backends.device_free_bytes) + " free now");
    hardware->gpu_capacity_bytes = backends.device_free_bytes;
  }
}

}  // namespace strata
