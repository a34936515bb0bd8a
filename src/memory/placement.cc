#include "src/memory/placement.h"

#include <algorithm>
#include <array>
#include <string>

#include "policy/memory_accounting.h"
#include "src/memory/model_spec_of.h"

namespace strata {
namespace {

constexpr uint64_t kArenaAlignment = 64;
constexpr uint64_t kDiskAlignment = 4096;

uint64_t AlignUp4k(uint64_t n) { return (n + kDiskAlignment - 1) / kDiskAlignment * kDiskAlignment; }

Status CheckShape(const BlockShape& s) {
  if (s.gpu_batch_size < 1 || s.num_micro_batches < 1 || s.prompt_len < 1 ||
      s.max_len <= s.prompt_len) {
    return Status::InvalidArgument(
        "a block needs at least one sequence per micro-batch, one micro-batch, a prompt of at "
        "least one token and room to generate (max_len > prompt_len)");
  }
  return Status::Ok();
}

void PlaceCache(const ModelConfig& c, const Plan& plan, const BlockShape& s, SpanType activations,
                TierLayout& layout, CachePlacement& out) {
  const uint64_t act = SpanElementBytes(activations);
  out.rows = SplitRows(int64_t{s.gpu_batch_size} * c.num_kv_heads, plan.cache_gpu_percent,
                       plan.cache_cpu_percent);
  out.format = KvFormatOf(c.head_dim, plan, activations);
  out.head_dim = c.head_dim;
  out.max_len = s.max_len;
  out.row_bytes = int64_t{s.max_len} * out.format.slot_bytes();
  const uint64_t row = static_cast<uint64_t>(out.row_bytes);
  for (int b = 0; b < c.num_layers; ++b) {
    for (int k = 0; k < s.num_micro_batches; ++k) {
      const std::string name = "kv.block" + std::to_string(b) + ".mb" + std::to_string(k);
      TierExtents home;
      if (out.rows.gpu > 0) {
        home.gpu = layout.Reserve<Tier::kGpu>(MemoryUse::kKvCache, name, row * out.rows.gpu,
                                              kArenaAlignment);
      }
      if (out.rows.cpu > 0) {
        home.cpu = layout.Reserve<Tier::kCpu>(MemoryUse::kKvCache, name, row * out.rows.cpu,
                                              kArenaAlignment);
      }
      if (out.rows.disk > 0) {
        home.disk = layout.Reserve<Tier::kDisk>(MemoryUse::kKvCache, name, row * out.rows.disk,
                                                kDiskAlignment);
      }
      out.slices.push_back(home);
    }
  }
  if (plan.compress_cache) {
    out.prefill = layout.Reserve<Tier::kGpu>(
        MemoryUse::kWorkspace, "kv_prefill",
        2 * static_cast<uint64_t>(c.num_kv_heads) * s.prompt_len * c.head_dim * act,
        kArenaAlignment);
  }
  if (plan.smooth_keys()) {
    out.smoothing =
        layout.Reserve<Tier::kGpu>(MemoryUse::kWorkspace, "kv_smoothing",
                                   2 * static_cast<uint64_t>(c.num_layers) * s.gpu_batch_size *
                                       s.num_micro_batches * c.num_kv_heads * c.head_dim * 4,
                                   kArenaAlignment);
  }
  if (plan.exact_tokens()) {
    out.exact = layout.Reserve<Tier::kGpu>(
        MemoryUse::kWorkspace, "kv_exact",
        2 * static_cast<uint64_t>(c.num_layers) * s.gpu_batch_size * s.num_micro_batches *
            c.num_kv_heads * (plan.cache_sink + plan.cache_window) * c.head_dim * 4,
        kArenaAlignment);
  }
  if (out.rows.off_gpu() == 0) return;
  const bool delegate = plan.cpu_attention;
  out.staging_len = delegate ? s.prompt_len : s.max_len;
  const uint64_t staged_row = static_cast<uint64_t>(out.staging_len) * out.format.slot_bytes();
  for (int i = 0; i < 2; ++i) {
    const std::string n = std::to_string(i);
    out.slots[i] = layout.Reserve<Tier::kGpu>(MemoryUse::kStaging, "kv_staging." + n,
                                              staged_row * out.rows.off_gpu(), kArenaAlignment);
    if (!delegate) continue;
    out.cpu_workspace[i] =
        layout.Reserve<Tier::kCpu>(MemoryUse::kWorkspace, "cpu_attention_workspace." + n,
                                   2 * static_cast<uint64_t>(s.gpu_batch_size) *
                                       (c.num_heads + c.num_kv_heads) * c.head_dim * act,
                                   kArenaAlignment);
  }
  if (delegate && plan.exact_tokens()) {
    out.exact_cpu = layout.Reserve<Tier::kCpu>(
        MemoryUse::kWorkspace, "kv_exact_cpu",
        2 * static_cast<uint64_t>(c.num_layers) * s.num_micro_batches * out.rows.off_gpu() *
            (plan.cache_sink + plan.cache_window) * c.head_dim * 4,
        kArenaAlignment);
  }
}

// CPU attention: a decode step's disk rows of a slice come to the CPU laid out as on disk, so
// that they are read and written in place. 4 KiB-aligned: reserved before anything else.
void PlaceCpuAttentionSlots(const ModelConfig& c, const Plan& plan, const BlockShape& s,
                            SpanType activations, TierLayout& layout, CachePlacement& out) {
  const TierRows rows = SplitRows(int64_t{s.gpu_batch_size} * c.num_kv_heads,
                                  plan.cache_gpu_percent, plan.cache_cpu_percent);
  if (!plan.cpu_attention || rows.disk == 0) return;
  const uint64_t bytes =
      static_cast<uint64_t>(s.max_len) * KvFormatOf(c.head_dim, plan, activations).slot_bytes() *
      rows.disk;
  for (int i = 0; i < 2; ++i) {
    out.cpu_slots[i] =
        layout.Reserve<Tier::kCpu>(MemoryUse::kStaging, "cpu_attention_cache." + std::to_string(i),
                                   AlignUp4k(bytes), kDiskAlignment);
  }
}

void PlaceActivations(const ModelConfig& c, const Plan& plan, const BlockShape& s,
                      SpanType activations, TierLayout& layout, ActivationPlacement& out) {
  out.rows = SplitRows(int64_t{s.gpu_batch_size} * s.prompt_len, plan.activation_gpu_percent,
                       plan.activation_cpu_percent);
  out.row_bytes = int64_t{c.hidden_size} * static_cast<int64_t>(SpanElementBytes(activations));
  const uint64_t row = static_cast<uint64_t>(out.row_bytes);
  for (int k = 0; k < s.num_micro_batches; ++k) {
    const std::string name = "hidden.mb" + std::to_string(k);
    TierExtents home;
    if (out.rows.gpu > 0) {
      home.gpu = layout.Reserve<Tier::kGpu>(MemoryUse::kActivations, name, row * out.rows.gpu,
                                            kArenaAlignment);
    }
    if (out.rows.cpu > 0) {
      home.cpu = layout.Reserve<Tier::kCpu>(MemoryUse::kActivations, name, row * out.rows.cpu,
                                            kArenaAlignment);
    }
    if (out.rows.disk > 0) {
      home.disk = layout.Reserve<Tier::kDisk>(MemoryUse::kActivations, name, row * out.rows.disk,
                                              kDiskAlignment);
    }
    out.homes.push_back(home);
  }
  if (out.rows.off_gpu() == 0) return;
  for (int i = 0; i < 2; ++i) {
    out.slots[i] =
        layout.Reserve<Tier::kGpu>(MemoryUse::kWorkspace, "activation_slot." + std::to_string(i),
                                   row * out.rows.rows, kArenaAlignment);
  }
}

// The largest single disk transfer: a layer's disk weights, a slice's or a micro-batch's disk
// rows.
uint64_t LargestDiskExtent(const TierLayout& layout) {
  uint64_t largest = 0;
  for (const LayoutEntry& e : layout.entries()) {
    if (e.extent.tier == Tier::kDisk) largest = std::max(largest, e.extent.bytes);
  }
  return largest;
}

}  // namespace

KvFormat KvFormatOf(int head_dim, const Plan& plan, SpanType activations) {
  // The accounting's planes (src/memory does not depend on kernels/; the executor checks the
  // 4-bit ones against kernels/kv_q4_format.h).
  const std::array<int64_t, 4> b = KvHeadTokenPlaneBytes(
      head_dim, static_cast<int>(SpanElementBytes(activations)), plan);
  KvFormat f;
  f.q4 = plan.compress_cache;
  f.element = activations;
  f.parts = f.q4 ? 2 : 1;
  if (f.q4) {
    std::copy(b.begin(), b.end(), f.plane_bytes);
  } else {  // K's plane, then V's
    f.plane_bytes[0] = b[0];
    f.plane_bytes[1] = b[2];
  }
  return f;
}

TierRows SplitRows(int64_t rows, int gpu_percent, int cpu_percent) {
  const int64_t gpu = (rows * gpu_percent + 50) / 100;
  const int64_t gpu_cpu = (rows * (gpu_percent + cpu_percent) + 50) / 100;
  return {rows, gpu, gpu_cpu - gpu, rows - gpu_cpu};
}

uint64_t TransformerWorkspaceBytes(const ModelConfig& c, int64_t max_rows, SpanType activations) {
  const int64_t per_row = 2 * int64_t{c.hidden_size} + 2 * int64_t{c.num_heads} * c.head_dim +
                          2 * int64_t{c.num_kv_heads} * c.head_dim +
                          int64_t{c.intermediate_size} * (c.gated_mlp ? 2 : 1);
  return static_cast<uint64_t>(max_rows * per_row) * SpanElementBytes(activations);
}

OpLimits OpLimitsOf(const Model& model, const Plan& plan, const BlockShape& shape,
                    SpanType activations) {
  const ModelConfig& c = model.config();
  const int64_t hidden = c.hidden_size;
  const int64_t q = int64_t{c.num_heads} * c.head_dim;
  const int64_t kv = int64_t{c.num_kv_heads} * c.head_dim;
  const int64_t mlp = c.intermediate_size;
  const int64_t vocab = c.vocab_size;
  OpLimits l;
  l.activations = activations;
  l.rows = int64_t{shape.gpu_batch_size} * shape.prompt_len;
  // The Linears: q, k, v [q or kv, hidden], o [hidden, q], up and gate [mlp, hidden], down
  // [hidden, mlp], the output layer [vocab, hidden].
  l.linear_in = std::max({hidden, q, mlp});
  l.linear_out = std::max({q, kv, hidden, mlp, vocab});
  l.linear_weight_elements = std::max({q, mlp, vocab}) * hidden;
  const ModelWeights& w = model.weights();
  l.half_weights = WeightDTypeOf(model) != DType::kF32;
  if (activations != SpanType::kF32) {  // 4-bit weights expand to the activations' type
    auto other = [&](const TensorView& t) {
      const bool rounded =
          t.present() && t.dtype != DType::kQ4 && SpanTypeOf(t.dtype) != activations;
      return rounded ? t.dim(0) * t.dim(1) : int64_t{0};
    };
    l.rounded_weight_elements = other(w.lm_head);
    for (const LayerWeights& layer : w.layers) {
      for (const TensorView* t : {&layer.wq, &layer.wk, &layer.wv, &layer.wo, &layer.w_gate,
                                  &layer.w_up, &layer.w_down}) {
        l.rounded_weight_elements = std::max(l.rounded_weight_elements, other(*t));
      }
    }
  }
  l.batch = shape.gpu_batch_size;
  l.vocab = c.vocab_size;
  l.num_heads = c.num_heads;
  l.num_kv_heads = c.num_kv_heads;
  l.head_dim = c.head_dim;
  l.step_tokens = shape.prompt_len;
  l.max_len = shape.max_len;
  l.kv_q4 = plan.compress_cache;
  if (l.kv_q4) {
    l.kv_q4_format.rotate_keys = plan.rotate_keys();
    l.kv_q4_format.keys_by_channel = plan.channel_keys();
    if (plan.exact_tokens()) {
      l.kv_q4_format.sink = plan.cache_sink;
      l.kv_q4_format.window = plan.cache_window;
    }
  }
  return l;
}

Result<Placement> PlaceBlock(const Model& model, const Plan& plan, const BlockShape& shape,
                             SpanType activations) {
  STRATA_RETURN_IF_ERROR(plan.Validate());
  STRATA_RETURN_IF_ERROR(CheckShape(shape));
  if (model.has_q4_weights() && !plan.compress_weight) {
    return Status::InvalidArgument(model.source() +
                                   " stores its weights in 4 bits: run it with "
                                   "--compress-weight");
  }
  const ModelConfig& c = model.config();
  const int act = static_cast<int>(SpanElementBytes(activations));
  if (plan.compress_cache && !KvQ4TakesHeadDim(c.head_dim)) {
    return Status::Unsupported(std::string("the 4-bit KV cache takes ") + kKvQ4HeadDims +
                               "; this model has " + std::to_string(c.head_dim) +
                               ": run without --compress-cache");
  }
  if (plan.rotate_keys() && (c.head_dim & (c.head_dim - 1)) != 0) {
    return Status::Unsupported("rotated (and smoothed) 4-bit keys need a power-of-two head_dim; "
                               "this model has " + std::to_string(c.head_dim) +
                               ": use --cache-keys channel (the default) or plain");
  }
  // The homes alone first, to size the disk ring by the largest disk transfer.
  uint64_t largest_disk = 0;
  {
    TierLayout homes;
    CachePlacement cache;
    ActivationPlacement hidden;
    const WeightPlacement weights = PlaceWeights(model, plan, homes, act);
    PlaceCache(c, plan, shape, activations, homes, cache);
    PlaceActivations(c, plan, shape, activations, homes, hidden);
    // Disk weights read in place from a store are disk transfers too, outside the layout.
    largest_disk = std::max(LargestDiskExtent(homes), weights.largest_store_read);
  }
  Placement p;
  p.plan = plan;
  p.shape = shape;
  p.activation_type = activations;
  // 4 KiB-aligned CPU buffers go first, so that aligning them wastes nothing.
  if (largest_disk > 0) {
    // Sized as the accounting sizes it (policy/memory_accounting.h, DiskRingBytes).
    p.disk_ring = p.layout.Reserve<Tier::kCpu>(
        MemoryUse::kStaging, "disk_ring",
        static_cast<uint64_t>(DiskRingBytes(static_cast<int64_t>(largest_disk))), kDiskAlignment);
  }
  PlaceCpuAttentionSlots(c, plan, shape, activations, p.layout, p.cache);
  p.weights = PlaceWeights(model, plan, p.layout, act);
  PlaceCache(c, plan, shape, activations, p.layout, p.cache);
  PlaceActivations(c, plan, shape, activations, p.layout, p.activations);
  if (p.weights.slot_bytes > 0) {
    for (int i = 0; i < 2; ++i) {
      p.weight_slots[i] =
          p.layout.Reserve<Tier::kGpu>(MemoryUse::kStaging, "weight_slot." + std::to_string(i),
                                       p.weights.slot_bytes, kArenaAlignment);
    }
  }
  if (p.weights.expanded_bytes > 0) {
    p.expanded_weights = p.layout.Reserve<Tier::kGpu>(MemoryUse::kWorkspace, "expanded_weights",
                                                      p.weights.expanded_bytes, kArenaAlignment);
  }
  const uint64_t gbs = static_cast<uint64_t>(shape.gpu_batch_size);
  p.transformer_workspace = p.layout.Reserve<Tier::kGpu>(
      MemoryUse::kWorkspace, "transformer_workspace",
      TransformerWorkspaceBytes(c, int64_t{shape.gpu_batch_size} * shape.prompt_len, activations),
      kArenaAlignment);
  p.logits =
      p.layout.Reserve<Tier::kGpu>(MemoryUse::kWorkspace, "logits",
                                   gbs * static_cast<uint64_t>(c.vocab_size) * 4, kArenaAlignment);
  p.last_hidden =
      p.layout.Reserve<Tier::kGpu>(MemoryUse::kWorkspace, "last_hidden",
                                   gbs * static_cast<uint64_t>(c.hidden_size) * act,
                                   kArenaAlignment);
  p.op_limits = OpLimitsOf(model, plan, shape, activations);
  return p;
}

}  // namespace strata
