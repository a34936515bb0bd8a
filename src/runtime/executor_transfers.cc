#include "src/runtime/executor_transfers.h"

#include <algorithm>
#include <vector>

#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {
namespace {

// The 4 KiB pages of a slice's disk extent (`d` rows of `len` slots in each of `f`'s planes, at
// `offset` in the file) that hold slots [slot, slot + count) of rows [0, rows), as pieces whose
// bytes are at memory offset at(plane, y) for offset y within that plane of the extent, made by
// piece(file_offset, memory_offset, bytes). Every byte of those pages is covered, so writing them
// whole keeps the other slots they hold; a page that holds the slots of several rows (short rows:
// the 4-bit params) is written once, and adjacent pages whose bytes are adjacent in memory go in
// one piece.
template <typename At, typename Piece>
void DirtyPages(uint64_t offset, const KvFormat& f, uint64_t d, int len, uint64_t rows, int slot,
                int count, At at, Piece piece, std::vector<DiskPiece>& out) {
  const auto plane_begin = [&](int p) {
    return static_cast<uint64_t>(f.PlaneOffset(p, static_cast<int64_t>(d), len));
  };
  const uint64_t total = plane_begin(f.planes());
  uint64_t done = 0;  // the pages before this extent offset are in `out` already
  uint64_t last_memory = 0;  // where the last piece made here begins in memory
  const size_t first = out.size();
  for (int p = 0; p < f.planes(); ++p) {
    const uint64_t slot_bytes = static_cast<uint64_t>(f.plane_slot_bytes(p));
    for (uint64_t j = 0; j < rows; ++j) {
      const uint64_t x = plane_begin(p) + (j * len + static_cast<uint64_t>(slot)) * slot_bytes;
      uint64_t a = std::max(x / kDirectIoAlignment * kDirectIoAlignment, done);
      const uint64_t b = std::min(AlignUp(x + static_cast<uint64_t>(count) * slot_bytes), total);
      int q = 0;
      while (a < b) {  // split where one plane ends and the next begins
        while (plane_begin(q + 1) <= a) ++q;
        const uint64_t end = std::min(b, plane_begin(q + 1));
        const uint64_t memory = at(q, a - plane_begin(q));
        DiskPiece* last = out.size() == first ? nullptr : &out.back();
        if (last != nullptr && last->file_offset + last->bytes == offset + a &&
            last_memory + last->bytes == memory) {
          *last = piece(last->file_offset, last_memory, last->bytes + end - a);
        } else {
          out.push_back(piece(offset + a, memory, end - a));
          last_memory = memory;
        }
        a = end;
      }
      done = std::max(done, b);
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

// The copies of one step between the device tier and itself or the host tier, given to the
// lane's stream, timed per link and recorded as one span per link (a step may copy thousands of
// KV rows). The times are those of giving the copies, which on the CPU backend's inline streams
// are the copies themselves.
class BlockTransfers::Copies {
 public:
  Copies(Stream& stream, LaneRecord& record) : stream_(stream), record_(record) {}
  ~Copies() {
    for (int i = 0; i < kNumLinks; ++i) {
      if (bytes_[i] == 0) continue;
      record_.AddTransfer(static_cast<Link>(i), start_us_[i], start_us_[i] + busy_us_[i], bytes_[i]);
    }
  }
  // Device to device (Link::kGpuToGpu).
  void OnDevice(DeviceSpan dst, DeviceSpan src) {
    Timed(Link::kGpuToGpu, dst.bytes(), [&] { stream_.CopyOnDevice(dst, src); });
  }
  // Host tier to device (Link::kCpuToGpu): dst.bytes() bytes from `src`.
  void ToDevice(DeviceSpan dst, const uint8_t* src) {
    Timed(Link::kCpuToGpu, dst.bytes(), [&] { stream_.CopyToDevice(dst, {src, dst.bytes()}); });
  }
  // Device to host tier (Link::kGpuToCpu): src.bytes() bytes to `dst`.
  void ToHost(uint8_t* dst, DeviceSpan src) {
    Timed(Link::kGpuToCpu, src.bytes(), [&] { stream_.CopyToHost({dst, src.bytes()}, src); });
  }

 private:
  template <typename Copy>
  void Timed(Link link, uint64_t bytes, Copy copy) {
    if (bytes == 0) return;
    const int i = static_cast<int>(link);
    const double t0 = record_.NowUs();
    copy();
    if (bytes_[i] == 0) start_us_[i] = t0;
    busy_us_[i] += record_.NowUs() - t0;
    bytes_[i] += bytes;
  }

  Stream& stream_;
  LaneRecord& record_;
  double start_us_[kNumLinks] = {};
  double busy_us_[kNumLinks] = {};
  uint64_t bytes_[kNumLinks] = {};
};

Status BlockTransfers::Disk(bool read, std::span<const DiskPiece> pieces, Stream& stream,
                            LaneRecord& record) const {
  uint64_t bytes = 0;
  for (const DiskPiece& piece : pieces) bytes += piece.bytes;
  if (bytes == 0) return Status::Ok();
  const double t0 = record.NowUs();
  STRATA_RETURN_IF_ERROR(read ? tiers_.ReadDisk(pieces, Ring(true), &stream)
                              : tiers_.WriteDisk(pieces, Ring(false), &stream));
  record.AddTransfer(read ? Link::kDiskToCpu : Link::kCpuToDisk, t0, record.NowUs(), bytes);
  return Status::Ok();
}

Status BlockTransfers::TransferExtent(bool read, const DiskExtent& e, uint8_t* memory,
                                      LaneRecord& record) const {
  const double t0 = record.NowUs();
  STRATA_RETURN_IF_ERROR(tiers_.TransferExtent(read ? IoOp::kRead : IoOp::kWrite, e, memory));
  record.AddTransfer(read ? Link::kDiskToCpu : Link::kCpuToDisk, t0, record.NowUs(), e.bytes);
  return Status::Ok();
}

Status BlockTransfers::LoadWeights(int layer, int part, int slot, Stream& stream,
                                   LaneRecord& record) const {
  Copies copy(stream, record);
  const DeviceSpan slot_span = tiers_.Device(p_.weight_slots[slot]);
  std::vector<DiskPiece> scratch, store;
  for (const PlacedTensor& t : p_.weights.layers[static_cast<size_t>(layer)].tensors) {
    if (t.slot_offset < 0 || t.part != part) continue;
    const uint64_t at = static_cast<uint64_t>(t.slot_offset);
    if (t.gpu_rows > 0) {
      copy.OnDevice(slot_span.Sub(at, t.gpu_home.bytes), tiers_.Device(t.gpu_home));
    }
    const uint64_t cpu_at = at + static_cast<uint64_t>(t.gpu_rows * t.row_bytes);
    if (t.cpu_rows > 0) {
      copy.ToDevice(slot_span.Sub(cpu_at, t.cpu_home.bytes), tiers_.At(t.cpu_home));
    }
    const uint64_t disk_at = cpu_at + static_cast<uint64_t>(t.cpu_rows * t.row_bytes);
    if (t.disk_rows > 0) {
      (t.disk_in_store ? store : scratch)
          .push_back({t.disk_home.offset, slot_span.Sub(disk_at, t.disk_home.bytes)});
    }
    if (t.disk_store_params.bytes > 0) {
      store.push_back({t.disk_store_params.offset,
                       slot_span.Sub(disk_at + t.disk_home.bytes, t.disk_store_params.bytes)});
    }
  }
  STRATA_RETURN_IF_ERROR(Disk(true, scratch, stream, record));
  return ReadStoreWeights(store, stream, record);
}

Status BlockTransfers::GatherInputRows(const InputRows& rows, int slot, Stream& stream,
                                       LaneRecord& record) const {
  Copies copy(stream, record);
  const DeviceSpan slot_span = tiers_.Device(p_.weight_slots[slot]);
  std::vector<DiskPiece> scratch, store;
  for (const PlacedTensor& t : p_.weights.input().tensors) {
    if (t.slot_offset < 0) continue;
    const std::vector<int32_t>& ids = rows.of(t);
    const long cols = static_cast<long>(t.source.dim(1));
    // A row is one plane, or two for 4 bits (codes, params), and a chunk of n rows holds each
    // plane's n rows in turn (PlacedTensor::q4).
    const int planes = t.q4 ? 2 : 1;
    const int64_t plane_row[2] = {
        t.q4 ? WeightQ4CodeBytes(1, cols) : t.row_bytes,
        t.q4 ? WeightQ4ParamHalves(1, cols, t.q4_group) * 2 : 0};
    const auto plane_begin = [&](int p, int64_t n) { return p == 0 ? 0 : n * plane_row[0]; };
    const int64_t n = static_cast<int64_t>(ids.size());
    const int64_t tier_end[3] = {t.gpu_rows, t.gpu_rows + t.cpu_rows, t.rows()};
    for (int p = 0; p < planes; ++p) {
      for (int64_t i = 0; i < n;) {
        const int64_t r = ids[static_cast<size_t>(i)];
        STRATA_CHECK(r >= 0 && r < t.rows());
        const int tier = r < tier_end[0] ? 0 : r < tier_end[1] ? 1 : 2;
        const int64_t first = tier == 0 ? 0 : tier_end[tier - 1];
        int64_t j = i + 1;
        while (j < n && ids[static_cast<size_t>(j)] == r + (j - i) &&
               r + (j - i) < tier_end[tier]) {
          ++j;
        }
        const int64_t to_at = t.slot_offset + plane_begin(p, n) + i * plane_row[p];
        const uint64_t bytes = static_cast<uint64_t>((j - i) * plane_row[p]);
        const DeviceSpan to_span = slot_span.Sub(static_cast<uint64_t>(to_at), bytes);
        // Where the run begins in its tier's chunk.
        const int64_t from = plane_begin(p, tier_end[tier] - first) + (r - first) * plane_row[p];
        if (tier == 0) {
          copy.OnDevice(to_span, tiers_.Device(t.gpu_home).Sub(static_cast<uint64_t>(from), bytes));
        } else if (tier == 1) {
          copy.ToDevice(to_span, tiers_.At(t.cpu_home) + from);
        } else if (!t.disk_in_store) {
          scratch.push_back({t.disk_home.offset + static_cast<uint64_t>(from), to_span});
        } else if (p == 0) {
          store.push_back({t.disk_home.offset + static_cast<uint64_t>(from), to_span});
        } else {  // a 4-bit store keeps the disk rows' params in their own extent
          store.push_back(
              {t.disk_store_params.offset + static_cast<uint64_t>((r - first) * plane_row[1]),
               to_span});
        }
        i = j;
      }
    }
  }
  STRATA_RETURN_IF_ERROR(Disk(true, scratch, stream, record));
  return ReadStoreWeights(store, stream, record);
}

Status BlockTransfers::ReadStoreWeights(std::span<const DiskPiece> pieces, Stream& stream,
                                        LaneRecord& record) const {
  uint64_t bytes = 0;
  for (const DiskPiece& piece : pieces) bytes += piece.bytes;
  if (bytes == 0) return Status::Ok();
  const double t0 = record.NowUs();
  STRATA_RETURN_IF_ERROR(tiers_.ReadWeights(pieces, Ring(true), &stream));
  record.AddTransfer(Link::kDiskToCpu, t0, record.NowUs(), bytes);
  return Status::Ok();
}

Status BlockTransfers::LoadCache(int slice, int slot, int rows, int filled, Stream& stream,
                                 LaneRecord& record) const {
  const CachePlacement& c = p_.cache;
  const TierExtents& home = c.slices[static_cast<size_t>(slice)];
  if (delegate_) {
    // Decode with CPU attention: the disk rows come to the CPU, where attention reads them.
    return TransferExtent(true, home.disk, tiers_.At(c.cpu_slots[slot]), record);
  }
  Copies copy(stream, record);
  const KvFormat& f = c.format;
  const DeviceSpan staging_span = tiers_.Device(c.slots[slot]);
  std::vector<DiskPiece> disk;
  for (int64_t r = c.rows.gpu; r < rows; ++r) {
    const int64_t i = r - c.rows.gpu;  // row within the slot
    for (int p = 0; p < f.planes(); ++p) {
      const int64_t s = f.plane_slot_bytes(p);
      const int64_t dst_at = f.PlaneOffset(p, c.rows.off_gpu(), c.staging_len) +
                             i * c.staging_len * s;
      const uint64_t bytes = static_cast<uint64_t>(filled * s);
      const DeviceSpan dst = staging_span.Sub(static_cast<uint64_t>(dst_at), bytes);
      if (r < c.rows.gpu + c.rows.cpu) {
        copy.ToDevice(dst,
                      tiers_.At(home.cpu) + f.PlaneOffset(p, c.rows.cpu, c.max_len) +
                          i * c.max_len * s);
      } else {
        const int64_t j = i - c.rows.cpu;  // row within the disk extent
        disk.push_back({home.disk.offset +
                            static_cast<uint64_t>(f.PlaneOffset(p, c.rows.disk, c.max_len) +
                                                  j * c.max_len * s),
                        dst});
      }
    }
  }
  return Disk(true, disk, stream, record);
}

Status BlockTransfers::StoreCache(int slice, int slot, int rows, int first, int count, bool decode,
                                  Stream& stream, LaneRecord& record) const {
  const CachePlacement& c = p_.cache;
  const KvFormat& f = c.format;
  const TierExtents& home = c.slices[static_cast<size_t>(slice)];
  const int64_t d = c.rows.disk;
  const int64_t disk_rows = std::max<int64_t>(0, rows - c.rows.gpu - c.rows.cpu);
  std::vector<DiskPiece> disk;
  if (delegate_ && decode) {
    // The CPU-attention slot is laid out as the extent: its pages holding the new slots go home.
    uint8_t* base = tiers_.At(c.cpu_slots[slot]);
    const auto extent_at = [&](int p, uint64_t y) {
      return static_cast<uint64_t>(f.PlaneOffset(p, d, c.max_len)) + y;
    };
    const auto in_slot = [&](uint64_t at, uint64_t memory, uint64_t n) {
      return DiskPiece{at, base + memory, n};
    };
    DirtyPages(home.disk.offset, f, static_cast<uint64_t>(d), c.max_len,
               static_cast<uint64_t>(disk_rows), first, count, extent_at, in_slot, disk);
    return Disk(false, disk, stream, record);
  }
  Copies copy(stream, record);
  const DeviceSpan staging_span = tiers_.Device(c.slots[slot]);
  // Where row i of plane p of the cache slot begins in the slot.
  const auto staged_at = [&](int p, int64_t i) {
    return static_cast<uint64_t>(f.PlaneOffset(p, c.rows.off_gpu(), c.staging_len) +
                                 i * c.staging_len * f.plane_slot_bytes(p));
  };
  // A piece of file bytes [at, at + n) and slot bytes [memory, memory + n).
  const auto staged = [&](uint64_t at, uint64_t memory, uint64_t n) {
    return DiskPiece{at, staging_span.Sub(memory, n)};
  };
  const int64_t cpu_end = std::min<int64_t>(rows, c.rows.gpu + c.rows.cpu);
  for (int64_t r = c.rows.gpu; r < cpu_end; ++r) {
    const int64_t i = r - c.rows.gpu;
    for (int p = 0; p < f.planes(); ++p) {
      const int64_t s = f.plane_slot_bytes(p);
      uint8_t* k_home =
          tiers_.At(home.cpu) + f.PlaneOffset(p, c.rows.cpu, c.max_len) + i * c.max_len * s;
      copy.ToHost(k_home + first * s, staging_span.Sub(staged_at(p, i) + first * s,
                                                       static_cast<uint64_t>(count * s)));
    }
  }
  if (disk_rows > 0) {
    const auto at = [&](int p) {
      return home.disk.offset + static_cast<uint64_t>(f.PlaneOffset(p, d, c.max_len));
    };
    if (c.staging_len == c.max_len && decode) {
      // Rows laid out as on disk: only the pages that hold the new slots.
      DirtyPages(home.disk.offset, f, static_cast<uint64_t>(d), c.max_len,
                 static_cast<uint64_t>(disk_rows), first, count,
                 [&](int p, uint64_t y) { return staged_at(p, c.rows.cpu) + y; }, staged, disk);
    } else if (c.staging_len == c.max_len) {
      // The prefill: the whole extent, one piece per plane, aligned writes.
      for (int p = 0; p < f.planes(); ++p) {
        disk.push_back(staged(at(p), staged_at(p, c.rows.cpu),
                              static_cast<uint64_t>(d * c.max_len * f.plane_slot_bytes(p))));
      }
    } else {
      // The prefill of a CPU-attention cache: prompt slots only, at the home's row stride.
      for (int64_t j = 0; j < d; ++j) {
        for (int p = 0; p < f.planes(); ++p) {
          const int64_t s = f.plane_slot_bytes(p);
          disk.push_back(staged(at(p) + static_cast<uint64_t>((j * c.max_len + first) * s),
                                staged_at(p, c.rows.cpu + j) + static_cast<uint64_t>(first * s),
                                static_cast<uint64_t>(count * s)));
        }
      }
    }
  }
  return Disk(false, disk, stream, record);
}

Status BlockTransfers::LoadActivations(int k, int slot, int rows, Stream& stream,
                                       LaneRecord& record) const {
  const ActivationPlacement& a = p_.activations;
  const TierExtents& home = a.homes[static_cast<size_t>(k)];
  const uint64_t rb = static_cast<uint64_t>(a.row_bytes);
  const DeviceSpan slot_span = tiers_.Device(a.slots[slot]);
  Copies copy(stream, record);
  const int64_t gpu = std::min<int64_t>(rows, a.rows.gpu);
  const int64_t cpu = std::min<int64_t>(rows, a.rows.gpu + a.rows.cpu) - gpu;
  const int64_t disk = rows - gpu - cpu;
  if (gpu > 0) copy.OnDevice(slot_span.Sub(0, gpu * rb), tiers_.Device(home.gpu).Sub(0, gpu * rb));
  if (cpu > 0) copy.ToDevice(slot_span.Sub(a.rows.gpu * rb, cpu * rb), tiers_.At(home.cpu));
  if (disk <= 0) return Status::Ok();
  const DiskPiece piece{home.disk.offset,
                        slot_span.Sub((a.rows.gpu + a.rows.cpu) * rb, disk * rb)};
  return Disk(true, {&piece, 1}, stream, record);
}

Status BlockTransfers::StoreActivations(int k, int slot, int rows, Stream& stream,
                                        LaneRecord& record) const {
  const ActivationPlacement& a = p_.activations;
  const TierExtents& home = a.homes[static_cast<size_t>(k)];
  const uint64_t rb = static_cast<uint64_t>(a.row_bytes);
  const DeviceSpan slot_span = tiers_.Device(a.slots[slot]);
  Copies copy(stream, record);
  const int64_t gpu = std::min<int64_t>(rows, a.rows.gpu);
  const int64_t cpu = std::min<int64_t>(rows, a.rows.gpu + a.rows.cpu) - gpu;
  const int64_t disk = rows - gpu - cpu;
  if (gpu > 0) copy.OnDevice(tiers_.Device(home.gpu).Sub(0, gpu * rb), slot_span.Sub(0, gpu * rb));
  if (cpu > 0) copy.ToHost(tiers_.At(home.cpu), slot_span.Sub(a.rows.gpu * rb, cpu * rb));
  if (disk <= 0) return Status::Ok();
  const DiskPiece piece{home.disk.offset,
                        slot_span.Sub((a.rows.gpu + a.rows.cpu) * rb, disk * rb)};
  return Disk(false, {&piece, 1}, stream, record);
}

}  // namespace strata
