// The weight tensors of a model as the executor schedules them, and their byte-exact split over
// tiers by rows (FlexGen instead maps each whole tensor's midpoint onto the percents, so its GPU
// share can be far from what the user asked: ../shared/docs/ANCHORS.md, weakness 1).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "policy/model_spec.h"
#include "src/core/dtype.h"

namespace strata {

// The scheduling layers: the input embedding, num_layers identical transformer layers, and the
// output layer (final norm and, unless tied, the output projection).
enum class LayerKind { kInputEmbedding, kTransformer, kOutput };

// One stored tensor: a matrix of `rows` x `cols` elements in PyTorch's [out, in] layout, or a
// vector (rows == 1, matrix == false). Matrices split between rows and may be stored 4-bit, in
// groups of q4_group (the model's); vectors never split and stay in the weight dtype.
struct WeightTensor {
  std::string name;
  int64_t rows = 0;
  int64_t cols = 0;
  bool matrix = true;
  int q4_group = 64;
};

struct WeightLayer {
  LayerKind kind = LayerKind::kTransformer;
  int count = 1;  // identical layers of this kind
  std::vector<WeightTensor> tensors;
};

// Input embedding, transformer layer (count = num_layers), output layer, in that order.
std::vector<WeightLayer> BuildWeightLayers(const ModelSpec& model);

// Bytes of one 4-bit group-wise row of `cols` elements in groups of `group`: each group stored as
// group/2 bytes of codes plus an fp16 scale and an fp16 minimum (4.5 bits per element in groups of
// 64, 5 in groups of 32). REQUIRES: cols a multiple of group.
int64_t Q4RowBytes(int64_t cols, int group);
// Whether `t` is stored 4-bit under `compress`: matrices whose cols are a multiple of its group
// (as kernels/cpu/weight_q4.h); other matrices and all vectors stay in the weight dtype.
bool StoredQ4(const WeightTensor& t, bool compress);
// Bytes of one row as stored: 4-bit when StoredQ4.
int64_t StoredRowBytes(const WeightTensor& t, bool compress, int dtype_bytes);
// Elements of the layer's matrices (the GEMM parameter count) and bytes of a layer as stored.
int64_t MatrixElements(const WeightLayer& layer);
int64_t StoredLayerBytes(const WeightLayer& layer, bool compress, int dtype_bytes);

// Rows of one tensor on each tier: rows [0, gpu_rows) on the GPU, the next cpu_rows on the CPU,
// the remaining disk_rows on disk.
struct TensorPlacement {
  std::string name;
  int64_t row_bytes = 0;
  int64_t gpu_rows = 0;
  int64_t cpu_rows = 0;
  int64_t disk_rows = 0;
};

struct LayerPlacement {
  LayerKind kind = LayerKind::kTransformer;
  int count = 1;  // each of the `count` identical layers is placed this way
  std::vector<TensorPlacement> tensors;
  int64_t gpu_bytes = 0;  // per layer
  int64_t cpu_bytes = 0;
  int64_t disk_bytes = 0;
};

// Splits one layer by rows: its tensors are laid end to end as one sequence of rows; the GPU takes
// the prefix that ends at the row boundary nearest to gpu_percent of the layer's bytes, the CPU
// the next part up to the boundary nearest to gpu_percent + cpu_percent, disk the rest. Each
// tier's bytes are within half of the largest row of the requested share and the three add up to
// the layer's bytes exactly. REQUIRES: percents in [0, 100] with gpu + cpu <= 100.
LayerPlacement PlaceLayerByRows(const WeightLayer& layer, int gpu_percent, int cpu_percent,
                                bool compress, int dtype_bytes);

// A layer's tensors as PlaceLayerByRows lays them end to end: rows and stored bytes per row of
// each, and the layer's bytes.
struct LayerRows {
  std::vector<int64_t> rows, row_bytes;
  int64_t total = 0;
};
LayerRows RowsOf(const WeightLayer& layer, bool compress, int dtype_bytes);
// The GPU bytes of the tensor (at most one) that PlaceLayerByRows splits between the GPU and
// another tier at gpu_percent: the executor copies them into the layer's weight slot.
int64_t SplitGpuBytes(const LayerRows& rows, int gpu_percent);

}  // namespace strata
