#include "src/memory/weight_placement.h"

#include <algorithm>
#include <utility>

#include "src/core/check.h"

namespace strata {
namespace {

// Alignment of homes and slot offsets in the GPU and CPU arenas, and of disk extents (O_DIRECT).
constexpr uint64_t kArenaAlignment = 64;
constexpr uint64_t kDiskAlignment = 4096;

PlacedTensor Tensor(std::string name, const TensorView& view) {
  PlacedTensor t;
  t.name = std::move(name);
  t.source = view;
  if (view.dtype == DType::kQ4) {
    t.row_bytes = Q4RowBytes(view.dim(1), static_cast<const Q4Planes*>(view.data)->group);
  } else if (view.shape.size() == 2) {
    t.row_bytes = view.dim(1) * static_cast<int64_t>(DTypeBytes(view.dtype));
  } else {
    t.row_bytes = static_cast<int64_t>(view.bytes());
  }
  return t;
}

std::vector<PlacedTensor> BlockTensors(const ModelConfig& c, const LayerWeights& w) {
  std::vector<std::pair<std::string, BlockField>> fields = {
      {"attention_norm.weight", &LayerWeights::attn_norm},
      {"attention_norm.bias", &LayerWeights::attn_norm_bias},
      {"q_proj.weight", &LayerWeights::wq},
      {"q_proj.bias", &LayerWeights::bq},
      {"q_norm.weight", &LayerWeights::q_norm},
      {"k_proj.weight", &LayerWeights::wk},
      {"k_proj.bias", &LayerWeights::bk},
      {"k_norm.weight", &LayerWeights::k_norm},
      {"v_proj.weight", &LayerWeights::wv},
      {"v_proj.bias", &LayerWeights::bv},
      {"o_proj.weight", &LayerWeights::wo},
      {"o_proj.bias", &LayerWeights::bo},
      {"mlp_norm.weight", &LayerWeights::mlp_norm},
      {"mlp_norm.bias", &LayerWeights::mlp_norm_bias}};
  if (c.gated_mlp) {
    fields.insert(fields.end(), {{"gate_proj.weight", &LayerWeights::w_gate},
                                 {"gate_proj.bias", &LayerWeights::b_gate},
                                 {"up_proj.weight", &LayerWeights::w_up},
                                 {"up_proj.bias", &LayerWeights::b_up},
                                 {"down_proj.weight", &LayerWeights::w_down},
                                 {"down_proj.bias", &LayerWeights::b_down}});
  } else {
    fields.insert(fields.end(), {{"fc1.weight", &LayerWeights::w_up},
                                 {"fc1.bias", &LayerWeights::b_up},
                                 {"fc2.weight", &LayerWeights::w_down},
                                 {"fc2.bias", &LayerWeights::b_down}});
  }
  std::vector<PlacedTensor> out;
  int part = 0;
  for (const auto& [name, field] : fields) {
    if (field == &LayerWeights::mlp_norm) part = 1;  // the MLP's tensors follow its norm
    if (!(w.*field).present()) continue;
    out.push_back(Tensor(name, w.*field));
    out.back().block_field = field;
    out.back().part = part;
  }
  return out;
}

bool TiedOutput(const ModelWeights& w) {
  return w.lm_head.present() && w.lm_head.data == w.token_embedding.data;
}

// The placed layers before row splitting: input, blocks, output.
std::vector<PlacedLayer> Layers(const Model& model) {
  const ModelWeights& w = model.weights();
  std::vector<PlacedLayer> layers;
  PlacedLayer input{LayerKind::kInputEmbedding, -1, {}, {}, {}};
  input.tensors.push_back(Tensor("embed_tokens", w.token_embedding));
  input.tensors.back().model_field = &ModelWeights::token_embedding;
  if (w.position_embedding.present()) {
    input.tensors.push_back(Tensor("embed_positions", w.position_embedding));
    input.tensors.back().model_field = &ModelWeights::position_embedding;
  }
  layers.push_back(std::move(input));
  for (size_t b = 0; b < w.layers.size(); ++b) {
    layers.push_back({LayerKind::kTransformer, static_cast<int>(b),
                      BlockTensors(model.config(), w.layers[b]), {}, {}});
  }
  PlacedLayer output{LayerKind::kOutput, -1, {}, {}, {}};
  for (const auto& [name, field] : {std::pair{"final_norm.weight", &ModelWeights::final_norm},
                                    std::pair{"final_norm.bias", &ModelWeights::final_norm_bias}}) {
    if (!(w.*field).present()) continue;
    output.tensors.push_back(Tensor(name, w.*field));
    output.tensors.back().model_field = field;
  }
  if (!TiedOutput(w)) {
    output.tensors.push_back(Tensor("lm_head", w.lm_head));
    output.tensors.back().model_field = &ModelWeights::lm_head;
  }
  layers.push_back(std::move(output));
  return layers;
}

WeightTensor AsWeightTensor(const PlacedTensor& t) {
  const bool matrix = t.source.shape.size() == 2;
  return {t.name, matrix ? t.source.dim(0) : 1, matrix ? t.source.dim(1) : t.row_bytes, matrix};
}

WeightLayer AsWeightLayer(const PlacedLayer& layer) {
  WeightLayer wl{layer.kind, 1, {}};
  for (const PlacedTensor& t : layer.tensors) {
    WeightTensor w = AsWeightTensor(t);
    w.cols = t.row_bytes;
    wl.tensors.push_back(std::move(w));
  }
  return wl;
}

// Stores the layer's tensors 4-bit, in groups of `group`, where policy does.
void CompressLayer(PlacedLayer& layer, int group) {
  for (PlacedTensor& t : layer.tensors) {
    WeightTensor w = AsWeightTensor(t);
    w.q4_group = group;
    if (!StoredQ4(w, true)) continue;
    t.q4 = true;
    t.q4_group = group;
    t.row_bytes = Q4RowBytes(w.cols, group);
  }
}

void AssignExpanded(PlacedLayer& layer, PlacedTensor& t, int element_bytes) {
  if (!t.q4) return;
  uint64_t& end = layer.expanded_bytes[t.part];
  const uint64_t offset = (end + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  t.expanded_offset = static_cast<int64_t>(offset);
  end = offset + static_cast<uint64_t>(t.source.dim(0) * t.source.dim(1)) * element_bytes;
}

std::string LayerName(const PlacedLayer& layer) {
  if (layer.kind == LayerKind::kTransformer) return "block" + std::to_string(layer.block);
  return layer.kind == LayerKind::kInputEmbedding ? "input" : "output";
}

void AssignSlot(PlacedLayer& layer, PlacedTensor& t) {
  if (t.on_gpu()) return;
  uint64_t& end = layer.part_bytes[t.part];
  const uint64_t offset = (end + kArenaAlignment - 1) / kArenaAlignment * kArenaAlignment;
  t.slot_offset = static_cast<int64_t>(offset);
  end = offset + static_cast<uint64_t>(t.rows() * t.row_bytes);
}

// Points t's disk rows at the store's own bytes when it has them: a raw tensor's rows, or a
// 4-bit store tensor's rows of codes and of params. False (the scratch file holds them) for
// other sources and for tensors quantized at load.
bool PlaceInStore(const Model& model, PlacedTensor& t) {
  const int64_t first = t.gpu_rows + t.cpu_rows;
  if (t.q4) {
    if (t.source.dtype != DType::kQ4) return false;
    const auto* planes = static_cast<const Q4Planes*>(t.source.data);
    const int64_t code_row = t.source.dim(1) / 2, param_row = t.row_bytes - code_row;
    t.disk_home = {static_cast<uint64_t>(model.StoreOffsetOf(planes->codes) + first * code_row),
                   static_cast<uint64_t>(t.disk_rows * code_row)};
    t.disk_store_params = {
        static_cast<uint64_t>(model.StoreOffsetOf(planes->params) + first * param_row),
        static_cast<uint64_t>(t.disk_rows * param_row)};
  } else {
    const int64_t in_store = model.StoreOffsetOf(t.source.data);
    if (in_store < 0) return false;
    t.disk_home = {static_cast<uint64_t>(in_store + first * t.row_bytes),
                   static_cast<uint64_t>(t.disk_rows * t.row_bytes)};
  }
  t.disk_in_store = true;
  return true;
}

}  // namespace

std::vector<WeightLayer> ModelWeightLayers(const Model& model) {
  std::vector<WeightLayer> out;
  const std::vector<PlacedLayer> layers = Layers(model);
  out.push_back(AsWeightLayer(layers.front()));
  WeightLayer block = AsWeightLayer(layers[1]);
  block.count = static_cast<int>(layers.size()) - 2;
  out.push_back(std::move(block));
  out.push_back(AsWeightLayer(layers.back()));
  return out;
}

WeightPlacement PlaceWeights(const Model& model, const Plan& plan, TierLayout& layout,
                             int expanded_element_bytes) {
  WeightPlacement out;
  out.layers = Layers(model);
  for (PlacedLayer& layer : out.layers) {
    if (plan.compress_weight) CompressLayer(layer, model.q4_group());
    // One byte per "column": row bytes are exact whatever each tensor's dtype.
    const LayerPlacement split = PlaceLayerByRows(AsWeightLayer(layer), plan.weight_gpu_percent,
                                                  plan.weight_cpu_percent, false, 1);
    const std::string prefix = LayerName(layer) + ".";
    int64_t disk_bytes = 0;
    for (size_t i = 0; i < layer.tensors.size(); ++i) {
      PlacedTensor& t = layer.tensors[i];
      const TensorPlacement& p = split.tensors[i];
      STRATA_CHECK(p.row_bytes == t.row_bytes);
      t.gpu_rows = p.gpu_rows;
      t.cpu_rows = p.cpu_rows;
      t.disk_rows = p.disk_rows;
      if (t.gpu_rows > 0) {
        t.gpu_home = layout.Reserve<Tier::kGpu>(MemoryUse::kWeights, prefix + t.name,
                                                static_cast<uint64_t>(t.gpu_rows * t.row_bytes),
                                                kArenaAlignment);
      }
      if (t.cpu_rows > 0) {
        t.cpu_home = layout.Reserve<Tier::kCpu>(MemoryUse::kWeights, prefix + t.name,
                                                static_cast<uint64_t>(t.cpu_rows * t.row_bytes),
                                                kArenaAlignment);
      }
      disk_bytes += t.disk_rows * t.row_bytes;
      AssignSlot(layer, t);
      AssignExpanded(layer, t, expanded_element_bytes);
    }
    layer.home_bytes = {split.gpu_bytes, split.cpu_bytes, split.disk_bytes};
    uint64_t store_bytes = 0;
    for (PlacedTensor& t : layer.tensors) {
      if (t.disk_rows == 0 || !PlaceInStore(model, t)) continue;
      const uint64_t bytes = static_cast<uint64_t>(t.disk_rows * t.row_bytes);
      store_bytes += bytes;
      disk_bytes -= static_cast<int64_t>(bytes);
    }
    if (store_bytes > 0) {
      out.weight_file = model.store_data_path();
      out.store_disk_bytes += store_bytes;
      out.largest_store_read = std::max(out.largest_store_read, store_bytes);
    }
    if (disk_bytes > 0) {
      // The layer's disk rows back to back: one aligned extent, read in large requests.
      const DiskExtent disk = layout.Reserve<Tier::kDisk>(
          MemoryUse::kWeights, prefix + "disk", static_cast<uint64_t>(disk_bytes), kDiskAlignment);
      uint64_t offset = disk.offset;
      for (PlacedTensor& t : layer.tensors) {
        if (t.disk_in_store) continue;
        const uint64_t bytes = static_cast<uint64_t>(t.disk_rows * t.row_bytes);
        if (bytes > 0) t.disk_home = {offset, bytes};
        offset += bytes;
      }
    }
    out.home_bytes += layer.home_bytes;
  }
  if (TiedOutput(model.weights())) {
    PlacedTensor tied = out.layers.front().tensors.front();
    tied.tied = true;
    tied.model_field = &ModelWeights::lm_head;
    tied.slot_offset = -1;
    tied.expanded_offset = -1;
    PlacedLayer& output = out.layers.back();
    AssignSlot(output, tied);
    AssignExpanded(output, tied, expanded_element_bytes);
    output.tensors.push_back(std::move(tied));
  }
  for (const PlacedLayer& layer : out.layers) {
    out.slot_bytes = std::max(out.slot_bytes, layer.slot_bytes());
    out.expanded_bytes =
        std::max({out.expanded_bytes, layer.expanded_bytes[0], layer.expanded_bytes[1]});
  }
  return out;
}

}  // namespace strata
