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
  int64_t kv_head_token_bytes;  // as stored
  int64_t kv_rows;              // per (layer, micro-batch) slice
  int64_t kv_row_bytes;         // K and V of max_len tokens
  int64_t kv_copies;
  int64_t act_rows;             // per micro-batch
  int64_t act_row_bytes;
  int64_t gpu_workspace_bytes;
  int64_t expanded_weight_bytes;  // fp16 copy of the largest compute layer (4-bit weights)
  int64_t cpu_attention_scratch_bytes;
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
  s.kv_head_token_bytes = KvHeadTokenBytes(m, p.compress_cache);
  s.kv_rows = s.gbs * s.kv_heads;
  s.kv_row_bytes = 2 * s.max_len * s.kv_head_token_bytes;
  s.kv_copies = int64_t{m.num_layers} * s.nb;
  s.act_rows = s.gbs * s.prompt;
  s.act_row_bytes = s.hidden * s.act_bytes;

  // One micro-batch's intermediates, in elements, at the larger of prefill and decode.
  const int64_t f = int64_t{m.intermediate_size} * (m.gated_mlp ? 2 : 1);
  auto phase = [&](int64_t tokens, int64_t scores) {
    const int64_t io = 2 * tokens * s.hidden;
    const int64_t attention = tokens * s.hidden + tokens * (s.heads + 2 * s.kv_heads) * s.head_dim +
                              scores + tokens * s.heads * s.head_dim;
    const int64_t mlp = tokens * s.hidden + tokens * f;
    return io + std::max(attention, mlp);
  };
  const int64_t prefill = phase(s.gbs * s.prompt, s.gbs * s.heads * s.prompt * s.prompt);
  const int64_t decode = phase(s.gbs, s.gbs * s.heads * s.max_len);
  const int64_t logits = s.gbs * m.vocab_size * 4;  // fp32, last position only
  s.gpu_workspace_bytes = std::max(prefill, decode) * s.act_bytes + logits;

  if (p.compress_weight) {
    int64_t largest = MatrixElements(layers[1]);
    const int64_t lm_head = int64_t{m.vocab_size} * m.hidden_size;
    largest = std::max(largest, m.tie_word_embeddings ? lm_head : MatrixElements(layers[2]));
    s.expanded_weight_bytes = largest * m.weight_dtype_bytes;
  }
  // q, output and scores of one micro-batch in fp32.
  s.cpu_attention_scratch_bytes = s.gbs * s.heads * (2 * s.head_dim + s.max_len) * 4;
  return s;
}

// Bytes of the output projection's tensor that live off the GPU (the tied embedding lives in the
// input layer).
int64_t OutputOffGpuBytes(const ModelSpec& m, const std::vector<LayerPlacement>& placed) {
  const LayerPlacement& out = placed[2];
  int64_t off = out.cpu_bytes + out.disk_bytes;
  if (m.tie_word_embeddings) {
    const TensorPlacement& embed = placed[0].tensors[0];
    off += (embed.cpu_rows + embed.disk_rows) * embed.row_bytes;
  }
  return off;
}

void AddBuffer(MemoryPlan& mem, std::string name, Tier tier, int64_t bytes, int count,
               bool staging) {
  if (bytes <= 0) return;
  mem.buffers.push_back({std::move(name), tier, bytes, count, staging});
  TierBytes& row = staging ? mem.staging_bytes : mem.workspace_bytes;
  row.at(tier) += bytes * count;
}

}  // namespace

const char* TierName(Tier tier) {
  switch (tier) {
    case Tier::kGpu: return "GPU";
    case Tier::kCpu: return "CPU";
    case Tier::kDisk: return "disk";
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

int64_t KvHeadTokenBytes(const ModelSpec& model, bool compress_cache) {
  if (!compress_cache) return int64_t{model.head_dim} * model.activation_dtype_bytes;
  const int64_t group = std::min(64, model.head_dim);
  return model.head_dim / 2 + model.head_dim / group * 4;
}

Result<MemoryPlan> AccountMemory(const ModelSpec& model, const Workload& workload,
                                 const Plan& plan) {
  STRATA_RETURN_IF_ERROR(model.Validate());
  STRATA_RETURN_IF_ERROR(workload.Validate(model));
  STRATA_RETURN_IF_ERROR(plan.Validate());
  if (plan.compress_cache && (model.head_dim % 2 != 0 ||
                              (model.head_dim > 64 && model.head_dim % 64 != 0))) {
    return Status::Unsupported("the 4-bit KV cache needs an even head_dim that is a multiple of "
                               "64 above 64; " + model.name + " has " +
                               std::to_string(model.head_dim) + "; run without --compress-cache");
  }
  const std::vector<WeightLayer> layers = BuildWeightLayers(model);
  const Shape s = ShapeOf(model, workload, plan, layers);

  MemoryPlan mem;
  for (const WeightLayer& layer : layers) {
    mem.weight_layers.push_back(PlaceLayerByRows(layer, plan.weight_gpu_percent,
                                                 plan.weight_cpu_percent, plan.compress_weight,
                                                 model.weight_dtype_bytes));
    const LayerPlacement& p = mem.weight_layers.back();
    mem.weight_bytes += TierBytes{p.count * p.gpu_bytes, p.count * p.cpu_bytes,
                                  p.count * p.disk_bytes};
  }
  mem.kv_cache = SplitRows(s.kv_copies, s.kv_rows, s.kv_row_bytes, plan.cache_gpu_percent,
                           plan.cache_cpu_percent);
  mem.kv_cache_bytes = mem.kv_cache.bytes();
  mem.activations = SplitRows(s.nb, s.act_rows, s.act_row_bytes, plan.activation_gpu_percent,
                              plan.activation_cpu_percent);
  mem.activation_bytes = mem.activations.bytes();

  // GPU staging: double buffers for whatever a step loads from off the GPU.
  const LayerPlacement& block = mem.weight_layers[1];
  const int64_t weight_off = std::max(block.cpu_bytes + block.disk_bytes,
                                      OutputOffGpuBytes(model, mem.weight_layers));
  AddBuffer(mem, "weight_staging", Tier::kGpu, weight_off, 2, true);
  const int64_t kv_off_rows = mem.kv_cache.cpu_rows + mem.kv_cache.disk_rows;
  // With CPU attention only the prompt's new K and V leave the GPU through it; otherwise a
  // slice's whole off-GPU cache comes in for GPU attention.
  const int64_t kv_staging_row = plan.cpu_attention ? 2 * s.prompt * s.kv_head_token_bytes
                                                    : s.kv_row_bytes;
  AddBuffer(mem, "kv_staging", Tier::kGpu, kv_off_rows * kv_staging_row, 2, true);
  AddBuffer(mem, "activation_staging", Tier::kGpu,
            (mem.activations.cpu_rows + mem.activations.disk_rows) * s.act_row_bytes, 2, true);
  AddBuffer(mem, "gpu_workspace", Tier::kGpu, s.gpu_workspace_bytes, 1, false);
  AddBuffer(mem, "expanded_weights", Tier::kGpu, s.expanded_weight_bytes, 1, false);

  // CPU: the pinned disk ring, and the CPU-attention buffers.
  const bool uses_disk = mem.weight_bytes.disk_bytes + mem.kv_cache_bytes.disk_bytes +
                             mem.activation_bytes.disk_bytes > 0;
  AddBuffer(mem, "disk_ring", Tier::kCpu, uses_disk ? kDiskRingBytes : 0, 1, true);
  if (plan.cpu_attention && kv_off_rows > 0) {
    AddBuffer(mem, "cpu_attention_cache", Tier::kCpu, mem.kv_cache.disk_rows * s.kv_row_bytes, 2,
              true);
    AddBuffer(mem, "cpu_attention_workspace", Tier::kCpu, s.cpu_attention_scratch_bytes, 2,
              false);
  }

  for (const TierBytes* row : {&mem.weight_bytes, &mem.kv_cache_bytes, &mem.activation_bytes,
                               &mem.staging_bytes, &mem.workspace_bytes}) {
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
  double output = StoredLayerBytes(layers[2], cw, dtype);
  if (model.tie_word_embeddings) {
    output += double(model.vocab_size) * StoredRowBytes(layers[0].tensors[0], cw, dtype);
  }
  const double weight_layer = std::max<double>(StoredLayerBytes(layers[1], cw, dtype), output);
  const double kv = double(s.kv_copies) * s.kv_rows * s.kv_row_bytes;
  const double act = double(s.nb) * s.act_rows * s.act_row_bytes;
  const double kv_staging_row = plan.cpu_attention ? 2.0 * s.prompt * s.kv_head_token_bytes
                                                   : double(s.kv_row_bytes);

  LinearMemory lm;
  LinearForm& gpu = lm.gpu_bytes;
  gpu.Add(kWeightGpu, weights).Add(kCacheGpu, kv).Add(kActivationGpu, act);
  gpu.Add(kWeightCpu, 2 * weight_layer).Add(kWeightDisk, 2 * weight_layer);
  gpu.Add(kCacheCpu, 2 * s.kv_rows * kv_staging_row).Add(kCacheDisk, 2 * s.kv_rows * kv_staging_row);
  gpu.Add(kActivationCpu, 2.0 * s.act_rows * s.act_row_bytes);
  gpu.Add(kActivationDisk, 2.0 * s.act_rows * s.act_row_bytes);
  gpu.constant = double(s.gpu_workspace_bytes) + s.expanded_weight_bytes;

  LinearForm& cpu = lm.cpu_bytes;
  cpu.Add(kWeightCpu, weights).Add(kCacheCpu, kv).Add(kActivationCpu, act);
  cpu.constant = double(kDiskRingBytes);
  if (plan.cpu_attention) {
    cpu.Add(kCacheDisk, 2.0 * s.kv_rows * s.kv_row_bytes);
    cpu.constant += 2.0 * s.cpu_attention_scratch_bytes;
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
