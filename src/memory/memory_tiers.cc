#include "src/memory/memory_tiers.h"

#include <algorithm>

#include "src/core/check.h"
#include "src/io/io_event.h"

namespace strata {

Result<std::unique_ptr<MemoryTiers>> MemoryTiers::Create(const TierLayout& layout,
                                                         const MemoryTiersOptions& options,
                                                         Backend& device,
                                                         const std::string& weight_file,
                                                         const OpLimits* op_limits) {
  std::unique_ptr<MemoryTiers> t(new MemoryTiers());
  for (int i = 0; i < kNumTiers; ++i) t->layout_bytes_[i] = layout.tier_bytes(static_cast<Tier>(i));
  const uint64_t gpu = t->layout_bytes_[static_cast<int>(Tier::kGpu)];
  const uint64_t cpu = t->layout_bytes_[static_cast<int>(Tier::kCpu)];
  const uint64_t disk = t->layout_bytes_[static_cast<int>(Tier::kDisk)];
  const uint64_t scratch = op_limits != nullptr ? device.ScratchBytes(*op_limits) : 0;
  t->backend_scratch_bytes_ = scratch;
  t->device_capacity_ =
      options.device_capacity_bytes > 0 ? options.device_capacity_bytes : gpu + scratch;
  if (gpu + scratch > t->device_capacity_) {
    const std::string scratch_text =
        scratch > 0 ? " (the placement's " + FormatBytes(static_cast<int64_t>(gpu)) + " and the " +
                          std::string(device.name()) + " backend's scratch of " +
                          FormatBytes(static_cast<int64_t>(scratch)) + ")"
                    : "";
    return Status::ResourceExhausted(
        "the placement needs " + FormatBytes(static_cast<int64_t>(gpu + scratch)) +
        " of GPU memory" + scratch_text + " but the device tier holds " +
        FormatBytes(static_cast<int64_t>(t->device_capacity_)) +
        "; lower the GPU percents or the batch, or allow more with --gpu-memory");
  }
  t->backend_ = &device;
  STRATA_ASSIGN_OR_RETURN(t->device_, device.AllocateDeviceArena(gpu));
  if (op_limits != nullptr) STRATA_RETURN_IF_ERROR(device.ReserveScratch(*op_limits));
  if (cpu > 0) {
    STRATA_ASSIGN_OR_RETURN(t->host_, AlignedBuffer::Allocate(cpu));
    STRATA_ASSIGN_OR_RETURN(t->pinned_, device.PinHostMemory(t->host_.span()));
  }
  if (disk > 0 || !weight_file.empty()) {
    FileEnvOptions env_options;
    env_options.kind = options.file_env;
    if (cpu > 0) env_options.registered_buffers.push_back(t->host_.span());
    STRATA_ASSIGN_OR_RETURN(t->env_, NewFileEnv(env_options));
    if (options.wrap_file_env) t->env_ = options.wrap_file_env(std::move(t->env_));
  }
  if (disk > 0) {
    STRATA_ASSIGN_OR_RETURN(t->scratch_, ScratchFile::Create(t->env_.get(), options.offload_dir, disk));
  }
  if (!weight_file.empty()) {
    Result<std::unique_ptr<DiskFile>> file =
        t->env_->Open(weight_file, {FileMode::kRead, /*direct=*/true});
    if (!file.ok()) {
      return file.status().WithContext("opening the store's weights for the disk tier");
    }
    t->weight_file_ = std::move(*file);
  }
  return t;
}

DeviceSpan MemoryTiers::Device(const GpuExtent& e) const {
  return device_->Span(e.offset, e.bytes);
}

uint8_t* MemoryTiers::At(const CpuExtent& e) const {
  STRATA_CHECK(e.offset + e.bytes <= host_.size());
  return host_.data() + e.offset;
}

std::unique_ptr<DeviceArena> MemoryTiers::HostArena(Backend& backend) const {
  return backend.HostArena(std::span<uint8_t>(host_.data(), host_.size()));
}

uint64_t MemoryTiers::capacity_bytes(Tier tier) const {
  switch (tier) {
    case Tier::kGpu: return device_capacity_;
    case Tier::kCpu: return host_.size();
    case Tier::kDisk: return scratch_ ? scratch_->size_bytes() : 0;
  }
  return 0;
}

std::string MemoryTiers::file_env_name() const { return env_ ? env_->name() : ""; }

struct MemoryTiers::Copies {
  std::unique_ptr<Event> slot_done[2];
  DeviceCopies copies;
};

MemoryTiers::Copies MemoryTiers::DeviceCopiesOn(Stream* stream,
                                                std::span<const DiskPiece> pieces) const {
  Copies c;
  const bool device = std::any_of(pieces.begin(), pieces.end(),
                                  [](const DiskPiece& p) { return p.memory == nullptr; });
  if (stream == nullptr || !device) return c;
  for (int i = 0; i < 2; ++i) {
    c.slot_done[i] = backend_->MakeEvent();
    c.copies.slot_done[i] = c.slot_done[i].get();
  }
  c.copies.stream = stream;
  return c;
}

Status MemoryTiers::ReadDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                             Stream* stream) const {
  STRATA_CHECK(scratch_ != nullptr);
  const Copies c = DeviceCopiesOn(stream, pieces);
  return ReadPieces(*env_, scratch_->file(), pieces, ring, c.copies);
}

Status MemoryTiers::ReadWeights(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                                Stream* stream) const {
  STRATA_CHECK(weight_file_ != nullptr);
  const Copies c = DeviceCopiesOn(stream, pieces);
  return ReadPieces(*env_, weight_file_.get(), pieces, ring, c.copies);
}

Status MemoryTiers::WriteDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring,
                              Stream* stream) const {
  STRATA_CHECK(scratch_ != nullptr);
  const Copies c = DeviceCopiesOn(stream, pieces);
  return WritePieces(*env_, scratch_->file(), pieces, ring, c.copies);
}

Status MemoryTiers::TransferExtent(IoOp op, const DiskExtent& e, uint8_t* memory) const {
  STRATA_CHECK(scratch_ != nullptr && e.offset % kDirectIoAlignment == 0);
  const IoRequest request{op, scratch_->file(), e.offset, static_cast<size_t>(AlignUp(e.bytes)),
                          memory};
  IoEvent event;
  env_->Submit({&request, 1}, &event);
  return event.Wait();
}

}  // namespace strata
