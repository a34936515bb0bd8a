// `strata profile`: measures this machine and writes a hardware profile (policy/hardware_spec.h).
// Without a GPU the device tier is the CPU build's emulated device — a capacity-limited host
// arena with its own copy thread, computing on the CPU — and its numbers are marked emulated.
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace strata {

struct ProfileOptions {
  std::string out;                // the YAML file to write; empty: DefaultHardwareProfilePath()
  std::string offload_dir = ".";  // where the disk is measured (a scratch file, removed)
  std::string name;               // profile name; default: the host name
  int threads = 0;                // CPU threads the compute probes use; 0: all cores
  std::string device = "auto";    // --device: the GPU's rates (cuda), the emulated device's
                                  // (cpu), or the GPU's when one is usable (auto)
  int64_t gpu_memory_bytes = 0;   // --gpu-memory: the profile's GPU capacity; 0: what is free
};

CLI::App* AddProfileCommand(CLI::App& app, ProfileOptions* options);

// Runs the measurements (about 15 s), writes the profile and prints it; returns an exit code.
int ProfileCommand(const ProfileOptions& options);

}  // namespace strata
