// MemoryTiers: the memory of one run, allocated once from a TierLayout: the device arena, the
// pinned host arena and the disk tier's scratch file.
//
// The device arena comes from the device backend (Backend::AllocateDeviceArena). The CPU
// backend's is host memory, capacity-limited to what the layout (or --gpu-memory) allows; its
// copies in and out are done by the executor's load and store lane threads, its copy engines, so
// placement, overlap and memory limits run the same code as on a GPU. The host arena is
// page-aligned anonymous memory, pinned by the device's backend (Backend::PinHostMemory: the CUDA
// backend's cudaHostRegister; nothing on the CPU) and registered with io_uring for the disk
// transfers.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>

#include "src/backend/backend.h"
#include "src/core/status.h"
#include "src/io/aligned_buffer.h"
#include "src/io/file_env.h"
#include "src/io/scratch_file.h"
#include "src/memory/disk_pieces.h"
#include "src/memory/tier_layout.h"

namespace strata {

struct MemoryTiersOptions {
  // Bytes the device tier may hold; 0: exactly what the layout needs. Creation fails with
  // ResourceExhausted when the layout needs more. Default 0.
  uint64_t device_capacity_bytes = 0;
  // Directory of the scratch file for what lives on disk. Default ".".
  std::string offload_dir = ".";
  // Which FileEnv moves disk bytes (src/io/file_env.h). Default: io_uring, else pread.
  FileEnvKind file_env = FileEnvKind::kAuto;
  // Tests: wraps the FileEnv before any file is opened through it, e.g. in a FaultInjectingEnv
  // (src/io/fault_env.h) whose rules the test keeps adding. Default none.
  std::function<std::unique_ptr<FileEnv>(std::unique_ptr<FileEnv>)> wrap_file_env;
};

// Thread-safe for transfers: each lane passes its own ring half. Creation is not.
class MemoryTiers {
 public:
  // Allocates every tier `layout` uses, the device tier from `device` (which must outlive the
  // tiers). Errors say which tier and how many bytes. `weight_file`
  // (WeightPlacement::weight_file): a strata store's tensors.bin that disk-resident weights are
  // read from in place, opened read-only for ReadWeights(); empty: none. `op_limits`
  // (Placement::op_limits): the largest op the run gives `device`, whose own scratch
  // (Backend::ScratchBytes) the device tier then holds beside the arena, checked against the
  // capacity with it and reserved (Backend::ReserveScratch) right after the arena; null: none
  // reserved (the backend's ops allocate their own, as in tests that call them directly).
  static Result<std::unique_ptr<MemoryTiers>> Create(const TierLayout& layout,
                                                     const MemoryTiersOptions& options,
                                                     Backend& device,
                                                     const std::string& weight_file = "",
                                                     const OpLimits* op_limits = nullptr);

  // A GPU extent as a span of the device arena. REQUIRES: e lies within it.
  DeviceSpan Device(const GpuExtent& e) const;
  // Host address of a CPU extent. REQUIRES: e lies within the host tier.
  uint8_t* At(const CpuExtent& e) const;
  // An arena of `backend` over the host tier (Backend::HostArena), whose spans at a CPU extent's
  // offset are that extent: for a backend whose ops run on host memory (the CPU's), so that they
  // take host-tier buffers as spans. Null where `backend` cannot. REQUIRES: it dies before this.
  std::unique_ptr<DeviceArena> HostArena(Backend& backend) const;

  // Bytes each tier holds (arena sizes, the device's with its backend's scratch; the scratch
  // file's size).
  uint64_t capacity_bytes(Tier tier) const;
  // Of the device tier: the backend's own scratch (Backend::ScratchBytes), outside the arena.
  uint64_t backend_scratch_bytes() const { return backend_scratch_bytes_; }
  // Bytes the layout placed on `tier`: the tier's peak, since nothing is allocated later.
  uint64_t peak_bytes(Tier tier) const { return layout_bytes_[static_cast<int>(tier)]; }
  // "io_uring", "pread" or "" when nothing lives on disk.
  std::string file_env_name() const;

  // Reads every piece from the scratch file through `ring` (ReadPieces, disk_pieces.h). Pieces in
  // the device tier (DiskPiece::device) are copied there on `stream`, a stream of the device's
  // backend (the moving lane's); those copies have completed when this returns.
  Status ReadDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                  Stream* stream = nullptr) const;
  // ReadDisk from the weight file instead. REQUIRES: Create() was given one.
  Status ReadWeights(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                     Stream* stream = nullptr) const;
  // Writes the pieces to the scratch file through `ring` (WritePieces, disk_pieces.h): whole
  // 4 KiB pages, so callers write whole extents (or bytes they will not read again). Device
  // pieces as in ReadDisk.
  Status WriteDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                   Stream* stream = nullptr) const;
  // Reads or writes one 4 KiB-aligned extent of the scratch file straight from or to `memory`
  // (4 KiB-aligned, at least the extent rounded up to 4 KiB).
  Status TransferExtent(IoOp op, const DiskExtent& e, uint8_t* memory) const;

 private:
  MemoryTiers() = default;
  // The device copies of one transfer of `pieces` on `stream`, with events of the device's
  // backend (none when no piece is in device memory).
  struct Copies;
  Copies DeviceCopiesOn(Stream* stream, std::span<const DiskPiece> pieces) const;

  Backend* backend_ = nullptr;  // the device tier's
  std::unique_ptr<DeviceArena> device_;
  AlignedBuffer host_;
  std::unique_ptr<PinnedHost> pinned_;  // host_, pinned by the device's backend
  std::unique_ptr<FileEnv> env_;
  std::unique_ptr<ScratchFile> scratch_;
  std::unique_ptr<DiskFile> weight_file_;
  uint64_t layout_bytes_[kNumTiers] = {};
  uint64_t device_capacity_ = 0;
  uint64_t backend_scratch_bytes_ = 0;
};

}  // namespace strata
