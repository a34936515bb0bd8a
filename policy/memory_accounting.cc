#include "policy/memory_accounting.h"

#include <algorithm>
#include <cstdio>

namespace strata {
namespace {

// Rows of `rows` on GPU, CPU and disk for whole percents, rounded cumulatively so that each tier
// is within one row of its share and the three add up to `rows`.
RowSplit SplitRows(int64_t copies, int64_t rows, int64_t row_bytes, int gpu_percent,
                   int cpu_percent) {
  const int64_t gpu = (rows * gpu_percent + 50) / 100;
  const int64_t gpu_cpu = (rows * (gpu_percent + cpu_percent) + 50) / 100;
  return {copies, rows, row_bytes, gpu, gpu_cpu - gpu, rows - gpu_cpu};
}

// Sizes that do not depend on the placement percents.
struct Shape {
  int64_t gbs, nb, prompt, max_len, hidden, heads, kv_heads, head_dim, act_bytes;
  int64_t kv_head_token_bytes;  // K and V, as stored
  int64_t kv_rows;              // per (layer, micro-batch) slice
  int64_t kv_row_bytes;         // K and V of max_len tokens
  int64_t kv_copies;
  int64_t act_rows;  // per micro-batch
  int64_t act_row_bytes;
  int64_t transformer_workspace_bytes;
  int64_t logits_bytes;
  int64_t last_hidden_bytes;
  int64_t expanded_weight_bytes;  // the largest compute layer's 4-bit weights as activations
  int64_t kv_prefill_bytes;       // 4-bit cache: a sequence's prompt keys and values
  int64_t kv_smoothing_bytes;     // smoothed keys: fp32 mean and scale per (layer, sequence,
                                  // KV head) of the block
  int64_t kv_exact_bytes;         // exact tokens: fp32 keys and values of the sink and window of
                                  // every (layer, sequence, KV head) of the block
  int64_t cpu_attention_workspace_bytes;  // one of the two buffers
};

Shape ShapeOf(const ModelSpec& m, const Workload& w, const Plan& p,
              const std::vector<WeightLayer>& layers) {
  Shape s{};
  s.gbs = p.gpu_batch_size;
  s.nb = p.num_gpu_batches;
  s.prompt = w.prompt_len;
  s.max_len = w.max_len();
  s.hidden = m.hidden_size;
  s.heads = m.num_heads;
  s.kv_heads = m.num_kv_heads;
  s.head_dim = m.head_dim;
  s.act_bytes = m.activation_dtype_bytes;
  s.kv_head_token_bytes = KvHeadTokenBytes(m, p);
  s.kv_rows = s.gbs * s.kv_heads;
  s.kv_row_bytes = s.max_len * s.kv_head_token_bytes;
  s.kv_copies = int64_t{m.num_layers} * s.nb;
  s.act_rows = s.gbs * s.prompt;
  s.act_row_bytes = s.hidden * s.act_bytes;

  // The Transformer's buffers (src/runtime/transformer.h), each sized for the most rows it sees
  // (a micro-batch's prefill) and all kept at once: normed, q, k, v, attn, proj, up and gate.
  const int64_t f = int64_t{m.intermediate_size} * (m.gated_mlp ? 2 : 1);
  const int64_t per_row = 2 * s.hidden + 2 * s.heads * s.head_dim + 2 * s.kv_heads * s.head_dim + f;
  s.transformer_workspace_bytes = s.gbs * s.prompt * per_row * s.act_bytes;
  s.logits_bytes = s.gbs * m.vocab_size * 4;  // fp32, last position only
  s.last_hidden_bytes = s.gbs * s.hidden * s.act_bytes;

  if (p.compress_weight) {
    // The executor expands a scheduling layer's 4-bit matrices to the activations' type (the
    // input layer's embeddings, a block's attention or MLP matrices, the output projection).
    int64_t largest = std::max(MatrixElements(layers[0]), MatrixElements(layers[1]));
    const int64_t lm_head = int64_t{m.vocab_size} * m.hidden_size;
    largest = std::max(largest, m.tie_word_embeddings ? lm_head : MatrixElements(layers[2]));
    s.expanded_weight_bytes = largest * s.act_bytes;
  }
  if (p.compress_cache) s.kv_prefill_bytes = 2 * s.kv_heads * s.prompt * s.head_dim * s.act_bytes;
  if (p.smooth_keys()) {
    s.kv_smoothing_bytes = 2 * int64_t{m.num_layers} * s.gbs * s.nb * s.kv_heads * s.head_dim * 4;
  }
  if (p.exact_tokens()) {
    s.kv_exact_bytes = 2 * int64_t{m.num_layers} * s.gbs * s.nb * s.kv_heads *
                       (p.cache_sink + p.cache_window) * s.head_dim * 4;
  }
  // Queries and outputs, then keys and values, of one micro-batch's decode step.
  s.cpu_attention_workspace_bytes = 2 * s.gbs * (s.heads + s.kv_heads) * s.head_dim * s.act_bytes;
  return s;
}

// The bytes of one weight staging slot: for each unit assembled in turn (the input layer, a
// block's attention tensors — those before its MLP norm —, its MLP tensors, the output layer
// with a tied embedding last) the whole tensors with an off-GPU row, at 64-byte offsets; the
// largest unit. As src/memory/weight_placement.cc lays them out.
int64_t WeightSlotBytes(const ModelSpec& m, const std::vector<LayerPlacement>& placed) {
  int64_t largest = 0;
  auto whole = [](const TensorPlacement& t) {
    return (t.gpu_rows + t.cpu_rows + t.disk_rows) * t.row_bytes;
  };
  auto off_gpu = [](const TensorPlacement& t) { return t.cpu_rows + t.disk_rows > 0; };
  for (const LayerPlacement& layer : placed) {
    int64_t end[2] = {0, 0};
    int part = 0;
    for (const TensorPlacement& t : layer.tensors) {
      if (layer.kind == LayerKind::kTransformer && t.name == "mlp_norm.weight") part = 1;
      if (!off_gpu(t)) continue;
      end[part] = AlignUpTo(end[part], kLayoutArenaAlignment) + whole(t);
    }
    if (layer.kind == LayerKind::kOutput && m.tie_word_embeddings) {
      const TensorPlacement& embed = placed[0].tensors[0];
      if (off_gpu(embed)) end[0] = AlignUpTo(end[0], kLayoutArenaAlignment) + whole(embed);
    }
    largest = std::max({largest, end[0], end[1]});
  }
  return largest;
}

// The layout's padding of `count` reservations of `bytes` on `tier`.
int64_t Padding(Tier tier, int64_t bytes, int64_t count) {
  if (bytes <= 0) return 0;
  const int64_t a = tier == Tier::kDisk ? kLayoutDiskAlignment : kLayoutArenaAlignment;
  return count * (AlignUpTo(bytes, a) - bytes);
}

void AddBuffer(MemoryPlan& mem, std::string name, Tier tier, int64_t bytes, int count,
               bool staging, bool in_arena = true) {
  if (bytes <= 0) return;
  mem.buffers.push_back({std::move(name), tier, bytes, count, staging});
  TierBytes& row = staging ? mem.staging_bytes : mem.workspace_bytes;
  row.at(tier) += bytes * count;
  if (in_arena) mem.alignment_bytes.at(tier) += Padding(tier, bytes, count);
}

}  // namespace

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kGpu:
      return "GPU";
    case Tier::kCpu:
      return "CPU";
    case Tier::kDisk:
      return "disk";
  }
  return "?";
}

TierBytes& TierBytes::operator+=(const TierBytes& o) {
  gpu_bytes += o.gpu_bytes;
  cpu_bytes += o.cpu_bytes;
  disk_bytes += o.disk_bytes;
  return *this;
}

TierBytes RowSplit::bytes() const {
  return {copies * gpu_rows * row_bytes, copies * cpu_rows * row_bytes,
          copies * disk_rows * row_bytes};
}

bool KvQ4TakesHeadDim(int head_dim) {
  if (head_dim <= 0 || head_dim % 2 != 0) return false;
  return head_dim <= 64 || head_dim % 64 == 0 || head_dim == 80 || head_dim == 96;
}

std::array<int64_t, 4> KvHeadTokenPlaneBytes(int head_dim, int dtype_bytes, const Plan& plan) {
  const int64_t d = head_dim;
  if (!plan.compress_cache) {
    const int64_t fp = d * dtype_bytes;
    return {fp, 0, fp, 0};
  }
  const int64_t params = (d + 63) / 64 * 4;
  int64_t key_params = params;
  if (plan.channel_keys()) {  // above 64, halves rounded up to even: 4-byte aligned group params
    key_params =
        d > 64 ? (d + 31) / 32 * 4 : (2 * d + kChannelKeyGroup - 1) / kChannelKeyGroup * 2;
  }
  return {d / 2, key_params, d / 2, params};
}

int64_t KvHeadTokenBytes(const ModelSpec& model, const Plan& plan) {
  const std::array<int64_t, 4> planes =
      KvHeadTokenPlaneBytes(model.head_dim, model.activation_dtype_bytes, plan);
  return planes[0] + planes[1] + planes[2] + planes[3];
}

int64_t DiskRingBytes(int64_t largest_disk_extent) {
  if (largest_disk_extent <= 0) return 0;
  return 2 * std::min(kDiskRingHalfBytes,
                      AlignUpTo(largest_disk_extent, kLayoutDiskAlignment) + 2 * kLayoutDiskAlignment);
}

Result<MemoryPlan> AccountMemory(const ModelSpec& model, const Workload& workload,
                                 const Plan& plan) {
  STRATA_RETURN_IF_ERROR(model.Validate());
  STRATA_RETURN_IF_ERROR(workload.Validate(model));
  STRATA_RETURN_IF_ERROR(plan.Validate());
  if (plan.compress_cache && !KvQ4TakesHeadDim(model.head_dim)) {
    return Status::Unsupported(std::string("the 4-bit KV cache takes ") + kKvQ4HeadDims + "; " +
                               model.name + " has " + std::to_string(model.head_dim) +
                               "; run without --compress-cache");
  }
  if (plan.rotate_keys() && (model.head_dim & (model.head_dim - 1)) != 0) {
    return Status::Unsupported("rotated (and smoothed) 4-bit keys need a power-of-two head_dim; " +
                               model.name + " has " + std::to_string(model.head_dim) +
                               "; use --cache-keys channel (the default) or plain");
  }
  if (model.q4_weights && !plan.compress_weight) {
    return Status::InvalidArgument(model.name +
                                   " stores its weights in 4 bits: plan it with "
                                   "--compress-weight");
  }
  const std::vector<WeightLayer> layers = BuildWeightLayers(model);
  const Shape s = ShapeOf(model, workload, plan, layers);

  MemoryPlan mem;
  int64_t largest_disk = 0;  // the largest disk extent: one layer's, slice's or micro-batch's
  for (const WeightLayer& layer : layers) {
    mem.weight_layers.push_back(PlaceLayerByRows(layer, plan.weight_gpu_percent,
                                                 plan.weight_cpu_percent, plan.compress_weight,
                                                 model.weight_dtype_bytes));
    const LayerPlacement& p = mem.weight_layers.back();
    mem.weight_bytes +=
        TierBytes{p.count * p.gpu_bytes, p.count * p.cpu_bytes, p.count * p.disk_bytes};
    // GPU and CPU homes per tensor; a layer's disk rows in one extent.
    for (const TensorPlacement& t : p.tensors) {
      mem.alignment_bytes.gpu_bytes += Padding(Tier::kGpu, t.gpu_rows * t.row_bytes, p.count);
      mem.alignment_bytes.cpu_bytes += Padding(Tier::kCpu, t.cpu_rows * t.row_bytes, p.count);
    }
    mem.alignment_bytes.disk_bytes += Padding(Tier::kDisk, p.disk_bytes, p.count);
    largest_disk = std::max(largest_disk, p.disk_bytes);
  }
  mem.kv_cache = SplitRows(s.kv_copies, s.kv_rows, s.kv_row_bytes, plan.cache_gpu_percent,
                           plan.cache_cpu_percent);
  mem.kv_cache_bytes = mem.kv_cache.bytes();
  mem.activations = SplitRows(s.nb, s.act_rows, s.act_row_bytes, plan.activation_gpu_percent,
                              plan.activation_cpu_percent);
  mem.activation_bytes = mem.activations.bytes();
  for (const RowSplit* split : {&mem.kv_cache, &mem.activations}) {
    const int64_t rows[] = {split->gpu_rows, split->cpu_rows, split->disk_rows};
    for (Tier t : {Tier::kGpu, Tier::kCpu, Tier::kDisk}) {
      mem.alignment_bytes.at(t) +=
          Padding(t, rows[static_cast<int>(t)] * split->row_bytes, split->copies);
    }
    largest_disk = std::max(largest_disk, split->disk_rows * split->row_bytes);
  }

  // CPU, placed first: the pinned disk ring and the CPU-attention cache slots, 4 KiB-aligned.
  const int64_t kv_off_rows = mem.kv_cache.cpu_rows + mem.kv_cache.disk_rows;
  AddBuffer(mem, "disk_ring", Tier::kCpu, DiskRingBytes(largest_disk), 1, true);
  if (plan.cpu_attention) {
    AddBuffer(mem, "cpu_attention_cache", Tier::kCpu,
              AlignUpTo(mem.kv_cache.disk_rows * s.kv_row_bytes, kLayoutDiskAlignment), 2, true);
  }
  // GPU staging: double buffers for whatever a step loads from off the GPU.
  AddBuffer(mem, "weight_staging", Tier::kGpu, WeightSlotBytes(model, mem.weight_layers), 2, true);
  // With CPU attention only the prompt's new K and V leave the GPU through it; otherwise a
  // slice's whole off-GPU cache comes in for GPU attention.
  const int64_t kv_staging_row =
      plan.cpu_attention ? s.prompt * s.kv_head_token_bytes : s.kv_row_bytes;
  AddBuffer(mem, "kv_staging", Tier::kGpu, kv_off_rows * kv_staging_row, 2, true);
  if (plan.cpu_attention && kv_off_rows > 0) {
    AddBuffer(mem, "cpu_attention_workspace", Tier::kCpu, s.cpu_attention_workspace_bytes, 2,
              false);
    // The exact rows of the off-GPU cache rows, where the CPU attends them.
    AddBuffer(mem, "kv_exact_cpu", Tier::kCpu, s.kv_exact_bytes / s.kv_rows * kv_off_rows, 1,
              false);
  }
  // GPU workspace. The hidden states of the micro-batch computing live in its home when every
  // row is on the GPU, else in one of two slots the load and store lanes fill and drain.
  if (mem.activations.cpu_rows + mem.activations.disk_rows > 0) {
    AddBuffer(mem, "activation_slots", Tier::kGpu, s.act_rows * s.act_row_bytes, 2, false);
  }
  AddBuffer(mem, "logits", Tier::kGpu, s.logits_bytes, 1, false);
  AddBuffer(mem, "last_hidden", Tier::kGpu, s.last_hidden_bytes, 1, false);
  // The Transformer's own buffers are not in the arena: no padding.
  AddBuffer(mem, "transformer_workspace", Tier::kGpu, s.transformer_workspace_bytes, 1, false,
            false);
  AddBuffer(mem, "expanded_weights", Tier::kGpu, s.expanded_weight_bytes, 1, false);
  AddBuffer(mem, "kv_prefill", Tier::kGpu, s.kv_prefill_bytes, 1, false);
  AddBuffer(mem, "kv_smoothing", Tier::kGpu, s.kv_smoothing_bytes, 1, false);
  AddBuffer(mem, "kv_exact", Tier::kGpu, s.kv_exact_bytes, 1, false);

  for (const TierBytes* row : {&mem.weight_bytes, &mem.kv_cache_bytes, &mem.activation_bytes,
                               &mem.staging_bytes, &mem.workspace_bytes, &mem.alignment_bytes}) {
    mem.total_bytes += *row;
  }
  return mem;
}

LinearMemory LinearMemoryOf(const ModelSpec& model, const Workload& workload, const Plan& plan) {
  const std::vector<WeightLayer> layers = BuildWeightLayers(model);
  const Shape s = ShapeOf(model, workload, plan, layers);
  const int dtype = model.weight_dtype_bytes;
  const bool cw = plan.compress_weight;

  double weights = 0;
  for (const WeightLayer& layer : layers) {
    weights += double(layer.count) * StoredLayerBytes(layer, cw, dtype);
  }
  // The largest unit assembled in a weight slot, all of it off the GPU.
  double weight_unit = 0;
  {
    std::vector<LayerPlacement> off;
    for (const WeightLayer& layer : layers) off.push_back(PlaceLayerByRows(layer, 0, 100, cw, dtype));
    weight_unit = double(WeightSlotBytes(model, off));
  }
  const double kv = double(s.kv_copies) * s.kv_rows * s.kv_row_bytes;
  const double act = double(s.nb) * s.act_rows * s.act_row_bytes;
  const double act_slots = 2.0 * s.act_rows * s.act_row_bytes;
  const double kv_staging_row =
      plan.cpu_attention ? double(s.prompt) * s.kv_head_token_bytes : double(s.kv_row_bytes);

  LinearMemory lm;
  LinearForm& gpu = lm.gpu_bytes;
  gpu.Add(kWeightGpu, weights).Add(kCacheGpu, kv).Add(kActivationGpu, act);
  gpu.Add(kWeightCpu, 2 * weight_unit).Add(kWeightDisk, 2 * weight_unit);
  gpu.Add(kCacheCpu, 2 * s.kv_rows * kv_staging_row)
      .Add(kCacheDisk, 2 * s.kv_rows * kv_staging_row);
  gpu.Add(kActivationCpu, act_slots).Add(kActivationDisk, act_slots);
  gpu.constant = double(s.transformer_workspace_bytes) + s.logits_bytes + s.last_hidden_bytes +
                 s.expanded_weight_bytes + s.kv_prefill_bytes + s.kv_smoothing_bytes +
                 s.kv_exact_bytes;

  LinearForm& cpu = lm.cpu_bytes;
  cpu.Add(kWeightCpu, weights).Add(kCacheCpu, kv).Add(kActivationCpu, act);
  cpu.constant = double(kDiskRingBytes);
  if (plan.cpu_attention) {
    cpu.Add(kCacheDisk, 2.0 * s.kv_rows * s.kv_row_bytes);
    cpu.constant += 2.0 * s.cpu_attention_workspace_bytes;
    cpu.Add(kCacheCpu, double(s.kv_exact_bytes)).Add(kCacheDisk, double(s.kv_exact_bytes));
  }

  lm.disk_bytes.Add(kWeightDisk, weights).Add(kCacheDisk, kv).Add(kActivationDisk, act);
  return lm;
}

std::string FormatBytes(int64_t bytes) {
  char text[32];
  if (bytes >= 1000000000) {
    std::snprintf(text, sizeof(text), "%.2f GB", bytes / 1e9);
  } else if (bytes >= 1000000) {
    std::snprintf(text, sizeof(text), "%.1f MB", bytes / 1e6);
  } else {
    std::snprintf(text, sizeof(text), "%lld B", static_cast<long long>(bytes));
  }
  return text;
}

}  // namespace strata
