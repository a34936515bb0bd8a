#include "src/cli/profile_command.h"

#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <string>

#include "policy/hardware_spec.h"
#include "policy/plan.h"
#include "src/backend/cpu/cpu_probes.h"
#include "src/backend/device_probes.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/cli/device_flags.h"
#include "src/cli/exit_codes.h"
#include "src/cli/policy_flags.h"
#include "src/cli/profile/probes.h"
#include "src/core/host_memory.h"

namespace strata {
namespace {

// The emulated device takes a quarter of the available memory (at most 16 GiB); pinned host
// memory gets 60%; the rest stays with the OS and the page cache.
constexpr double kDeviceShare = 0.25;
constexpr int64_t kDeviceMaxBytes = int64_t{16} << 30;
constexpr double kHostShare = 0.60;
constexpr int64_t kDiskProbeBytes = int64_t{1} << 30;

std::string HostName() {
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 ? std::string(name) : "this-machine";
}

// Measurements are good to a few percent; four significant digits say so.
double Round4(double v) {
  if (v <= 0) return v;
  const double scale = std::pow(10.0, 3 - std::floor(std::log10(v)));
  return std::round(v * scale) / scale;
}

void Announce(const char* what) { std::fprintf(stderr, "strata profile: %s...\n", what); }

// The device numbers of a machine without a GPU: the CPU build's emulated device, which computes
// with the CPU kernels in a capacity-limited host arena and copies with memcpy. REQUIRES: hw's
// CPU attention rates are measured (its attention rates are theirs).
void MeasureEmulatedDevice(int64_t available_host_bytes, HardwareSpec& hw) {
  hw.gpu_capacity_bytes = std::min<int64_t>(kDeviceMaxBytes, available_host_bytes * kDeviceShare);
  Announce("copies");
  hw.h2d_gbps = hw.d2h_gbps = hw.d2d_gbps = profile::MemcpyGbps();
  Announce("GEMM");
  hw.gpu_prefill_tflops = profile::GemmTflops(512);
  hw.gpu_decode_tflops = profile::GemmTflops(16);
  // Its memory bandwidth is the rate at which the CPU GEMMs stream weights, not the host's plain
  // read rate.
  hw.gpu_memory_gbps = profile::GemmWeightStreamGbps();
  // Its copies share the memory bus with those GEMMs while they overlap.
  hw.copy_beside_gemm_gbps = profile::MemcpyBesideGemmGbps();
  hw.gpu_cache_bytes = profile::LastLevelCacheBytes();
  Announce("attention");
  hw.gpu_attention_gbps = hw.cpu_attention_gbps;
  hw.gpu_attention_q4_gbps = hw.cpu_attention_q4_gbps;
  hw.gpu_attention_prefill_tflops = profile::PrefillAttentionTflops();
  Announce("4-bit expansion");
  hw.gpu_dequant_gbps = profile::ExpandQ4Gbps();
  hw.gpu_emulated = hw.h2d_emulated = hw.d2h_emulated = true;
}

void UseDevice(const profile::DeviceRates& d, HardwareSpec& hw) {
  hw.gpu_capacity_bytes = d.capacity_bytes;
  hw.gpu_cache_bytes = d.cache_bytes;
  hw.h2d_gbps = d.h2d_gbps;
  hw.d2h_gbps = d.d2h_gbps;
  hw.d2d_gbps = d.d2d_gbps;
  hw.gpu_memory_gbps = d.memory_gbps;
  hw.gpu_prefill_tflops = d.prefill_tflops;
  hw.gpu_decode_tflops = d.decode_tflops;
  hw.gpu_gemm_tflops_by_rows.clear();
  for (const auto& [rows, tflops] : d.gemm_tflops_by_rows) {
    hw.gpu_gemm_tflops_by_rows.push_back({rows, tflops});
  }
  hw.gpu_attention_gbps = d.attention_gbps;
  hw.gpu_attention_q4_gbps = d.attention_q4_gbps;
  hw.gpu_attention_prefill_tflops = d.attention_prefill_tflops;
  hw.gpu_dequant_gbps = d.dequant_gbps;
}

}  // namespace

CLI::App* AddProfileCommand(CLI::App& app, ProfileOptions* o) {
  CLI::App* cmd = app.add_subcommand("profile", "Measure this machine; write a hardware profile");
  cmd->add_option("--out,-o", o->out,
                  "Hardware profile YAML to write (default: " + DefaultHardwareProfilePath() +
                      ", where strata run and strata bench look for it)");
  cmd->add_option("--offload-dir", o->offload_dir, "Directory whose disk is measured")
      ->capture_default_str();
  cmd->add_option("--name", o->name, "Profile name (default: the host name)");
  cmd->add_option("--threads", o->threads,
                  "CPU threads to measure with, as the runs will use (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  AddDeviceFlag(cmd, &o->device);
  AddGpuMemoryFlag(cmd, &o->gpu_memory_bytes);
  return cmd;
}

int ProfileCommand(const ProfileOptions& o) {
  HardwareSpec hw;
  hw.name = o.name.empty() ? HostName() : o.name;
  // Which device is measured is settled first: --device cuda without one fails at once.
  Result<Backends> backends = MakeBackends(o.device, o.gpu_memory_bytes);
  if (!backends.ok()) {
    std::cerr << "strata profile: " << backends.status().message() << "\n";
    return kExitUnusable;
  }
  const bool gpu = backends->kind == DeviceKind::kCuda;
  std::string no_device = o.device == "cpu" ? "--device cpu" : backends->description;
  backends->device.reset();

  Announce("capacities");
  const int64_t available = AvailableHostBytes();
  Result<int64_t> free_disk = profile::FreeDiskBytes(o.offload_dir);
  if (!free_disk.ok()) {
    std::cerr << "strata profile: " << free_disk.status().message() << "\n";
    return kExitUnusable;
  }
  hw.cpu_capacity_bytes = static_cast<int64_t>(available * kHostShare);
  hw.disk_capacity_bytes = *free_disk;
  SetCpuThreads(o.threads);
  hw.cpu_cores = CpuThreads();

  Announce(
      "disk (strata's disk tier: 32 MiB pieces through a 32 MiB ring, then scattered 4 KiB page "
      "writes, alone and behind reads)");
  Result<profile::DiskRates> disk =
      profile::MeasureDisk(o.offload_dir, std::min(kDiskProbeBytes, *free_disk / 4));
  if (!disk.ok()) {
    std::cerr << "strata profile: " << disk.status().message() << "\n";
    return kExitUnusable;
  }
  hw.disk_read_gbps = disk->read_gbps;
  hw.disk_write_gbps = disk->write_gbps;
  hw.disk_page_write_gbps = disk->page_write_gbps;
  hw.disk_write_wait_bytes = static_cast<int64_t>(disk->write_wait_bytes);

  Announce("host memory");
  hw.cpu_memory_gbps = profile::HostReadGbps();
  Announce("CPU attention");
  hw.cpu_attention_gbps = profile::DecodeAttentionGbps();
  const Plan default_cache;  // the default 4-bit cache's exact tokens
  hw.cpu_attention_q4_gbps =
      profile::DecodeAttentionQ4Gbps(default_cache.cache_sink, default_cache.cache_window);
  const std::string disk_text =
      "disk by strata's " + disk->file_env + " disk tier (" +
      (disk->direct ? "O_DIRECT" : "buffered: O_DIRECT refused") +
      "), 32 MiB pieces through a 32 MiB ring in 1 MiB transfers, copies included; page writes "
      "4 KiB, 32 per submission, alone and behind a stream of reads";
  Announce("the GPU");
  std::optional<profile::DeviceRates> device;
  if (gpu) device = profile::MeasureDevice(&no_device);
  if (gpu && !device) {
    std::cerr << "strata profile: the GPU could not be measured: " << no_device << "\n";
    return kExitUnusable;
  }
  if (device) {
    UseDevice(*device, hw);
    hw.description = "measured by strata profile on " + HostName() + " with " + device->name +
                     " (pinned cudaMemcpyAsync, fp16 cuBLASLt GEMMs as the Linears run them, by "
                     "rows at OPT-30B's layer shapes, strata's CUDA kernels); " +
                     disk_text;
  } else {
    MeasureEmulatedDevice(available, hw);
    hw.description =
        "measured by strata profile on " + HostName() + " without a GPU (" + no_device +
        "): device numbers are the CPU build's emulated device (host arena of " +
        std::to_string(int(kDeviceShare * 100)) +
        "% of available memory, memcpy copy thread, also timed beside the GEMMs' weight "
        "stream, fp32 CPU kernels, memory bandwidth as the GEMM streams weights); " +
        disk_text;
  }
  if (o.gpu_memory_bytes > 0) hw.gpu_capacity_bytes = o.gpu_memory_bytes;
  for (double* rate :
       {&hw.h2d_gbps, &hw.d2h_gbps, &hw.d2d_gbps, &hw.copy_beside_gemm_gbps, &hw.disk_read_gbps,
        &hw.disk_write_gbps, &hw.disk_page_write_gbps, &hw.gpu_prefill_tflops,
        &hw.gpu_decode_tflops, &hw.gpu_memory_gbps, &hw.gpu_attention_prefill_tflops,
        &hw.gpu_attention_gbps, &hw.gpu_attention_q4_gbps, &hw.gpu_dequant_gbps,
        &hw.cpu_memory_gbps, &hw.cpu_attention_gbps, &hw.cpu_attention_q4_gbps}) {
    *rate = Round4(*rate);
  }
  for (GemmRate& point : hw.gpu_gemm_tflops_by_rows) point.tflops = Round4(point.tflops);
  Status valid = hw.Validate();
  if (!valid.ok()) {
    std::cerr << "strata profile: a measurement came out unusable: " << valid.message() << "\n";
    return kExitUnusable;
  }
  const std::string yaml = HardwareSpecToYaml(hw);
  const std::string path = o.out.empty() ? DefaultHardwareProfilePath() : o.out;
  std::error_code ec;
  if (const std::filesystem::path dir = std::filesystem::path(path).parent_path(); !dir.empty()) {
    std::filesystem::create_directories(dir, ec);
  }
  std::ofstream out(path);
  out << "# Written by `strata profile`. Rates in GB/s (1e9 bytes/s) and TFLOPS; see\n"
      << "# policy/hardware_spec.h for what each key means.\n"
      << yaml;
  out.close();
  if (!out) {
    std::cerr << "strata profile: cannot write '" << path << "'\n";
    return kExitUnusable;
  }
  std::cout << yaml;
  std::cerr << "strata profile: wrote " << path << "\n";
  return kExitOk;
}

}  // namespace strata
