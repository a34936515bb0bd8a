#include "src/memory/memory_tiers.h"

#include <algorithm>
#include <cstring>
#include <vector>

#include "src/core/check.h"
#include "src/io/io_event.h"

namespace strata {
namespace {

constexpr uint64_t kPage = kDirectIoAlignment;
// Reads of pieces at most this far apart in the file are joined, the bytes between them read and
// dropped: on the development VM's disk 64 KiB take about as long as one more request (quiet
// profile: 4 KiB requests at 69,000/s, 14 us each; 64 KiB at 3.4 GB/s, 19 us). A decode step's
// KV rows leave each row's unfilled slots between the pieces.
constexpr uint64_t kReadGapBytes = uint64_t{64} << 10;

uint64_t AlignDown(uint64_t n) { return n / kPage * kPage; }

// Pieces (in file order) read or written by one aligned file range.
struct Run {
  uint64_t begin = 0, end = 0;  // aligned file range
  std::vector<DiskPiece> pieces;
};

// The runs of `pieces`: pieces whose aligned ranges overlap, touch or are at most `max_gap` bytes
// apart share one. Writes pass 0 (a gap written would overwrite bytes no piece holds).
std::vector<Run> Runs(std::span<const DiskPiece> pieces, uint64_t max_gap) {
  std::vector<DiskPiece> sorted(pieces.begin(), pieces.end());
  std::sort(sorted.begin(), sorted.end(),
            [](const DiskPiece& a, const DiskPiece& b) { return a.file_offset < b.file_offset; });
  std::vector<Run> runs;
  for (const DiskPiece& p : sorted) {
    if (p.bytes == 0) continue;
    const uint64_t begin = AlignDown(p.file_offset);
    const uint64_t end = AlignUp(p.file_offset + p.bytes);
    if (runs.empty() || begin > runs.back().end + max_gap) {
      runs.push_back({begin, end, {}});
    } else {
      runs.back().end = std::max(runs.back().end, end);
    }
    runs.back().pieces.push_back(p);
  }
  return runs;
}

// Moves each chunk of file bytes [chunk, chunk + length) between the file and `ring`, as many
// chunks per submission as the ring holds; `copy` moves the piece bytes of one chunk between the
// ring and memory (before a write, after a read).
template <typename Copy>
Status MoveRuns(FileEnv& env, DiskFile* file, IoOp op, const std::vector<Run>& runs,
                std::span<uint8_t> ring, Copy copy) {
  STRATA_CHECK(!ring.empty() && ring.size() % kPage == 0);
  struct Chunk {
    const Run* run;
    uint64_t offset, length;
    uint8_t* buffer;
  };
  std::vector<Chunk> batch;
  uint64_t used = 0;
  auto flush = [&]() -> Status {
    if (batch.empty()) return Status::Ok();
    std::vector<IoRequest> requests;
    for (const Chunk& c : batch) {
      if (op == IoOp::kWrite) copy(*c.run, c.offset, c.length, c.buffer);
      requests.push_back({op, file, c.offset, static_cast<size_t>(c.length), c.buffer});
    }
    IoEvent event;
    env.Submit(requests, &event);
    STRATA_RETURN_IF_ERROR(event.Wait());
    if (op == IoOp::kRead) {
      for (const Chunk& c : batch) copy(*c.run, c.offset, c.length, c.buffer);
    }
    batch.clear();
    used = 0;
    return Status::Ok();
  };
  for (const Run& run : runs) {
    for (uint64_t at = run.begin; at < run.end;) {
      if (used == ring.size()) STRATA_RETURN_IF_ERROR(flush());
      const uint64_t length = std::min(run.end - at, ring.size() - used);
      batch.push_back({&run, at, length, ring.data() + used});
      used += length;
      at += length;
    }
  }
  return flush();
}

// The overlap of a piece with file bytes [offset, offset + length): piece offset, chunk offset
// and byte count; count 0 when they do not meet.
struct Overlap {
  uint64_t in_piece = 0, in_chunk = 0, bytes = 0;
};
Overlap OverlapOf(const DiskPiece& p, uint64_t offset, uint64_t length) {
  const uint64_t lo = std::max(p.file_offset, offset);
  const uint64_t hi = std::min(p.file_offset + p.bytes, offset + length);
  if (lo >= hi) return {};
  return {lo - p.file_offset, lo - offset, hi - lo};
}

// After a read: each piece's bytes from the chunk of file bytes [offset, offset + length).
void CopyOut(const Run& run, uint64_t offset, uint64_t length, const uint8_t* chunk) {
  for (const DiskPiece& p : run.pieces) {
    const Overlap o = OverlapOf(p, offset, length);
    if (o.bytes > 0) std::memcpy(p.memory + o.in_piece, chunk + o.in_chunk, o.bytes);
  }
}

}  // namespace

Result<std::unique_ptr<MemoryTiers>> MemoryTiers::Create(const TierLayout& layout,
                                                         const MemoryTiersOptions& options,
                                                         const std::string& weight_file) {
  std::unique_ptr<MemoryTiers> t(new MemoryTiers());
  for (int i = 0; i < kNumTiers; ++i) t->layout_bytes_[i] = layout.tier_bytes(static_cast<Tier>(i));
  const uint64_t gpu = t->layout_bytes_[static_cast<int>(Tier::kGpu)];
  const uint64_t cpu = t->layout_bytes_[static_cast<int>(Tier::kCpu)];
  const uint64_t disk = t->layout_bytes_[static_cast<int>(Tier::kDisk)];
  t->device_capacity_ = options.device_capacity_bytes > 0 ? options.device_capacity_bytes : gpu;
  if (gpu > t->device_capacity_) {
    return Status::ResourceExhausted(
        "the placement needs " + FormatBytes(static_cast<int64_t>(gpu)) + " of GPU memory but the "
        "device tier holds " + FormatBytes(static_cast<int64_t>(t->device_capacity_)) +
        "; lower the GPU percents or the batch, or allow more with --gpu-mem-gib");
  }
  if (gpu > 0) {
    STRATA_ASSIGN_OR_RETURN(t->device_, AlignedBuffer::Allocate(gpu));
  }
  if (cpu > 0) {
    STRATA_ASSIGN_OR_RETURN(t->host_, AlignedBuffer::Allocate(cpu));
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

uint8_t* MemoryTiers::At(const Extent& e) const {
  STRATA_CHECK(e.tier != Tier::kDisk);
  const AlignedBuffer& arena = e.tier == Tier::kGpu ? device_ : host_;
  STRATA_CHECK(e.offset + e.bytes <= arena.size());
  return arena.data() + e.offset;
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

Status MemoryTiers::ReadDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring) const {
  STRATA_CHECK(scratch_ != nullptr);
  return MoveRuns(*env_, scratch_->file(), IoOp::kRead, Runs(pieces, kReadGapBytes), ring,
                  CopyOut);
}

Status MemoryTiers::ReadWeights(std::span<const DiskPiece> pieces, std::span<uint8_t> ring) const {
  STRATA_CHECK(weight_file_ != nullptr);
  return MoveRuns(*env_, weight_file_.get(), IoOp::kRead, Runs(pieces, kReadGapBytes), ring,
                  CopyOut);
}

Status MemoryTiers::WriteDisk(std::span<const DiskPiece> pieces, std::span<uint8_t> ring) const {
  STRATA_CHECK(scratch_ != nullptr);
  return MoveRuns(*env_, scratch_->file(), IoOp::kWrite, Runs(pieces, 0), ring,
                  [](const Run& run, uint64_t offset, uint64_t length, uint8_t* chunk) {
                    for (const DiskPiece& p : run.pieces) {
                      const Overlap o = OverlapOf(p, offset, length);
                      if (o.bytes > 0) std::memcpy(chunk + o.in_chunk, p.memory + o.in_piece, o.bytes);
                    }
                  });
}

Status MemoryTiers::TransferExtent(IoOp op, const Extent& e, uint8_t* memory) const {
  STRATA_CHECK(scratch_ != nullptr && e.tier == Tier::kDisk && e.offset % kPage == 0);
  const IoRequest request{op, scratch_->file(), e.offset, static_cast<size_t>(AlignUp(e.bytes)),
                          memory};
  IoEvent event;
  env_->Submit({&request, 1}, &event);
  return event.Wait();
}

}  // namespace strata
