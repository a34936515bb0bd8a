#include "src/runtime/executor_transfers.h"

#include <algorithm>
#include <cstring>
#include <vector>

namespace strata {
namespace {

constexpr uint64_t kF32 = sizeof(float);

// The 4 KiB pages of a slice's disk extent (K rows then V rows, `d` of each, `row_bytes` apiece,
// at `offset` in the file) that hold slot `slot` of rows [0, rows), as pieces whose bytes are at
// at(x) for extent offset x. Every byte of those pages is covered, so writing them whole keeps
// the other slots they hold.
template <typename At>
void DirtyPages(uint64_t offset, uint64_t d, uint64_t rows, int64_t row_bytes, int slot,
                int head_dim, At at, std::vector<DiskPiece>& out) {
  const uint64_t row = static_cast<uint64_t>(row_bytes);
  const uint64_t slot_bytes = static_cast<uint64_t>(head_dim) * kF32;
  const uint64_t plane = d * row;
  for (uint64_t p = 0; p < 2; ++p) {
    for (uint64_t j = 0; j < rows; ++j) {
      const uint64_t x = p * plane + j * row + static_cast<uint64_t>(slot) * slot_bytes;
      uint64_t a = x / kDirectIoAlignment * kDirectIoAlignment;
      const uint64_t b = std::min(AlignUp(x + slot_bytes), 2 * plane);
      while (a < b) {  // split where K rows end and V rows begin
        const uint64_t end = a < plane ? std::min(b, plane) : b;
        out.push_back({offset + a, at(a), end - a});
        a = end;
      }
    }
  }
}

}  // namespace

BlockTransfers::BlockTransfers(const Placement& placement, const MemoryTiers& tiers)
    : p_(placement),
      tiers_(tiers),
      delegate_(placement.plan.cpu_attention && placement.cache.rows.off_gpu() > 0) {}

std::span<uint8_t> BlockTransfers::Ring(bool read) const {
  const uint64_t half = p_.disk_ring.bytes / 2;
  return {tiers_.At(p_.disk_ring) + (read ? 0 : half), half};
}

// The memory copies of one step, timed per link and recorded as one span per link (a step may
// copy thousands of KV rows).
class BlockTransfers::Copies {
 public:
  explicit Copies(LaneRecord& record) : record_(record) {}
  ~Copies() {
    for (int i = 0; i < kNumLinks; ++i) {
      if (bytes_[i] == 0) continue;
      record_.AddTransfer(static_cast<Link>(i), start_us_[i], start_us_[i] + busy_us_[i], bytes_[i]);
    }
  }
  void operator()(Link link, void* dst, const void* src, uint64_t bytes) {
    if (bytes == 0) return;
    const int i = static_cast<int>(link);
    const double t0 = record_.NowUs();
    std::memcpy(dst, src, bytes);
    if (bytes_[i] == 0) start_us_[i] = t0;
    busy_us_[i] += record_.NowUs() - t0;
    bytes_[i] += bytes;
  }

 private:
  LaneRecord& record_;
  double start_us_[kNumLinks] = {};
  double busy_us_[kNumLinks] = {};
  uint64_t bytes_[kNumLinks] = {};
};

Status BlockTransfers::Disk(bool read, std::span<const DiskPiece> pieces,
                            LaneRecord& record) const {
  uint64_t bytes = 0;
  for (const DiskPiece& piece : pieces) bytes += piece.bytes;
  if (bytes == 0) return Status::Ok();
  const double t0 = record.NowUs();
  STRATA_RETURN_IF_ERROR(read ? tiers_.ReadDisk(pieces, Ring(true))
                              : tiers_.WriteDisk(pieces, Ring(false)));
  record.AddTransfer(read ? Link::kDiskToCpu : Link::kCpuToDisk, t0, record.NowUs(), bytes);
  return Status::Ok();
}

Status BlockTransfers::DiskExtent(bool read, const Extent& e, uint8_t* memory,
                                  LaneRecord& record) const {
  const double t0 = record.NowUs();
  STRATA_RETURN_IF_ERROR(tiers_.TransferExtent(read ? IoOp::kRead : IoOp::kWrite, e, memory));
  record.AddTransfer(read ? Link::kDiskToCpu : Link::kCpuToDisk, t0, record.NowUs(), e.bytes);
  return Status::Ok();
}

Status BlockTransfers::LoadWeights(int layer, int part, int slot, LaneRecord& record) const {
  Copies copy(record);
  uint8_t* base = tiers_.At(p_.weight_slots[slot]);
  std::vector<DiskPiece> disk;
  for (const PlacedTensor& t : p_.weights.layers[static_cast<size_t>(layer)].tensors) {
    if (t.slot_offset < 0 || t.part != part) continue;
    uint8_t* dst = base + t.slot_offset;
    if (t.gpu_rows > 0) copy(Link::kGpuToGpu, dst, tiers_.At(t.gpu_home), t.gpu_home.bytes);
    dst += t.gpu_rows * t.row_bytes;
    if (t.cpu_rows > 0) copy(Link::kCpuToGpu, dst, tiers_.At(t.cpu_home), t.cpu_home.bytes);
    dst += t.cpu_rows * t.row_bytes;
    if (t.disk_rows > 0) disk.push_back({t.disk_home.offset, dst, t.disk_home.bytes});
  }
  return Disk(true, disk, record);
}

Status BlockTransfers::LoadCache(int slice, int slot, int rows, int filled,
                                 LaneRecord& record) const {
  const CachePlacement& c = p_.cache;
  const TierExtents& home = c.slices[static_cast<size_t>(slice)];
  if (delegate_) {
    // Decode with CPU attention: the disk rows come to the CPU, where attention reads them.
    return DiskExtent(true, home.disk, tiers_.At(c.cpu_slots[slot]), record);
  }
  Copies copy(record);
  const uint64_t row = static_cast<uint64_t>(c.row_bytes);
  const uint64_t staged_row = static_cast<uint64_t>(c.staging_len) * c.head_dim * kF32;
  const uint64_t bytes = static_cast<uint64_t>(filled) * c.head_dim * kF32;
  uint8_t* k_slot = tiers_.At(c.slots[slot]);
  uint8_t* v_slot = k_slot + staged_row * c.rows.off_gpu();
  std::vector<DiskPiece> disk;
  for (int64_t r = c.rows.gpu; r < rows; ++r) {
    const int64_t i = r - c.rows.gpu;  // row within the slot
    if (r < c.rows.gpu + c.rows.cpu) {
      const uint8_t* k_home = tiers_.At(home.cpu) + i * row;
      copy(Link::kCpuToGpu, k_slot + i * staged_row, k_home, bytes);
      copy(Link::kCpuToGpu, v_slot + i * staged_row, k_home + c.rows.cpu * row, bytes);
    } else {
      const uint64_t j = static_cast<uint64_t>(i - c.rows.cpu);  // row within the disk extent
      disk.push_back({home.disk.offset + j * row, k_slot + i * staged_row, bytes});
      disk.push_back({home.disk.offset + (c.rows.disk + j) * row, v_slot + i * staged_row, bytes});
    }
  }
  return Disk(true, disk, record);
}

Status BlockTransfers::StoreCache(int slice, int slot, int rows, int first, int count, bool decode,
                                  LaneRecord& record) const {
  const CachePlacement& c = p_.cache;
  const TierExtents& home = c.slices[static_cast<size_t>(slice)];
  const uint64_t d = static_cast<uint64_t>(c.rows.disk);
  const int64_t disk_rows = std::max<int64_t>(0, rows - c.rows.gpu - c.rows.cpu);
  if (delegate_ && decode) {
    // The CPU-attention slot is laid out as the extent: its pages holding the new slot go home.
    uint8_t* base = tiers_.At(c.cpu_slots[slot]);
    std::vector<DiskPiece> disk;
    DirtyPages(home.disk.offset, d, static_cast<uint64_t>(disk_rows), c.row_bytes, first, c.head_dim,
               [&](uint64_t x) { return base + x; }, disk);
    return Disk(false, disk, record);
  }
  Copies copy(record);
  const uint64_t row = static_cast<uint64_t>(c.row_bytes);
  const uint64_t staged_row = static_cast<uint64_t>(c.staging_len) * c.head_dim * kF32;
  const uint64_t offset = static_cast<uint64_t>(first) * c.head_dim * kF32;
  const uint64_t bytes = static_cast<uint64_t>(count) * c.head_dim * kF32;
  const uint8_t* k_slot = tiers_.At(c.slots[slot]);
  const uint8_t* v_slot = k_slot + staged_row * c.rows.off_gpu();
  std::vector<DiskPiece> disk;
  const int64_t cpu_end = std::min<int64_t>(rows, c.rows.gpu + c.rows.cpu);
  for (int64_t r = c.rows.gpu; r < cpu_end; ++r) {
    const int64_t i = r - c.rows.gpu;
    uint8_t* k_home = tiers_.At(home.cpu) + i * row;
    copy(Link::kGpuToCpu, k_home + offset, k_slot + i * staged_row + offset, bytes);
    copy(Link::kGpuToCpu, k_home + c.rows.cpu * row + offset, v_slot + i * staged_row + offset,
         bytes);
  }
  if (disk_rows > 0) {
    auto* k_disk = const_cast<uint8_t*>(k_slot) + static_cast<uint64_t>(c.rows.cpu) * staged_row;
    auto* v_disk = const_cast<uint8_t*>(v_slot) + static_cast<uint64_t>(c.rows.cpu) * staged_row;
    if (staged_row == row && decode) {
      // Rows laid out as on disk: only the pages that hold the new slot.
      DirtyPages(home.disk.offset, d, static_cast<uint64_t>(disk_rows), c.row_bytes, first,
                 c.head_dim, [&](uint64_t x) { return x < d * row ? k_disk + x : v_disk + x - d * row; },
                 disk);
    } else if (staged_row == row) {
      // The prefill: the whole extent in two pieces, aligned writes.
      disk.push_back({home.disk.offset, k_disk, d * row});
      disk.push_back({home.disk.offset + d * row, v_disk, d * row});
    } else {
      // The prefill of a CPU-attention cache: prompt slots only, at the home's row stride.
      for (uint64_t j = 0; j < d; ++j) {
        disk.push_back({home.disk.offset + j * row + offset, k_disk + j * staged_row + offset, bytes});
        disk.push_back({home.disk.offset + (d + j) * row + offset, v_disk + j * staged_row + offset,
                        bytes});
      }
    }
  }
  return Disk(false, disk, record);
}

Status BlockTransfers::LoadActivations(int k, int slot, int rows, LaneRecord& record) const {
  const ActivationPlacement& a = p_.activations;
  const TierExtents& home = a.homes[static_cast<size_t>(k)];
  const uint64_t rb = static_cast<uint64_t>(a.row_bytes);
  uint8_t* dst = tiers_.At(a.slots[slot]);
  Copies copy(record);
  const int64_t gpu = std::min<int64_t>(rows, a.rows.gpu);
  const int64_t cpu = std::min<int64_t>(rows, a.rows.gpu + a.rows.cpu) - gpu;
  const int64_t disk = rows - gpu - cpu;
  if (gpu > 0) copy(Link::kGpuToGpu, dst, tiers_.At(home.gpu), gpu * rb);
  if (cpu > 0) copy(Link::kCpuToGpu, dst + a.rows.gpu * rb, tiers_.At(home.cpu), cpu * rb);
  if (disk <= 0) return Status::Ok();
  const DiskPiece piece{home.disk.offset, dst + (a.rows.gpu + a.rows.cpu) * rb, disk * rb};
  return Disk(true, {&piece, 1}, record);
}

Status BlockTransfers::StoreActivations(int k, int slot, int rows, LaneRecord& record) const {
  const ActivationPlacement& a = p_.activations;
  const TierExtents& home = a.homes[static_cast<size_t>(k)];
  const uint64_t rb = static_cast<uint64_t>(a.row_bytes);
  uint8_t* src = tiers_.At(a.slots[slot]);
  Copies copy(record);
  const int64_t gpu = std::min<int64_t>(rows, a.rows.gpu);
  const int64_t cpu = std::min<int64_t>(rows, a.rows.gpu + a.rows.cpu) - gpu;
  const int64_t disk = rows - gpu - cpu;
  if (gpu > 0) copy(Link::kGpuToGpu, tiers_.At(home.gpu), src, gpu * rb);
  if (cpu > 0) copy(Link::kGpuToCpu, tiers_.At(home.cpu), src + a.rows.gpu * rb, cpu * rb);
  if (disk <= 0) return Status::Ok();
  const DiskPiece piece{home.disk.offset, src + (a.rows.gpu + a.rows.cpu) * rb, disk * rb};
  return Disk(false, {&piece, 1}, record);
}

}  // namespace strata
