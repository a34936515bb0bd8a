// --device, --activations and --gpu-memory: which processor holds the plan's device tier and
// computes, in what type it keeps activations, and how much of its memory a run may take. `run`,
// `bench`, `perplexity` and `profile` take --device; they and `plan` take --gpu-memory (for run
// and bench through PolicyFlags); `run`, `bench` and `perplexity` take --activations.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "policy/hardware_spec.h"
#include "policy/workload.h"
#include "src/backend/backend.h"
#include "src/cli/policy_flags.h"
#include "src/model/model.h"
#include "src/core/status.h"

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

enum class DeviceKind { kCpu, kCuda };

// The backends a command computes with.
struct Backends {
  DeviceKind kind = DeviceKind::kCpu;
  std::unique_ptr<Backend> device;  // the device tier's: CUDA, or the CPU standing in for it
  std::unique_ptr<Backend> cpu;     // CPU attention's
  std::string description;          // for the log, e.g. "cuda (NVIDIA H100, 79.1 GiB free)"
  int64_t device_free_bytes = 0;    // CUDA: free device memory when made; 0 on the CPU
};

// Registers --device (auto, cuda or cpu) on `cmd`, filling *device when parsed.
void AddDeviceFlag(CLI::App* cmd, std::string* device);
// Registers --activations (auto, fp32, fp16 or bf16) on `cmd`, filling *activations when parsed.
void AddActivationsFlag(CLI::App* cmd, std::string* activations);
// Registers --gpu-memory SIZE ("16GiB", "16GB", "512MiB", bytes; 0: no cap) on `cmd`, with the
// older --gpu-mem-gib N as an alias of --gpu-memory N GiB, filling *bytes when parsed.
void AddGpuMemoryFlag(CLI::App* cmd, int64_t* bytes);

// The backends `device` asks for: "cuda" the CUDA backend on device 0; "cpu" the CPU backend;
// "auto" CUDA when this build has it and a device is usable, else the CPU (the log says why).
// `activations` is the device backend's activation type (Backend::ActivationType): "auto" its
// own (fp16, or bf16 for BF16 weights, on CUDA; fp32 on the CPU), else "fp32", "fp16" or "bf16"
// whatever the weights (half on the CPU: it stands in for a GPU's storage, computing in fp32).
// `gpu_memory_bytes` (0: not given) is checked against the device's free memory before any
// model loads. Errors, each saying what to do (every one exits 2): InvalidArgument for
// an unknown --device or --activations; Unsupported for --device cuda in a build without the
// CUDA backend or with no usable device (no driver, a driver older than the runtime, no GPU: the
// driver's reason); ResourceExhausted for a --gpu-memory above the device's free memory.
Result<Backends> MakeBackends(const std::string& device, int64_t gpu_memory_bytes,
                              const std::string& activations = "auto");

// Fits a hardware profile to the device in hand: on CUDA its GPU capacity is at most the free
// device memory; a profile measured for the other kind of device (hw.gpu_emulated against a
// real GPU, or a GPU profile for the CPU) gets a warning to rerun `strata profile`. `origin`
// names the profile in the warning.
void FitProfileToDevice(const Backends& backends, const std::string& origin,
                        std::optional<HardwareSpec>& hardware);

// Bytes of one activation element of `model` on `device` (Backend::ActivationType), as
// ModelSpecOf takes them.
int ActivationBytesOn(const Backend& device, const Model& model);

// ChoosePlan's device_scratch on `device`: the scratch it takes (Backend::ScratchBytes) for a
// block of a plan's shape running `workload` with `model`. Both must outlive the function.
DeviceScratchFn DeviceScratchOf(const Backend& device, const Model& model,
                                const Workload& workload);

// The CUDA backend on device 0, or null with *why_not set: in builds without CUDA (why_not says
// so), or with no usable device; *free_bytes is the device's free memory once the backend is
// made (its context and cuBLAS handle exist), the baseline a run's use is measured from.
// Defined in device_backend_cuda.cc or device_backend_none.cc.
// `activations`: CudaBackendOptions::activations.
std::unique_ptr<Backend> MakeGpuBackend(std::optional<SpanType> activations, std::string* why_not,
                                        int64_t* free_bytes, std::string* name);
// Device 0's free memory now (cudaMemGetInfo); 0 in builds without CUDA.
int64_t GpuFreeBytes();

}  // namespace strata
