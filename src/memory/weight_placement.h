// Weight placement: every weight tensor of a Model split by rows over the tiers exactly as the
// plan's accounting splits it (policy/weight_layout.h: a scheduling layer's tensors laid end to
// end, the GPU taking the prefix nearest its percent of the bytes, then the CPU, then disk), so
// each tier's share is within half a row of the plan's and equal to its figures byte for byte.
//
// A tensor with any row off the GPU is assembled whole in a weight slot before the scheduling
// layer that uses it computes (a block's attention tensors, then its MLP tensors, in turn): its
// GPU rows are copied there from their home (device to device) and the rest loaded, so the
// backend sees one contiguous tensor and the math is unchanged.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "policy/plan.h"
#include "policy/weight_layout.h"
#include "src/memory/tier_layout.h"
#include "src/model/model.h"

namespace strata {

using BlockField = TensorView LayerWeights::*;
using ModelField = TensorView ModelWeights::*;

struct PlacedTensor {
  std::string name;          // as policy/weight_layout.h names it, e.g. "q_proj.weight"
  TensorView source;         // the model's tensor; its data is copied to the homes at setup
  BlockField block_field = nullptr;  // its place in a LayerWeights (transformer layers), or
  ModelField model_field = nullptr;  // in ModelWeights (input and output layers)
  int64_t row_bytes = 0;     // a 1-D tensor is one row
  int64_t gpu_rows = 0;      // rows [0, gpu_rows) on the GPU,
  int64_t cpu_rows = 0;      // the next cpu_rows in pinned CPU memory,
  int64_t disk_rows = 0;     // the rest on disk
  // Each tier's rows: bytes == rows * row_bytes (0 when no rows there).
  GpuExtent gpu_home;
  CpuExtent cpu_home;
  DiskExtent disk_home;
  // The disk rows are the store's own bytes (Model::StoreOffsetOf): disk_home is an extent of
  // WeightPlacement::weight_file, read in place, not of the scratch file (no 4 KiB alignment).
  // For a 4-bit tensor of a 4-bit store, disk_home is then the rows' codes and
  // disk_store_params their params, read back to back into the slot's disk chunk.
  bool disk_in_store = false;
  DiskExtent disk_store_params;
  int part = 0;              // a block's attention (0) or MLP (1) scheduling layer uses it
  int64_t slot_offset = -1;  // where it is assembled in a weight slot; -1: wholly on the GPU
  bool tied = false;         // the output layer's view of the input layer's token embedding
  // 4-bit (plan.compress_weight and policy's StoredQ4): row_bytes is Q4RowBytes(cols, q4_group)
  // (the model's Model::q4_group()), and each tier's home holds its rows as codes
  // [rows, cols / 2] then params [rows, cols / q4_group, 2] fp16, so a weight slot holds up to
  // three such chunks (GPU rows, CPU rows, disk rows) back to back. Compute expands them once per
  // scheduling layer, to the activations' type, at expanded_offset of the placement's
  // expanded-weights buffer.
  bool q4 = false;
  int q4_group = 64;
  int64_t expanded_offset = -1;

  int64_t rows() const { return gpu_rows + cpu_rows + disk_rows; }
  bool on_gpu() const { return cpu_rows + disk_rows == 0; }
};

// One scheduling layer's weights: the input embedding, one transformer block (shared by its
// attention and MLP scheduling layers), or the output layer.
struct PlacedLayer {
  LayerKind kind = LayerKind::kTransformer;
  int block = -1;  // transformer block index, -1 for the input and output layers
  std::vector<PlacedTensor> tensors;  // policy's order; a tied lm_head comes last
  TierBytes home_bytes;               // homes of its own tensors (a tied view adds nothing)
  uint64_t part_bytes[2] = {};        // bytes of a weight slot each part fills (a block's
                                      // attention and MLP layers are assembled in turn)
  uint64_t slot_bytes() const { return std::max(part_bytes[0], part_bytes[1]); }
  uint64_t expanded_bytes[2] = {};  // bytes of each part's 4-bit tensors, expanded
};

struct WeightPlacement {
  std::vector<PlacedLayer> layers;  // input, block 0 .. L-1, output
  uint64_t slot_bytes = 0;          // the largest part of any layer: one weight slot
  uint64_t expanded_bytes = 0;      // the largest expanded part of any layer (4-bit weights)
  TierBytes home_bytes;             // all homes; disk: scratch and in-store rows alike
  std::string weight_file;          // the store's tensors.bin when any disk row is read in place
  uint64_t store_disk_bytes = 0;    // disk rows read in place: in home_bytes, not in the layout
  uint64_t largest_store_read = 0;  // the most in-place disk bytes one layer reads at once

  const PlacedLayer& input() const { return layers.front(); }
  const PlacedLayer& block(int b) const { return layers[static_cast<size_t>(b) + 1]; }
  const PlacedLayer& output() const { return layers.back(); }
};

// The model's tensors as the accounting lists them (BuildWeightLayers' names and order, absent
// tensors skipped; a tied output projection is not a tensor of the output layer), each layer as
// policy's WeightLayer with one byte per "column" so that row bytes are exact for any dtype.
std::vector<WeightLayer> ModelWeightLayers(const Model& model);

// Places the weights by `plan`'s weight percents (4-bit where plan.compress_weight and policy's
// StoredQ4 say so), reserving their homes in `layout` (GPU and
// CPU homes per tensor; disk rows of a layer back to back in one 4 KiB-aligned extent of the
// scratch file). Disk rows of a tensor that is a strata store's own bytes stay in the store:
// their home is its extent of tensors.bin, and the layout reserves nothing for them. 4-bit
// tensors expand to elements of `expanded_element_bytes` (the activations' type).
WeightPlacement PlaceWeights(const Model& model, const Plan& plan, TierLayout& layout,
                             int expanded_element_bytes = 4);

}  // namespace strata
