#include "policy/weight_layout.h"

#include <algorithm>

namespace strata {

std::vector<WeightLayer> BuildWeightLayers(const ModelSpec& m) {
  const int64_t h = m.hidden_size, f = m.intermediate_size;
  const int64_t q_out = int64_t{m.num_heads} * m.head_dim;
  const int64_t kv_out = int64_t{m.num_kv_heads} * m.head_dim;
  auto vec = [](std::string name, int64_t n) { return WeightTensor{std::move(name), 1, n, false}; };
  auto mat = [&](std::string name, int64_t rows, int64_t cols) {
    return WeightTensor{std::move(name), rows, cols, true, m.q4_group};
  };
  auto add_norm = [&](std::vector<WeightTensor>& t, const std::string& name) {
    t.push_back(vec(name + ".weight", h));
    if (m.norm_bias) t.push_back(vec(name + ".bias", h));
  };
  auto add_linear = [&](std::vector<WeightTensor>& t, const std::string& name, int64_t out,
                        int64_t in, bool bias) {
    t.push_back(mat(name + ".weight", out, in));
    if (bias) t.push_back(vec(name + ".bias", out));
  };
  const bool qkv_bias = m.linear_bias || m.qkv_bias;

  WeightLayer input{LayerKind::kInputEmbedding, 1, {mat("embed_tokens", m.vocab_size, h)}};
  if (m.position_embedding_rows > 0) {
    input.tensors.push_back(mat("embed_positions", m.position_embedding_rows, h));
  }

  WeightLayer block{LayerKind::kTransformer, m.num_layers, {}};
  add_norm(block.tensors, "attention_norm");
  add_linear(block.tensors, "q_proj", q_out, h, qkv_bias);
  if (m.qk_norm) block.tensors.push_back(vec("q_norm.weight", m.head_dim));
  add_linear(block.tensors, "k_proj", kv_out, h, qkv_bias);
  if (m.qk_norm) block.tensors.push_back(vec("k_norm.weight", m.head_dim));
  add_linear(block.tensors, "v_proj", kv_out, h, qkv_bias);
  add_linear(block.tensors, "o_proj", h, q_out, m.linear_bias);
  add_norm(block.tensors, "mlp_norm");
  if (m.gated_mlp) {
    add_linear(block.tensors, "gate_proj", f, h, m.linear_bias);
    add_linear(block.tensors, "up_proj", f, h, m.linear_bias);
    add_linear(block.tensors, "down_proj", h, f, m.linear_bias);
  } else {
    add_linear(block.tensors, "fc1", f, h, m.linear_bias);
    add_linear(block.tensors, "fc2", h, f, m.linear_bias);
  }

  WeightLayer output{LayerKind::kOutput, 1, {}};
  add_norm(output.tensors, "final_norm");
  if (!m.tie_word_embeddings) output.tensors.push_back(mat("lm_head", m.vocab_size, h));
  return {input, block, output};
}

int64_t Q4RowBytes(int64_t cols, int group) { return cols / 2 + cols / group * 4; }

bool StoredQ4(const WeightTensor& t, bool compress) {
  return compress && t.matrix && t.cols > 0 && t.cols % t.q4_group == 0;
}

int64_t StoredRowBytes(const WeightTensor& t, bool compress, int dtype_bytes) {
  return StoredQ4(t, compress) ? Q4RowBytes(t.cols, t.q4_group) : t.cols * dtype_bytes;
}

int64_t MatrixElements(const WeightLayer& layer) {
  int64_t n = 0;
  for (const WeightTensor& t : layer.tensors) n += t.matrix ? t.rows * t.cols : 0;
  return n;
}

int64_t StoredLayerBytes(const WeightLayer& layer, bool compress, int dtype_bytes) {
  int64_t n = 0;
  for (const WeightTensor& t : layer.tensors)
    n += t.rows * StoredRowBytes(t, compress, dtype_bytes);
  return n;
}

namespace {

// For each tensor, the rows that lie before the row boundary nearest to `percent` of `total`
// bytes along the concatenated row sequence.
std::vector<int64_t> RowsBefore(const std::vector<int64_t>& rows,
                                const std::vector<int64_t>& row_bytes, int64_t total, int percent) {
  std::vector<int64_t> before(rows.size(), 0);
  // Work in units of bytes * 100 so that the target is exact.
  const int64_t target = total * percent;
  int64_t acc = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t tensor = rows[i] * row_bytes[i] * 100;
    if (acc + tensor <= target) {
      before[i] = rows[i];
      acc += tensor;
      continue;
    }
    const int64_t unit = row_bytes[i] * 100;
    before[i] = std::min(rows[i], (target - acc + unit / 2) / unit);
    break;
  }
  return before;
}

}  // namespace

LayerRows RowsOf(const WeightLayer& layer, bool compress, int dtype_bytes) {
  LayerRows r;
  for (const WeightTensor& t : layer.tensors) {
    r.rows.push_back(t.rows);
    r.row_bytes.push_back(StoredRowBytes(t, compress, dtype_bytes));
    r.total += r.rows.back() * r.row_bytes.back();
  }
  return r;
}

int64_t SplitGpuBytes(const LayerRows& r, int gpu_percent) {
  const std::vector<int64_t> gpu = RowsBefore(r.rows, r.row_bytes, r.total, gpu_percent);
  int64_t bytes = 0;
  for (size_t i = 0; i < gpu.size(); ++i) {
    if (gpu[i] > 0 && gpu[i] < r.rows[i]) bytes += gpu[i] * r.row_bytes[i];
  }
  return bytes;
}

LayerPlacement PlaceLayerByRows(const WeightLayer& layer, int gpu_percent, int cpu_percent,
                                bool compress, int dtype_bytes) {
  const LayerRows r = RowsOf(layer, compress, dtype_bytes);
  const std::vector<int64_t> gpu = RowsBefore(r.rows, r.row_bytes, r.total, gpu_percent);
  const std::vector<int64_t> gpu_cpu =
      RowsBefore(r.rows, r.row_bytes, r.total, gpu_percent + cpu_percent);
  LayerPlacement p{layer.kind, layer.count, {}, 0, 0, 0};
  for (size_t i = 0; i < r.rows.size(); ++i) {
    TensorPlacement t{layer.tensors[i].name, r.row_bytes[i], gpu[i], gpu_cpu[i] - gpu[i],
                      r.rows[i] - gpu_cpu[i]};
    p.gpu_bytes += t.gpu_rows * t.row_bytes;
    p.cpu_bytes += t.cpu_rows * t.row_bytes;
    p.disk_bytes += t.disk_rows * t.row_bytes;
    p.tensors.push_back(std::move(t));
  }
  return p;
}

}  // namespace strata
