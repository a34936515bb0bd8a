#include "src/memory/weight_homes.h"

#include <cstring>
#include <vector>

namespace strata {
namespace {

// Bytes of the disk bounce buffer used while writing weights home.
constexpr size_t kWriteRingBytes = size_t{16} << 20;

const uint8_t* RowsOf(const PlacedTensor& t, int64_t first_row) {
  return static_cast<const uint8_t*>(t.source.data) + first_row * t.row_bytes;
}

}  // namespace

Status CopyWeightsHome(const WeightPlacement& weights, const MemoryTiers& tiers) {
  std::vector<DiskPiece> disk;
  for (const PlacedLayer& layer : weights.layers) {
    for (const PlacedTensor& t : layer.tensors) {
      if (t.tied) continue;  // the input layer's tensor, already home
      if (t.gpu_rows > 0) std::memcpy(tiers.At(t.gpu_home), RowsOf(t, 0), t.gpu_home.bytes);
      if (t.cpu_rows > 0) std::memcpy(tiers.At(t.cpu_home), RowsOf(t, t.gpu_rows), t.cpu_home.bytes);
      if (t.disk_rows > 0) {
        // WriteDisk only reads the pieces' memory.
        disk.push_back({t.disk_home.offset,
                        const_cast<uint8_t*>(RowsOf(t, t.gpu_rows + t.cpu_rows)),
                        t.disk_home.bytes});
      }
    }
  }
  if (disk.empty()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(AlignedBuffer ring, AlignedBuffer::Allocate(kWriteRingBytes));
  return tiers.WriteDisk(disk, ring.span()).WithContext("writing weights to the offload directory");
}

}  // namespace strata
