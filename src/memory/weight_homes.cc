#include "src/memory/weight_homes.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "policy/memory_accounting.h"
#include "policy/weight_layout.h"
#include "src/core/check.h"
#include "src/core/log.h"

namespace strata {
namespace {

// File bytes made and written at a time while writing disk rows home.
constexpr uint64_t kWindowBytes = uint64_t{32} << 20;

// Makes bytes [offset, offset + n) of some rows into dst.
using MakeBytes = std::function<void(uint64_t offset, uint64_t n, uint8_t* dst)>;

// Uploads to the device arena through a host window of two halves on a stream of the device's
// backend: each half is made, then copied, and made again only once its copy has completed (its
// event), so making one half overlaps copying the other.
class DeviceUploads {
 public:
  explicit DeviceUploads(Backend& device)
      : device_(device),
        stream_(device.MakeStream()),
        done_{device.MakeEvent(), device.MakeEvent()} {}
  DeviceUploads(const DeviceUploads&) = delete;
  DeviceUploads& operator=(const DeviceUploads&) = delete;
  // The host memory stays valid until every copy given has completed.
  ~DeviceUploads() { stream_->Synchronize(); }

  Status Upload(DeviceSpan dst, const MakeBytes& make) {
    if (window_.size() == 0) {
      STRATA_ASSIGN_OR_RETURN(window_, AlignedBuffer::Allocate(kWindowBytes));
      STRATA_ASSIGN_OR_RETURN(pinned_, device_.PinHostMemory(window_.span()));
    }
    const uint64_t half = kWindowBytes / 2;
    for (uint64_t at = 0; at < dst.bytes();) {
      const uint64_t n = std::min(half, dst.bytes() - at);
      done_[next_]->HostWait();
      uint8_t* buf = window_.data() + next_ * half;
      make(at, n, buf);
      stream_->CopyToDevice(dst.Sub(at, n), {buf, n});
      stream_->Record(*done_[next_]);
      next_ ^= 1;
      at += n;
    }
    return Status::Ok();
  }

 private:
  Backend& device_;
  std::unique_ptr<Stream> stream_;
  std::unique_ptr<Event> done_[2];
  AlignedBuffer window_;
  std::unique_ptr<PinnedHost> pinned_;  // window_
  int next_ = 0;
};

// One tensor's disk rows waiting to be written: file bytes [file_offset, file_offset + bytes) of
// the scratch file, made by make(offset, n, dst) n bytes at a time.
struct PendingRows {
  uint64_t file_offset = 0;
  uint64_t bytes = 0;
  MakeBytes make;
};

// One line saying where the disk weights are read from, and why when they are copied; once per
// process for each path (a job re-places for longer prompts with the same answer).
void LogDiskWeights(const Model& model, const WeightPlacement& weights, uint64_t copied_bytes) {
  static std::atomic<bool> logged_store{false}, logged_copy{false};
  if (weights.store_disk_bytes > 0 && !logged_store.exchange(true)) {
    LogInfo("disk weights: " + FormatBytes(static_cast<int64_t>(weights.store_disk_bytes)) +
            " read in place from " + weights.weight_file);
  }
  if (copied_bytes == 0 || logged_copy.exchange(true)) return;
  const std::string copied = "disk weights: " + FormatBytes(static_cast<int64_t>(copied_bytes));
  if (model.weights_on_demand()) {
    LogInfo(copied + " made straight into the scratch file (synthetic weights made on demand)");
    return;
  }
  LogInfo(copied + " copied to the scratch file, as their bytes in memory are not a strata "
          "store's (converted in memory, or quantized to 4 bits at load); `strata convert` the "
          "model (with --compress-weight for 4-bit weights) to read them in place");
}

// Bytes [offset, offset + n) of rows [first, first + rows) of a 4-bit tensor as one chunk: their
// codes, then their params.
void Q4ChunkBytes(const PlacedTensor& t, const Q4Planes& planes, int64_t first, int64_t rows,
                  uint64_t offset, uint64_t n, uint8_t* dst) {
  const int64_t cols = t.source.dim(1);
  const uint64_t code_row = static_cast<uint64_t>(cols / 2);
  const uint64_t param_row = static_cast<uint64_t>(cols / planes.group * 2) * sizeof(uint16_t);
  const uint64_t code_bytes = static_cast<uint64_t>(rows) * code_row;
  const uint8_t* codes = planes.codes + static_cast<uint64_t>(first) * code_row;
  const uint8_t* params =
      reinterpret_cast<const uint8_t*>(planes.params) + static_cast<uint64_t>(first) * param_row;
  if (offset < code_bytes) {
    const uint64_t m = std::min(n, code_bytes - offset);
    std::memcpy(dst, codes + offset, m);
    dst += m;
    offset += m;
    n -= m;
  }
  if (n > 0) std::memcpy(dst, params + (offset - code_bytes), n);
}

// Makes the pending rows, in file order, a window of whole pages at a time, and writes each
// window straight to the scratch file. A window covers file bytes with no whole page between
// them that no piece holds, so it writes only pages of the weights' own extents.
Status WriteRows(std::vector<PendingRows>& pending, const MemoryTiers& tiers) {
  if (pending.empty()) return Status::Ok();
  std::sort(pending.begin(), pending.end(), [](const PendingRows& a, const PendingRows& b) {
    return a.file_offset < b.file_offset;
  });
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer window, AlignedBuffer::Allocate(kWindowBytes));
  uint64_t lo = 0, end = 0;  // file bytes [lo, end) are made in the window; empty when equal
  const auto flush = [&]() {
    const Status s =
        tiers.TransferExtent(IoOp::kWrite, DiskExtent{lo, end - lo}, window.data());
    lo = end;
    return s;
  };
  for (const PendingRows& p : pending) {
    for (uint64_t done = 0; done < p.bytes;) {
      const uint64_t at = p.file_offset + done;
      const uint64_t page = at / kDirectIoAlignment * kDirectIoAlignment;
      if (at >= lo + kWindowBytes || page > AlignUp(end)) {
        if (end > lo) STRATA_RETURN_IF_ERROR(flush());
        lo = end = page;
      }
      const uint64_t n = std::min(p.bytes - done, lo + kWindowBytes - at);
      p.make(done, n, window.data() + (at - lo));
      end = at + n;
      done += n;
    }
  }
  return flush();
}

}  // namespace

Status CopyWeightsHome(const Model& model, const WeightPlacement& weights,
                       const MemoryTiers& tiers, Backend& device, const WeightQ4PlanesOf& q4) {
  DeviceUploads uploads(device);
  std::vector<PendingRows> disk;
  uint64_t copied_bytes = 0;
  for (const PlacedLayer& layer : weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      if (t.tied) continue;  // the input layer's tensor, already home
      const int64_t disk_first = t.gpu_rows + t.cpu_rows;
      const bool to_scratch = t.disk_rows > 0 && !t.disk_in_store;
      if (t.q4) {
        STRATA_CHECK(q4 != nullptr);
        const Q4Planes planes = q4(t.source);
        if (t.gpu_rows > 0) {
          STRATA_RETURN_IF_ERROR(uploads.Upload(
              tiers.Device(t.gpu_home), [&t, planes](uint64_t offset, uint64_t n, uint8_t* dst) {
                Q4ChunkBytes(t, planes, 0, t.gpu_rows, offset, n, dst);
              }));
        }
        if (t.cpu_rows > 0) {
          Q4ChunkBytes(t, planes, t.gpu_rows, t.cpu_rows, 0, t.cpu_home.bytes,
                       tiers.At(t.cpu_home));
        }
        if (to_scratch) {
          disk.push_back({t.disk_home.offset, t.disk_home.bytes,
                          [&t, planes, disk_first](uint64_t offset, uint64_t n, uint8_t* dst) {
                            Q4ChunkBytes(t, planes, disk_first, t.disk_rows, offset, n, dst);
                          }});
        }
      } else {
        const auto row = [&t](int64_t r) { return static_cast<uint64_t>(r * t.row_bytes); };
        if (t.gpu_rows > 0) {
          STRATA_RETURN_IF_ERROR(uploads.Upload(
              tiers.Device(t.gpu_home), [&model, &t](uint64_t offset, uint64_t n, uint8_t* dst) {
                model.ReadTensorBytes(t.source, offset, n, dst);
              }));
        }
        if (t.cpu_rows > 0) {
          model.ReadTensorBytes(t.source, row(t.gpu_rows), t.cpu_home.bytes, tiers.At(t.cpu_home));
        }
        if (to_scratch) {
          disk.push_back({t.disk_home.offset, t.disk_home.bytes,
                          [&model, &t, first = row(disk_first)](uint64_t offset, uint64_t n,
                                                                uint8_t* dst) {
                            model.ReadTensorBytes(t.source, first + offset, n, dst);
                          }});
        }
      }
      if (to_scratch) copied_bytes += t.disk_home.bytes;
    }
  }
  LogDiskWeights(model, weights, copied_bytes);
  return WriteRows(disk, tiers).WithContext("writing weights to the offload directory");
}

}  // namespace strata
