#include "src/runtime/executor_compute.h"

#include <algorithm>
#include <span>

#include "src/backend/q4_sizes.h"
#include "src/core/check.h"

namespace strata {

static_assert(kChannelKeyGroup == kKvQ4ChannelGroup,
              "policy and the backends must agree on the slots of a channel-key group");

int BlockRun::batch(int k) const {
  const int n = sequences->size();
  return std::min(gpu_batch_size, n - k * gpu_batch_size);
}

namespace {

// The member of `w` that `field` names in a ModelWeights (the input and output layers' tensors).
DeviceWeight& SameField(DeviceModelWeights& w, TensorView ModelWeights::*field) {
  if (field == &ModelWeights::token_embedding) return w.token_embedding;
  if (field == &ModelWeights::position_embedding) return w.position_embedding;
  if (field == &ModelWeights::final_norm) return w.final_norm;
  if (field == &ModelWeights::final_norm_bias) return w.final_norm_bias;
  STRATA_CHECK(field == &ModelWeights::lm_head);
  return w.lm_head;
}

}  // namespace

BlockCompute::BlockCompute(const Model& model, Backend& device_backend, Backend& cpu_backend,
                           const Placement& placement, const MemoryTiers& tiers)
    : model_(model),
      device_(device_backend),
      cpu_(cpu_backend),
      p_(placement),
      tiers_(tiers),
      delegate_(placement.plan.cpu_attention && placement.cache.rows.off_gpu() > 0),
      transformer_(model, device_backend, tiers.Device(placement.transformer_workspace),
                   int64_t{placement.shape.gpu_batch_size} * placement.shape.prompt_len,
                   placement.activation_type),
      host_arena_(tiers.HostArena(cpu_backend)),
      cpu_stream_(cpu_backend.MakeStream()),
      output_ready_(device_backend.MakeEvent()),
      to_cpu_(device_backend.MakeEvent()),
      cpu_done_(cpu_backend.MakeEvent()),
      pending_(static_cast<size_t>(placement.shape.num_micro_batches)) {
  STRATA_CHECK(host_arena_ != nullptr);
  STRATA_CHECK(&device_backend != &cpu_backend);
  if (p_.cache.format.q4) {
    const int d = model.config().head_dim;
    const int key_params =
        p_.plan.channel_keys() ? KvQ4ChannelParamHalves(d) : KvQ4ParamHalves(d);
    const int64_t* b = p_.cache.format.plane_bytes;
    STRATA_CHECK(b[0] == KvQ4CodeBytes(d) && b[1] == 2 * key_params && b[2] == KvQ4CodeBytes(d) &&
                 b[3] == 2 * KvQ4ParamHalves(d));
  }
  for (int s = 0; s < 2; ++s) {
    block_views_[s].resize(model.weights().layers.size());
    for (size_t b = 0; b < block_views_[s].size(); ++b) {
      for (const PlacedTensor& t : p_.weights.block(static_cast<int>(b)).tensors) {
        SameField(block_views_[s][b], t.block_field) = View(t, s);
      }
    }
    // The input layer's tensors in a slot hold only a step's rows: Input() views them.
    for (const PlacedTensor& t : p_.weights.input().tensors) {
      if (t.slot_offset < 0) SameField(model_views_[s], t.model_field) = View(t, s);
    }
    for (const PlacedTensor& t : p_.weights.output().tensors) {
      SameField(model_views_[s], t.model_field) = View(t, s);
    }
  }
}

DeviceWeight BlockCompute::View(const PlacedTensor& t, int slot, int64_t rows) const {
  DeviceWeight w;
  w.rows = rows >= 0 ? rows : t.source.dim(0);
  w.cols = t.source.shape.size() == 2 ? t.source.dim(1) : 1;
  if (t.q4) {
    w.data = tiers_.Device(p_.expanded_weights)
                 .Sub(static_cast<uint64_t>(t.expanded_offset),
                      static_cast<uint64_t>(w.numel()) * ActivationBytes(),
                      p_.activation_type);
    return w;
  }
  const uint64_t bytes = static_cast<uint64_t>(w.numel()) * DTypeBytes(t.source.dtype);
  const SpanType type = SpanTypeOf(t.source.dtype);
  w.data = t.on_gpu() ? tiers_.Device(t.gpu_home).Sub(0, bytes, type)
                      : tiers_.Device(p_.weight_slots[slot])
                            .Sub(static_cast<uint64_t>(t.slot_offset), bytes, type);
  return w;
}

void BlockCompute::Run(const Step& step, int blocks, BlockRun& run, Stream& stream,
                       LaneRecord& record) {
  const int k = step.micro_batch;
  const ActivationPlacement& a = p_.activations;
  const StepInput& in = run.inputs[static_cast<size_t>(k)];
  const DeviceSpan hidden_buffer =
      tiers_.Device(step.activation_slot >= 0 ? a.slots[step.activation_slot]
                                              : a.homes[static_cast<size_t>(k)].gpu);
  const int slot = std::max(step.weight_slot, 0);
  // The part after the CPU reads the weights its part before expanded.
  if (p_.weights.expanded_bytes > 0 && step.kind != StepKind::kComputeFromCpu) {
    ExpandWeights(step, blocks, run, stream, record);
  }
  const LayerRole role = RoleOfLayer(step.layer, blocks);
  if (role == LayerRole::kInputEmbedding) {
    // The step's rows are known once Input() has made its StepInput.
    Input(step, run, stream, hidden_buffer);
    return;
  }
  const DeviceSpan hidden = RowsOf(hidden_buffer, int64_t{in.batch} * in.new_tokens,
                                  model_.config().hidden_size, p_.activation_type);
  switch (role) {
    case LayerRole::kAttention:
      if (step.kind == StepKind::kComputeFromCpu) {
        AttentionFromCpu(step, run, stream, hidden, record);
      } else {
        Attention(step, BlockOfLayer(step.layer), run, stream, hidden, record);
      }
      break;
    case LayerRole::kMlp:
      transformer_.MlpLayer(stream,
                            block_views_[slot][static_cast<size_t>(BlockOfLayer(step.layer))],
                            in.batch * in.new_tokens, hidden);
      break;
    case LayerRole::kOutput:
      Output(step, run, stream, hidden);
      break;
    case LayerRole::kInputEmbedding:
      break;
  }
}

void BlockCompute::ExpandWeights(const Step& step, int blocks, const BlockRun& run,
                                 Stream& stream, LaneRecord& record) {
  const LayerRole role = RoleOfLayer(step.layer, blocks);
  const size_t layer = role == LayerRole::kInputEmbedding ? 0
                       : role == LayerRole::kOutput
                           ? p_.weights.layers.size() - 1
                           : static_cast<size_t>(BlockOfLayer(step.layer)) + 1;
  const int part = role == LayerRole::kMlp ? 1 : 0;
  if (p_.weights.layers[layer].expanded_bytes[part] == 0) return;
  if (step.micro_batch > 0) {
    // The schedule runs a layer's micro-batches back to back after micro-batch 0.
    STRATA_CHECK(expanded_token_ == step.token && expanded_layer_ == step.layer);
    return;
  }
  const DeviceSpan expanded = tiers_.Device(p_.expanded_weights);
  for (const PlacedTensor& t : p_.weights.layers[layer].tensors) {
    if (!t.q4 || t.part != part) continue;
    const int64_t cols = t.source.dim(1);
    const int group = t.q4_group;
    // Placement sizes the rows as the backends lay them out (src/memory cannot say).
    STRATA_CHECK(t.row_bytes == WeightQ4CodeBytes(1, cols) +
                                    WeightQ4ParamHalves(1, cols, group) *
                                        static_cast<int64_t>(sizeof(uint16_t)));
    // Rows [first, first + n) from `chunk`, its codes then its params.
    const auto expand = [&](const DeviceSpan& chunk, int64_t first, int64_t n) {
      const uint64_t codes = static_cast<uint64_t>(WeightQ4CodeBytes(n, cols));
      const uint64_t params = static_cast<uint64_t>(WeightQ4ParamHalves(n, cols, group)) * 2;
      const uint64_t row = static_cast<uint64_t>(cols) * ActivationBytes();
      device_.ExpandWeightQ4(stream, chunk.Sub(0, codes), chunk.Sub(codes, params), n, cols,
                             group,
                             expanded.Sub(static_cast<uint64_t>(t.expanded_offset) +
                                              static_cast<uint64_t>(first) * row,
                                          static_cast<uint64_t>(n) * row, p_.activation_type));
    };
    // Rows as assembled: a chunk per tier; an input table in a slot, only the step's rows.
    STRATA_CHECK(t.on_gpu() || step.weight_slot >= 0);
    const bool step_rows = layer == 0 && t.slot_offset >= 0;
    STRATA_CHECK(!step_rows || run.input_rows.token == step.token);
    const int64_t rows =
        step_rows ? static_cast<int64_t>(run.input_rows.of(t).size()) : t.source.dim(0);
    const uint64_t bytes = static_cast<uint64_t>(rows * t.row_bytes);
    const DeviceSpan at = t.on_gpu() ? tiers_.Device(t.gpu_home).Sub(0, bytes)
                                     : tiers_.Device(p_.weight_slots[step.weight_slot])
                                           .Sub(static_cast<uint64_t>(t.slot_offset), bytes);
    if (step_rows) {
      expand(at, 0, rows);
      continue;
    }
    int64_t first = 0;
    for (const int64_t n : {t.gpu_rows, t.cpu_rows, t.disk_rows}) {
      if (n == 0) continue;
      expand(at.Sub(static_cast<uint64_t>(first * t.row_bytes),
                    static_cast<uint64_t>(n * t.row_bytes)),
             first, n);
      first += n;
    }
  }
  expanded_token_ = step.token;
  expanded_layer_ = step.layer;
  record.CountWeightExpansion();
}

void BlockCompute::Input(const Step& step, BlockRun& run, Stream& stream, DeviceSpan hidden) {
  const int k = step.micro_batch;
  const int first = k * run.gpu_batch_size;
  StepInput& in = run.inputs[static_cast<size_t>(k)];
  const int batch = run.batch(k);
  const int p = run.prompt_len;
  if (step.token == 0) {
    // Left padding to the block's longest prompt; padding repeats the first real token, is never
    // attended, and its outputs are dropped.
    in = StepInput{};
    in.batch = batch;
    in.new_tokens = p;
    in.cache_len = p;
    for (int b = 0; b < batch; ++b) {
      const std::vector<int32_t>& prompt = (*run.requests)[static_cast<size_t>(first + b)].prompt;
      const int pad = p - static_cast<int>(prompt.size());
      in.start.push_back(pad);
      for (int j = 0; j < p; ++j) {
        in.tokens.push_back(j < pad ? prompt[0] : prompt[static_cast<size_t>(j - pad)]);
        in.positions.push_back(std::max(0, j - pad));
      }
    }
  } else {
    in.new_tokens = 1;
    in.cache_len = p + step.token;
    in.tokens.assign(static_cast<size_t>(batch), 0);
    in.positions.assign(static_cast<size_t>(batch), 0);
    for (int b = 0; b < batch; ++b) {
      in.tokens[static_cast<size_t>(b)] = run.sequences->last_token(first + b);
      in.positions[static_cast<size_t>(b)] = in.cache_len - 1 - in.start[static_cast<size_t>(b)];
    }
  }
  const int slot = std::max(step.weight_slot, 0);
  DeviceModelWeights w = model_views_[slot];
  std::vector<int32_t> token_rows(in.tokens), position_rows = transformer_.PositionRows(in);
  for (const PlacedTensor& t : p_.weights.input().tensors) {
    if (t.slot_offset < 0) continue;
    STRATA_CHECK(run.input_rows.token == step.token);
    const bool positions = t.model_field == &ModelWeights::position_embedding;
    const std::vector<int32_t>& rows = run.input_rows.of(t);
    for (int32_t& r : positions ? position_rows : token_rows) r = RowIndex(rows, r);
    SameField(w, t.model_field) = View(t, slot, static_cast<int64_t>(rows.size()));
  }
  transformer_.EmbedRows(stream, token_rows, position_rows, w.token_embedding,
                         w.position_embedding,
                         RowsOf(hidden, int64_t{in.batch} * in.new_tokens,
                                model_.config().hidden_size, p_.activation_type));
}

void BlockCompute::BuildRows(const Step& step, int block, int begin, int end, int rows,
                             std::vector<KvRow>& dense, std::vector<KvQ4Row>& q4) const {
  const CachePlacement& c = p_.cache;
  const int slice = block * p_.shape.num_micro_batches + step.micro_batch;
  const TierExtents& home = c.slices[static_cast<size_t>(slice)];
  const int64_t g = c.rows.gpu, cpu = c.rows.cpu, disk = c.rows.disk;
  const bool delegated = delegate_ && step.token > 0;
  // Row `r` of `buffer`, which holds `n` rows of `len` slots, in the cache's format.
  const auto row_at = [&](size_t r, const DeviceSpan& buffer, int64_t n, int len, int64_t i) {
    if (c.format.q4) {
      q4[r] = KvQ4RowAt(c.format, buffer, n, len, i);
    } else {
      dense[r] = KvRowAt(c.format, buffer, n, len, i);
    }
  };
  dense.resize(c.format.q4 ? 0 : static_cast<size_t>(rows));
  q4.resize(c.format.q4 ? static_cast<size_t>(rows) : 0);
  for (int64_t r = begin; r < end; ++r) {
    const size_t i = static_cast<size_t>(r);
    if (r < g) {
      row_at(i, tiers_.Device(home.gpu), g, c.max_len, r);
    } else if (delegated && r < g + cpu) {
      row_at(i, Host(home.cpu), cpu, c.max_len, r - g);
    } else if (delegated) {
      row_at(i, Host(c.cpu_slots[step.cache_slot]), disk, c.max_len, r - g - cpu);
    } else {
      row_at(i, tiers_.Device(c.slots[step.cache_slot]), c.rows.off_gpu(), c.staging_len, r - g);
    }
    if (!p_.plan.exact_tokens()) continue;
    // The row's exact rows: on the device, or in the host tier for a row delegated to the CPU.
    const bool on_host = delegated && r >= g;
    // Keys then values, each [slices, rows of a slice there, sink + window, head_dim].
    const DeviceSpan exact = on_host ? Host(c.exact_cpu) : tiers_.Device(c.exact);
    const int64_t n = on_host ? c.rows.off_gpu()
                              : int64_t{p_.shape.gpu_batch_size} * model_.config().num_kv_heads;
    const uint64_t bytes =
        static_cast<uint64_t>(p_.plan.cache_sink + p_.plan.cache_window) * c.head_dim * 4;
    const uint64_t at = static_cast<uint64_t>(slice * n + (on_host ? r - g : r)) * bytes;
    q4[i].k_exact = exact.Sub(at, bytes, SpanType::kF32);
    q4[i].v_exact = exact.Sub(exact.bytes() / 2 + at, bytes, SpanType::kF32);
  }
}

void BlockCompute::WriteRows(Stream& stream, const std::vector<KvRow>& table, int row_begin,
                             int row_end, const StepInput& in, DeviceSpan k_new,
                             DeviceSpan v_new) const {
  const ModelConfig& cfg = model_.config();
  const int kvh = cfg.num_kv_heads;
  const uint64_t head = static_cast<uint64_t>(cfg.head_dim) * ActivationBytes();
  const int tokens = in.new_tokens;
  const uint64_t first = static_cast<uint64_t>(in.cache_len - tokens) * head;
  for (int r = row_begin; r < row_end; ++r) {
    const KvRow& row = table[static_cast<size_t>(r)];
    const int b = r / kvh, h = r % kvh;
    for (int t = 0; t < tokens; ++t) {
      const uint64_t src = ((static_cast<uint64_t>(b) * tokens + t) * kvh + h) * head;
      stream.CopyOnDevice(row.k.Sub(first + t * head, head), k_new.Sub(src, head));
      stream.CopyOnDevice(row.v.Sub(first + t * head, head), v_new.Sub(src, head));
    }
  }
}

DeviceSpan BlockCompute::Host(const CpuExtent& e) const {
  return host_arena_->Span(e.offset, e.bytes);
}

KvQ4Step BlockCompute::Q4StepOf(const StepInput& in) const {
  const ModelConfig& cfg = model_.config();
  KvQ4Step s;
  s.batch = in.batch;
  s.num_heads = cfg.num_heads;
  s.num_kv_heads = cfg.num_kv_heads;
  s.head_dim = cfg.head_dim;
  s.tokens = in.new_tokens;
  s.cache_len = in.cache_len;
  s.scale = cfg.AttentionScale();
  s.format.rotate_keys = p_.plan.rotate_keys();
  s.format.keys_by_channel = p_.plan.channel_keys();
  if (p_.plan.exact_tokens()) {
    s.format.sink = p_.plan.cache_sink;
    s.format.window = p_.plan.cache_window;
  }
  return s;
}

AttentionShape BlockCompute::ShapeOf(const StepInput& in) const {
  const ModelConfig& cfg = model_.config();
  AttentionShape shape;
  shape.batch = in.batch;
  shape.new_tokens = in.new_tokens;
  shape.num_heads = cfg.num_heads;
  shape.num_kv_heads = cfg.num_kv_heads;
  shape.head_dim = cfg.head_dim;
  shape.cache_len = in.cache_len;
  shape.scale = cfg.AttentionScale();
  return shape;
}

int BlockCompute::LocalRows(const Step& step, int rows) const {
  // Rows [0, local) are attended where the layer computes; with CPU delegation in a decode step,
  // the rest on the CPU where they live.
  return delegate_ && step.token > 0 ? static_cast<int>(std::min<int64_t>(rows, p_.cache.rows.gpu))
                                     : rows;
}

BlockCompute::WorkspaceView BlockCompute::WorkspaceOf(int micro_batch, int batch, int local,
                                                      int rows) const {
  // A decode step: one token, so the heads of rows [local, rows) are one contiguous range of q
  // and of the output, and their keys and values one of k and v.
  const ModelConfig& cfg = model_.config();
  const uint64_t head = static_cast<uint64_t>(cfg.head_dim) * ActivationBytes();
  const uint64_t per_row = static_cast<uint64_t>(cfg.num_heads / cfg.num_kv_heads) * head;
  WorkspaceView w;
  w.begin = static_cast<uint64_t>(local) * per_row;
  w.end = static_cast<uint64_t>(rows) * per_row;
  w.kv_begin = static_cast<uint64_t>(local) * head;
  w.kv_end = static_cast<uint64_t>(rows) * head;
  // Queries, outputs, keys and values, each sized for a whole micro-batch.
  const CpuExtent& workspace = p_.cache.cpu_workspace[micro_batch % 2];
  const uint64_t q_max = static_cast<uint64_t>(p_.shape.gpu_batch_size) * cfg.num_heads * head;
  const uint64_t kv_max =
      static_cast<uint64_t>(p_.shape.gpu_batch_size) * cfg.num_kv_heads * head;
  const uint64_t at[] = {0, q_max, 2 * q_max, 2 * q_max + kv_max};
  const uint64_t q_bytes = static_cast<uint64_t>(batch) * cfg.num_heads * head;
  const uint64_t kv_bytes = static_cast<uint64_t>(batch) * cfg.num_kv_heads * head;
  STRATA_CHECK(w.end == q_bytes && w.kv_end == kv_bytes);
  uint8_t* host = tiers_.At(workspace);
  const DeviceSpan cpu = Host(workspace);
  for (int i = 0; i < 4; ++i) {
    const uint64_t bytes = i < 2 ? q_bytes : kv_bytes;
    w.host[i] = std::span<uint8_t>(host + at[i], bytes);
    w.cpu[i] = cpu.Sub(at[i], bytes, p_.activation_type);
  }
  return w;
}

void BlockCompute::Attention(const Step& step, int block, BlockRun& run, Stream& stream,
                             DeviceSpan hidden, LaneRecord& record) {
  const ModelConfig& cfg = model_.config();
  const StepInput& in = run.inputs[static_cast<size_t>(step.micro_batch)];
  const DeviceLayerWeights& w =
      block_views_[std::max(step.weight_slot, 0)][static_cast<size_t>(block)];
  const Transformer::AttentionBuffers buf = transformer_.AttentionInputs(stream, w, in, hidden);
  const int rows = in.batch * cfg.num_kv_heads;
  const int local = LocalRows(step, rows);
  BuildRows(step, block, 0, local, rows, rows_, q4_rows_);
  const AttentionShape shape = ShapeOf(in);
  if (!p_.cache.format.q4) {
    WriteRows(stream, rows_, 0, local, in, buf.k, buf.v);
    AttendRows(device_, stream, shape, buf.q, rows_, 0, local, in.start, buf.attn);
  } else {
    const KvQ4Step s = Q4StepOf(in);
    // The prefill attends to the prompt's own keys, before they are smoothed in place.
    if (step.token == 0) PrefillOnDense(in, stream, buf, shape);
    if (p_.plan.smooth_keys()) {
      // The cache stores smoothed keys, and decode attention meets scaled queries.
      const auto [mean, scale] = SmoothingOf(step, block, in.batch);
      if (step.token == 0) device_.FitKeySmoothing(stream, s, buf.k, in.start, mean, scale);
      device_.SmoothKeys(stream, s, buf.k, mean, scale);
      if (step.token > 0) device_.ScaleQueries(stream, s, buf.q, scale);
    }
    const std::span<const KvQ4Row> table(q4_rows_);
    device_.WriteKvQ4(stream, s, buf.k, buf.v, in.start, table.first(local), 0);
    if (step.token > 0) {
      device_.AttendKvQ4(stream, s, buf.q, in.start, table.first(local), 0, buf.attn);
    } else if (delegate_ && p_.plan.exact_tokens()) {
      ExactRowsToHost(step, block, rows, stream);
    }
  }
  if (step.kind == StepKind::kComputeToCpu) {
    // The CPU lane attends rows [local, rows); the part after brings the output back. Until then
    // the next micro-batch's part before reuses the Transformer's buffers, so the output of rows
    // [0, local) waits in the workspace too.
    ToCpu(step.micro_batch, in.batch, buf, local, rows, /*with_local=*/true, stream, record);
    pending_[static_cast<size_t>(step.micro_batch)] = buf.attn;
    return;
  }
  if (local < rows) {
    // A schedule that does not split the layer (shape.cpu_attention_decode unset): the CPU's
    // part runs here, between the copies.
    ToCpu(step.micro_batch, in.batch, buf, local, rows, /*with_local=*/false, stream, record);
    stream.Record(*to_cpu_);
    to_cpu_->HostWait();
    OnCpu(step, run);
    FromCpu(step.micro_batch, buf.attn, in.batch, local, rows, /*with_local=*/false, stream,
            record);
  }
  transformer_.AttentionOutput(stream, w, in.batch * in.new_tokens, buf.attn, hidden);
}

void BlockCompute::AttentionFromCpu(const Step& step, BlockRun& run, Stream& stream,
                                    DeviceSpan hidden, LaneRecord& record) {
  const StepInput& in = run.inputs[static_cast<size_t>(step.micro_batch)];
  const int rows = in.batch * model_.config().num_kv_heads;
  const DeviceSpan attn = pending_[static_cast<size_t>(step.micro_batch)];
  FromCpu(step.micro_batch, attn, in.batch, LocalRows(step, rows), rows, /*with_local=*/true,
          stream, record);
  const DeviceLayerWeights& w = block_views_[std::max(step.weight_slot, 0)]
                                            [static_cast<size_t>(BlockOfLayer(step.layer))];
  transformer_.AttentionOutput(stream, w, in.batch * in.new_tokens, attn, hidden);
}

void BlockCompute::ToCpu(int micro_batch, int batch, const Transformer::AttentionBuffers& buf,
                         int local, int rows, bool with_local, Stream& stream,
                         LaneRecord& record) {
  const WorkspaceView ws = WorkspaceOf(micro_batch, batch, local, rows);
  const uint64_t bytes = ws.end - ws.begin, kv_bytes = ws.kv_end - ws.kv_begin;
  const double t0 = record.NowUs();
  uint64_t moved = 0;
  if (bytes > 0) {
    stream.CopyToHost(ws.host[0].subspan(ws.begin), buf.q.Sub(ws.begin, bytes));
    stream.CopyToHost(ws.host[2].subspan(ws.kv_begin), buf.k.Sub(ws.kv_begin, kv_bytes));
    stream.CopyToHost(ws.host[3].subspan(ws.kv_begin), buf.v.Sub(ws.kv_begin, kv_bytes));
    moved += bytes + 2 * kv_bytes;
  }
  if (with_local && ws.begin > 0) {
    stream.CopyToHost(ws.host[1].first(ws.begin), buf.attn.Sub(0, ws.begin));
    moved += ws.begin;
  }
  record.AddTransfer(Link::kGpuToCpu, t0, record.NowUs(), moved);
}

void BlockCompute::FromCpu(int micro_batch, DeviceSpan attn, int batch, int local, int rows,
                           bool with_local, Stream& stream, LaneRecord& record) {
  const WorkspaceView ws = WorkspaceOf(micro_batch, batch, local, rows);
  const uint64_t from = with_local ? 0 : ws.begin;
  const double t0 = record.NowUs();
  stream.CopyToDevice(attn.Sub(from, ws.end - from), ws.host[1].subspan(from));
  record.AddTransfer(Link::kCpuToGpu, t0, record.NowUs(), ws.end - from);
}

void BlockCompute::CpuAttention(const Step& step, const BlockRun& run) {
  STRATA_CHECK(step.kind == StepKind::kCpuAttention && delegate_);
  OnCpu(step, run);
}

void BlockCompute::OnCpu(const Step& step, const BlockRun& run) {
  const StepInput& in = run.inputs[static_cast<size_t>(step.micro_batch)];
  const int rows = in.batch * model_.config().num_kv_heads;
  const int local = LocalRows(step, rows);
  if (local == rows) return;  // a short micro-batch whose rows all live on the GPU
  const WorkspaceView ws = WorkspaceOf(step.micro_batch, in.batch, local, rows);
  const DeviceSpan &q_cpu = ws.cpu[0], &out_cpu = ws.cpu[1], &k_cpu = ws.cpu[2],
                   &v_cpu = ws.cpu[3];
  BuildRows(step, BlockOfLayer(step.layer), local, rows, rows, cpu_rows_, cpu_q4_rows_);
  // The CPU writes the keys and values into its rows, and attends them.
  if (p_.cache.format.q4) {
    const KvQ4Step s = Q4StepOf(in);
    const auto table = std::span<const KvQ4Row>(cpu_q4_rows_).subspan(static_cast<size_t>(local));
    cpu_.WriteKvQ4(*cpu_stream_, s, k_cpu, v_cpu, in.start, table, local);
    cpu_.AttendKvQ4(*cpu_stream_, s, q_cpu, in.start, table, local, out_cpu);
  } else {
    WriteRows(*cpu_stream_, cpu_rows_, local, rows, in, k_cpu, v_cpu);
    AttendRows(cpu_, *cpu_stream_, ShapeOf(in), q_cpu, cpu_rows_, local, rows, in.start, out_cpu);
  }
  cpu_stream_->Record(*cpu_done_);
  cpu_done_->HostWait();
}

void BlockCompute::ExactRowsToHost(const Step& step, int block, int rows, Stream& stream) {
  // Rows [gpu, rows) of the slice were written on the device, where the prefill computes; from
  // the next step on the CPU writes and reads them in the host tier.
  const CachePlacement& c = p_.cache;
  const int64_t g = c.rows.gpu;
  if (rows <= g) return;
  const int slice = block * p_.shape.num_micro_batches + step.micro_batch;
  const uint64_t row =
      static_cast<uint64_t>(p_.plan.cache_sink + p_.plan.cache_window) * c.head_dim * 4;
  const uint64_t n = static_cast<uint64_t>(rows - g) * row;
  const uint64_t from =
      (static_cast<uint64_t>(slice) * p_.shape.gpu_batch_size * model_.config().num_kv_heads + g) *
      row;
  const uint64_t to = static_cast<uint64_t>(slice) * c.rows.off_gpu() * row;
  const DeviceSpan device = tiers_.Device(c.exact);
  uint8_t* host = tiers_.At(c.exact_cpu);
  for (int plane = 0; plane < 2; ++plane) {  // keys, then values
    stream.CopyToHost({host + plane * c.exact_cpu.bytes / 2 + to, n},
                      device.Sub(plane * device.bytes() / 2 + from, n));
  }
}

std::pair<DeviceSpan, DeviceSpan> BlockCompute::SmoothingOf(const Step& step, int block,
                                                            int batch) const {
  // Means then scales, each [layers, block's sequences, kv_heads, head_dim].
  const ModelConfig& cfg = model_.config();
  const uint64_t per_sequence = static_cast<uint64_t>(cfg.num_kv_heads) * cfg.head_dim * 4;
  const uint64_t at = (static_cast<uint64_t>(block) * p_.shape.num_micro_batches *
                           p_.shape.gpu_batch_size +
                       static_cast<uint64_t>(step.micro_batch) * p_.shape.gpu_batch_size) *
                      per_sequence;
  const DeviceSpan smoothing = tiers_.Device(p_.cache.smoothing);
  const uint64_t bytes = static_cast<uint64_t>(batch) * per_sequence;
  return {smoothing.Sub(at, bytes, SpanType::kF32),
          smoothing.Sub(smoothing.bytes() / 2 + at, bytes, SpanType::kF32)};
}

void BlockCompute::PrefillOnDense(const StepInput& in, Stream& stream,
                                  const Transformer::AttentionBuffers& buf,
                                  AttentionShape shape) {
  // As the reference's prefill on a compressed cache: the prompt attends to its own keys and
  // values (no earlier slots), laid out [kv_heads, cache_len, head_dim], one sequence at a time
  // (each sequence's attention is computed on its own either way).
  const ModelConfig& cfg = model_.config();
  const uint64_t head = static_cast<uint64_t>(cfg.head_dim) * ActivationBytes();
  const int kvh = cfg.num_kv_heads;
  const uint64_t plane = static_cast<uint64_t>(kvh) * in.cache_len * head;
  const DeviceSpan prefill = tiers_.Device(p_.cache.prefill);
  const DeviceSpan kf = prefill.Sub(0, plane, p_.activation_type);
  const DeviceSpan vf = prefill.Sub(plane, plane, p_.activation_type);
  const uint64_t seq_bytes = static_cast<uint64_t>(in.new_tokens) * cfg.num_heads * head;
  shape.batch = 1;
  shape.max_len = in.cache_len;
  for (int b = 0; b < in.batch; ++b) {
    for (int t = 0; t < in.new_tokens; ++t) {
      for (int h = 0; h < kvh; ++h) {
        const uint64_t src = ((static_cast<uint64_t>(b) * in.new_tokens + t) * kvh + h) * head;
        const uint64_t dst = (static_cast<uint64_t>(h) * in.cache_len + t) * head;
        stream.CopyOnDevice(kf.Sub(dst, head), buf.k.Sub(src, head));
        stream.CopyOnDevice(vf.Sub(dst, head), buf.v.Sub(src, head));
      }
    }
    device_.Attention(stream, shape, buf.q.Sub(b * seq_bytes, seq_bytes), kf, vf,
                      std::span(in.start).subspan(static_cast<size_t>(b), 1),
                      buf.attn.Sub(b * seq_bytes, seq_bytes));
  }
}

DeviceSpan BlockCompute::Logits(const Step& step, Stream& stream, int rows) {
  const ModelConfig& cfg = model_.config();
  const DeviceSpan last =
      RowsOf(tiers_.Device(p_.last_hidden), rows, cfg.hidden_size, p_.activation_type);
  const DeviceSpan logits = RowsOf(tiers_.Device(p_.logits), rows, cfg.vocab_size, SpanType::kF32);
  transformer_.Logits(stream, model_views_[std::max(step.weight_slot, 0)], last, rows, logits);
  return logits;
}

void BlockCompute::Output(const Step& step, BlockRun& run, Stream& stream, DeviceSpan hidden) {
  const ModelConfig& cfg = model_.config();
  const StepInput& in = run.inputs[static_cast<size_t>(step.micro_batch)];
  const uint64_t row_bytes = static_cast<uint64_t>(cfg.hidden_size) * ActivationBytes();
  const DeviceSpan last = tiers_.Device(p_.last_hidden);
  // Hidden row `row` to row `to` of last_hidden, on the stream.
  const auto take = [&](int64_t row, int64_t to, int64_t rows) {
    stream.CopyOnDevice(last.Sub(static_cast<uint64_t>(to) * row_bytes,
                                 static_cast<uint64_t>(rows) * row_bytes),
                        hidden.Sub(static_cast<uint64_t>(row) * row_bytes,
                                   static_cast<uint64_t>(rows) * row_bytes));
  };
  const int first = step.micro_batch * run.gpu_batch_size;
  if (step.token == 0) {
    // Prompt logits: each asking sequence's real rows, gpu_batch_size rows at a time through the
    // same buffers.
    for (int b = 0; b < in.batch; ++b) {
      if (!(*run.requests)[static_cast<size_t>(first + b)].prompt_logits) continue;
      const int start = in.start[static_cast<size_t>(b)];
      for (int t = start; t < in.new_tokens; t += run.gpu_batch_size) {
        const int rows = std::min(run.gpu_batch_size, in.new_tokens - t);
        take(int64_t{b} * in.new_tokens + t, 0, rows);
        const DeviceSpan logits = Logits(step, stream, rows);
        prompt_logits_.resize(static_cast<size_t>(rows) * cfg.vocab_size);
        stream.CopyToHost({reinterpret_cast<uint8_t*>(prompt_logits_.data()), logits.bytes()},
                          logits);
        stream.Record(*output_ready_);
        output_ready_->HostWait();
        run.sequences->AddPromptLogits(first + b, prompt_logits_.data(), rows, cfg.vocab_size);
      }
    }
  }
  // The next token of each sequence: drawn (or, forced, scored) where the logits are, and only
  // the ids come back.
  for (int b = 0; b < in.batch; ++b) take(int64_t{b} * in.new_tokens + in.new_tokens - 1, b, 1);
  const DeviceSpan logits = Logits(step, stream, in.batch);
  run.sequences->Draws(first, in.batch, step.token, specs_, forced_);
  sampled_.resize(static_cast<size_t>(in.batch));
  device_.SampleTokens(stream, logits, cfg.vocab_size, run.sequences->decodable(cfg.vocab_size),
                       specs_, sampled_);
  const bool scored = std::any_of(forced_.begin(), forced_.end(), [](int32_t t) { return t >= 0; });
  if (scored) {
    for (int32_t& t : forced_) t = std::max(t, 0);  // rows drawn, not scored: any id will do
    logprobs_.resize(static_cast<size_t>(in.batch));
    device_.ScoreTokens(stream, logits, cfg.vocab_size, forced_, logprobs_);
  }
  stream.Record(*output_ready_);
  output_ready_->HostWait();
  run.sequences->Take(first, in.batch, step.token, sampled_.data(),
                      scored ? logprobs_.data() : nullptr);
}

}  // namespace strata
