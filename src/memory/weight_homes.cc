#include "src/memory/weight_homes.h"

#include <atomic>
#include <cstring>
#include <vector>

#include "policy/memory_accounting.h"
#include "policy/weight_layout.h"
#include "src/core/check.h"
#include "src/core/log.h"

namespace strata {
namespace {

// Bytes of the disk bounce buffer used while writing weights home.
constexpr size_t kWriteRingBytes = size_t{16} << 20;

const uint8_t* RowsOf(const PlacedTensor& t, int64_t first_row) {
  return static_cast<const uint8_t*>(t.source.data) + first_row * t.row_bytes;
}

// One line saying where the disk weights are read from, and why when they are copied; once per
// process for each path (a job re-places for longer prompts with the same answer).
void LogDiskWeights(const WeightPlacement& weights, uint64_t copied_bytes) {
  static std::atomic<bool> logged_store{false}, logged_copy{false};
  if (weights.store_disk_bytes > 0 && !logged_store.exchange(true)) {
    LogInfo("disk weights: " + FormatBytes(static_cast<int64_t>(weights.store_disk_bytes)) +
            " read in place from " + weights.weight_file);
  }
  if (copied_bytes > 0 && !logged_copy.exchange(true)) {
    LogInfo("disk weights: " + FormatBytes(static_cast<int64_t>(copied_bytes)) +
            " copied to the scratch file, as their bytes in memory are not a strata store's "
            "(converted in memory, or quantized to 4 bits at load); `strata convert` the model "
            "(with --compress-weight for 4-bit weights) to read them in place");
  }
}

// Rows [first, first + rows) of a 4-bit tensor as one chunk: their codes, then their params.
void Q4Chunk(const PlacedTensor& t, const Q4Planes& planes, int64_t first, int64_t rows,
             uint8_t* dst) {
  const int64_t cols = t.source.dim(1);
  const size_t code_row = static_cast<size_t>(cols / 2);
  const size_t param_row = static_cast<size_t>(cols / planes.group * 2) * sizeof(uint16_t);
  std::memcpy(dst, planes.codes + static_cast<size_t>(first) * code_row,
              static_cast<size_t>(rows) * code_row);
  const auto* params = reinterpret_cast<const uint8_t*>(planes.params);
  std::memcpy(dst + static_cast<size_t>(rows) * code_row,
              params + static_cast<size_t>(first) * param_row,
              static_cast<size_t>(rows) * param_row);
}

}  // namespace

Status CopyWeightsHome(const WeightPlacement& weights, const MemoryTiers& tiers,
                       const WeightQ4PlanesOf& q4) {
  std::vector<DiskPiece> disk;
  std::vector<std::vector<uint8_t>> q4_disk;  // 4-bit disk chunks until they are written
  uint64_t copied_bytes = 0;
  for (const PlacedLayer& layer : weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      if (t.tied) continue;  // the input layer's tensor, already home
      if (t.q4) {
        STRATA_CHECK(q4 != nullptr);
        const Q4Planes planes = q4(t.source);
        if (t.gpu_rows > 0) Q4Chunk(t, planes, 0, t.gpu_rows, tiers.At(t.gpu_home));
        if (t.cpu_rows > 0) Q4Chunk(t, planes, t.gpu_rows, t.cpu_rows, tiers.At(t.cpu_home));
        if (t.disk_rows > 0 && !t.disk_in_store) {
          std::vector<uint8_t>& chunk = q4_disk.emplace_back(t.disk_home.bytes);
          Q4Chunk(t, planes, t.gpu_rows + t.cpu_rows, t.disk_rows, chunk.data());
          copied_bytes += t.disk_home.bytes;
          disk.push_back({t.disk_home.offset, chunk.data(), t.disk_home.bytes});
        }
        continue;
      }
      if (t.gpu_rows > 0) std::memcpy(tiers.At(t.gpu_home), RowsOf(t, 0), t.gpu_home.bytes);
      if (t.cpu_rows > 0) std::memcpy(tiers.At(t.cpu_home), RowsOf(t, t.gpu_rows), t.cpu_home.bytes);
      if (t.disk_rows > 0 && !t.disk_in_store) {
        copied_bytes += t.disk_home.bytes;
        // WriteDisk only reads the pieces' memory.
        disk.push_back({t.disk_home.offset,
                        const_cast<uint8_t*>(RowsOf(t, t.gpu_rows + t.cpu_rows)),
                        t.disk_home.bytes});
      }
    }
  }
  LogDiskWeights(weights, copied_bytes);
  if (disk.empty()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer ring, AlignedBuffer::Allocate(kWriteRingBytes));
  return tiers.WriteDisk(disk, ring.span()).WithContext("writing weights to the offload directory");
}

}  // namespace strata
