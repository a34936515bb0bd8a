#include "policy/cost_model.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "policy/memory_accounting.h"
#include "policy/weight_layout.h"

namespace strata {
namespace {

constexpr double kGiga = 1e9;
constexpr double kTera = 1e12;

// Per-token byte sizes and per-layer weight sizes the forms are built from.
struct Sizes {
  double nb, block, prompt, decode_context;
  double heads, head_dim;
  double layer_params, layer_stored, layer_read;     // transformer layer
  double attention_stored;                           // its attention part (up to the MLP's norm)
  double attention_share;                            // the attention part's share of its GEMMs
  double output_params, output_stored, output_read;  // output projection (+ final norm)
  // Bytes of the input tables' rows a token step gathers, and the disk bytes of reading them
  // (a 4 KiB page at least per row): the prefill's and a decode step's.
  double input_prefill, input_prefill_disk, input_decode, input_decode_disk;
  double kv_token, kv_token_fp16, act_token, head_vector;
  double layer_fp16, output_fp16;  // fp16-equivalent bytes of the matrices (4-bit expansion)
  // 4 KiB pages a decode step writes per sequence for a disk-resident cache: the executor writes
  // the page holding the new slot in each (KV head, plane) row, and rows shorter than a page
  // (max_len slots of a small plane) share their pages.
  double kv_pages_per_sequence;
};

constexpr double kPageBytes = 4096;

Sizes SizesOf(const ModelSpec& m, const Workload& w, const Plan& p) {
  const std::vector<WeightLayer> layers = BuildWeightLayers(m);
  const int dtype = m.weight_dtype_bytes;
  Sizes s{};
  s.nb = p.num_gpu_batches;
  s.block = double(p.gpu_batch_size) * s.nb;
  s.prompt = w.prompt_len;
  s.decode_context = w.prompt_len + w.gen_len / 2.0;
  s.heads = m.num_heads;
  s.head_dim = m.head_dim;
  s.layer_params = MatrixElements(layers[1]);
  s.layer_stored = StoredLayerBytes(layers[1], p.compress_weight, dtype);
  s.attention_stored = 0;
  double attention_params = 0;
  for (const WeightTensor& t : layers[1].tensors) {
    if (t.name == "mlp_norm.weight") break;  // the executor's MLP part starts at its norm
    s.attention_stored += t.rows * StoredRowBytes(t, p.compress_weight, dtype);
    if (t.matrix) attention_params += double(t.rows) * t.cols;
  }
  s.attention_share = attention_params / s.layer_params;
  s.layer_read = s.layer_params * dtype;
  s.output_params = double(m.vocab_size) * m.hidden_size;
  s.output_stored = StoredLayerBytes(layers[2], p.compress_weight, dtype);
  if (m.tie_word_embeddings) {
    s.output_stored +=
        m.vocab_size * StoredRowBytes(layers[0].tensors[0], p.compress_weight, dtype);
  }
  s.output_read = s.output_params * dtype;
  for (const WeightTensor& t : layers[0].tensors) {
    const bool positions = t.name == "embed_positions";
    const double row = StoredRowBytes(t, p.compress_weight, dtype);
    const double prefill = std::min<double>(t.rows, positions ? s.prompt : s.block * s.prompt);
    const double decode = std::min<double>(t.rows, s.block);
    s.input_prefill += prefill * row;
    s.input_prefill_disk += prefill * std::max(row, kPageBytes);
    s.input_decode += decode * row;
    s.input_decode_disk += decode * std::max(row, kPageBytes);
  }
  s.kv_token = double(m.num_kv_heads) * KvHeadTokenBytes(m, p);
  s.kv_token_fp16 = 2.0 * m.num_kv_heads * m.head_dim * 2;
  const double max_len = w.max_len();
  s.kv_pages_per_sequence = 0;
  for (int64_t slot_bytes : KvHeadTokenPlaneBytes(m.head_dim, m.activation_dtype_bytes, p)) {
    if (slot_bytes > 0) {
      s.kv_pages_per_sequence +=
          double(m.num_kv_heads) * std::min(1.0, max_len * double(slot_bytes) / kPageBytes);
    }
  }
  s.layer_fp16 = s.layer_params * 2;
  s.output_fp16 = s.output_params * 2;
  s.act_token = double(m.hidden_size) * m.activation_dtype_bytes;
  s.head_vector = s.heads * s.head_dim * m.activation_dtype_bytes;
  return s;
}

// A layer step's GEMMs, micro-batch after micro-batch, each bounded below by the weight bytes it
// reads from device memory (a roofline per micro-batch): every micro-batch reads the layer's
// (expanded) weights, except that weights which fit in the device's last-level cache are read
// from memory by the first micro-batch only. `flops_s`: the arithmetic of all micro-batches.
double GemmSeconds(const Sizes& s, double flops_s, double weight_bytes, const HardwareSpec& hw) {
  const double memory_s = weight_bytes / (hw.gpu_memory_gbps * kGiga);
  const double per_batch_s = flops_s / s.nb;
  if (hw.gpu_cache_bytes > 0 && weight_bytes <= hw.gpu_cache_bytes) {
    return std::max(per_batch_s, memory_s) + (s.nb - 1) * per_batch_s;
  }
  return s.nb * std::max(per_batch_s, memory_s);
}

// Adds bytes that live on the CPU or disk to a copy link: those on the CPU (fraction cpu of a
// family) at cpu_s seconds per byte, those on disk at disk_s.
void OffGpuCopy(LinearForm& f, Fraction cpu, Fraction disk, double bytes, double cpu_s,
                double disk_s) {
  f.Add(cpu, bytes * cpu_s).Add(disk, bytes * disk_s);
}

// Adds bytes that live on the CPU or disk (fractions cpu and disk of a family) to a link.
void OffGpu(LinearForm& f, Fraction cpu, Fraction disk, double bytes_per_s_unit) {
  f.Add(cpu, bytes_per_s_unit).Add(disk, bytes_per_s_unit);
}

WriteWaitForm WriteWait(const Sizes& s, const HardwareSpec& hw,
                        std::vector<WriteWaitForm::Part> parts) {
  return {std::move(parts), s.nb, hw.disk_write_wait_bytes / (hw.disk_read_gbps * kGiga)};
}

// One part of a transformer layer as the executor runs it (attention, or MLP): the load lane's
// time for its weights and for the inputs of all its micro-batches, on each link the load lane
// drives, and the compute lane's: its 4-bit weights' expansion (in the first micro-batch's step)
// and the work of all its micro-batches.
struct PartForms {
  LinearForm weights_disk, weights_h2d;
  LinearForm inputs_disk, inputs_h2d;
  LinearForm expansion, batches;

  LinearForm compute() const { return expansion + batches; }
};

// The weight slots' chains (see cost_model.h), on the disk reads and on the h2d copies.
std::vector<LinearForm> SlotChains(const PartForms& attention, const PartForms& mlp, double nb) {
  // Micro-batches after the second, whose inputs load after the next part's weights.
  const double late = std::max(0.0, nb - 2) / nb;
  std::vector<LinearForm> chains;
  for (bool disk : {true, false}) {
    const auto weights = [&](const PartForms& part) {
      return disk ? part.weights_disk : part.weights_h2d;
    };
    const auto first_inputs = [&](const PartForms& part) {
      return (disk ? part.inputs_disk : part.inputs_h2d) * (1 / nb);
    };
    chains.push_back(weights(attention) + first_inputs(attention) + mlp.batches * late +
                     attention.compute());
    chains.push_back(weights(mlp) + first_inputs(mlp) + attention.batches * late + mlp.compute());
    chains.push_back(weights(attention) + weights(mlp) + first_inputs(attention) +
                     first_inputs(mlp) + (attention.batches + mlp.batches) * late);
  }
  return chains;
}

LayerForms TransformerForms(const Sizes& s, const Plan& p, const HardwareSpec& hw, bool prefill) {
  const double tokens = prefill ? s.prompt : 1;  // new tokens per sequence in this step
  const double h2d = 1 / (hw.h2d_gbps * kGiga), d2h = 1 / (hw.d2h_gbps * kGiga);
  // The emulated device's copies of CPU-resident bytes beside GEMMs that stream the layer's
  // weights from memory. (Disk-resident bytes leave the disk ring while its next reads are in
  // flight, at the disk's pace.)
  const bool beside = hw.copy_beside_gemm_gbps > 0 &&
                      (hw.gpu_cache_bytes <= 0 || s.layer_read > hw.gpu_cache_bytes);
  const double h2d_cpu = beside ? 1 / (hw.copy_beside_gemm_gbps * kGiga) : h2d;
  const double d2h_cpu = beside ? 1 / (hw.copy_beside_gemm_gbps * kGiga) : d2h;
  const double rd = 1 / (hw.disk_read_gbps * kGiga), wr = 1 / (hw.disk_write_gbps * kGiga);
  const double acts = s.block * tokens * s.act_token;  // hidden states in and out of the layer
  const double new_kv = s.block * tokens * s.kv_token;
  LayerForms f;

  // Weights: fetched once per layer step for all micro-batches.
  OffGpuCopy(f.h2d_s, kWeightCpu, kWeightDisk, s.layer_stored, h2d_cpu, h2d);
  f.disk_read_s.Add(kWeightDisk, s.layer_stored * rd);
  // Activations: each micro-batch's input comes in and its output goes home.
  OffGpuCopy(f.h2d_s, kActivationCpu, kActivationDisk, acts, h2d_cpu, h2d);
  OffGpuCopy(f.d2h_s, kActivationCpu, kActivationDisk, acts, d2h_cpu, d2h);
  f.disk_read_s.Add(kActivationDisk, acts * rd);
  f.disk_write_s.Add(kActivationDisk, acts * wr);
  // New K and V go to their home.
  OffGpuCopy(f.d2h_s, kCacheCpu, kCacheDisk, new_kv, d2h_cpu, d2h);
  if (prefill || hw.disk_page_write_gbps <= 0) {
    f.disk_write_s.Add(kCacheDisk, new_kv * wr);
  } else {
    f.disk_write_s.Add(kCacheDisk, s.block * s.kv_pages_per_sequence * kPageBytes /
                                       (hw.disk_page_write_gbps * kGiga));
  }

  // The attention and MLP parts each read their weights and their micro-batches' activations.
  const WriteWaitForm::Part attention{
      LinearForm{}.Add(kWeightDisk, s.attention_stored * rd).Add(kActivationDisk, acts * rd), true,
      true};
  const WriteWaitForm::Part mlp{LinearForm{}
                                    .Add(kWeightDisk, (s.layer_stored - s.attention_stored) * rd)
                                    .Add(kActivationDisk, acts * rd),
                                true, false};
  f.disk_write_wait_s = WriteWait(s, hw, {attention, mlp});

  // Each GEMM is one micro-batch's: its rows are that micro-batch's new tokens.
  const double tflops = hw.GemmTflopsAt(p.gpu_batch_size * tokens, prefill) * kTera;
  f.gpu_gemm_s.constant =
      GemmSeconds(s, 2 * s.block * tokens * s.layer_params / tflops, s.layer_read, hw);
  const double dequant = 1 / (hw.gpu_dequant_gbps * kGiga);
  const double weight_dequant_s = p.compress_weight ? s.layer_fp16 * dequant : 0;
  const double cache_quant_s = p.compress_cache ? s.block * tokens * s.kv_token_fp16 * dequant : 0;
  f.gpu_dequant_s.constant = weight_dequant_s + cache_quant_s;

  // The parts' weights; each part loads its micro-batches' hidden states.
  PartForms a, m;
  a.weights_disk.Add(kWeightDisk, s.attention_stored * rd);
  OffGpuCopy(a.weights_h2d, kWeightCpu, kWeightDisk, s.attention_stored, h2d_cpu, h2d);
  m.weights_disk.Add(kWeightDisk, (s.layer_stored - s.attention_stored) * rd);
  OffGpuCopy(m.weights_h2d, kWeightCpu, kWeightDisk, s.layer_stored - s.attention_stored, h2d_cpu,
             h2d);
  for (PartForms* part : {&a, &m}) {
    part->inputs_disk.Add(kActivationDisk, acts * rd);
    OffGpuCopy(part->inputs_h2d, kActivationCpu, kActivationDisk, acts, h2d_cpu, h2d);
  }
  a.expansion.constant = weight_dequant_s * s.attention_share;
  m.expansion.constant = weight_dequant_s * (1 - s.attention_share);
  a.batches.constant = f.gpu_gemm_s.constant * s.attention_share + cache_quant_s;
  m.batches.constant = f.gpu_gemm_s.constant * (1 - s.attention_share);

  if (prefill) {
    f.gpu_attention_s.constant = 4 * s.block * s.prompt * s.prompt * s.heads * s.head_dim /
                                 (hw.gpu_attention_prefill_tflops * kTera);
  } else {
    const double cache = s.block * s.decode_context * s.kv_token;  // bytes attended per step
    const double gpu_rate =
        (p.compress_cache ? hw.gpu_attention_q4_gbps : hw.gpu_attention_gbps) * kGiga;
    f.disk_read_s.Add(kCacheDisk, cache * rd);
    a.inputs_disk.Add(kCacheDisk, cache * rd);
    f.disk_write_wait_s.parts[0].disk_read_s.Add(kCacheDisk, cache * rd);
    if (p.cpu_attention) {
      const double cpu_rate =
          std::min(p.compress_cache ? hw.cpu_attention_q4_gbps : hw.cpu_attention_gbps,
                   hw.cpu_memory_gbps) *
          kGiga;
      f.gpu_attention_s.Add(kCacheGpu, cache / gpu_rate);
      OffGpu(f.cpu_attention_s, kCacheCpu, kCacheDisk, cache / cpu_rate);
      // Queries go to the CPU and attention outputs come back for the CPU-attended rows.
      OffGpuCopy(f.d2h_s, kCacheCpu, kCacheDisk, s.block * s.head_vector, d2h_cpu, d2h);
      OffGpuCopy(f.h2d_s, kCacheCpu, kCacheDisk, s.block * s.head_vector, h2d_cpu, h2d);
      OffGpuCopy(a.inputs_h2d, kCacheCpu, kCacheDisk, s.block * s.head_vector, h2d_cpu, h2d);
    } else {
      f.gpu_attention_s.constant = cache / gpu_rate;
      OffGpuCopy(f.h2d_s, kCacheCpu, kCacheDisk, cache, h2d_cpu, h2d);
      OffGpuCopy(a.inputs_h2d, kCacheCpu, kCacheDisk, cache, h2d_cpu, h2d);
    }
  }
  a.batches += f.gpu_attention_s + f.cpu_attention_s;
  if (p.overlap) f.slot_chains = SlotChains(a, m, s.nb);
  return f;
}

LayerForms OutputForms(const Sizes& s, const Plan& p, const HardwareSpec& hw) {
  LayerForms f;
  OffGpu(f.h2d_s, kWeightCpu, kWeightDisk, s.output_stored / (hw.h2d_gbps * kGiga));
  f.disk_read_s.Add(kWeightDisk, s.output_stored / (hw.disk_read_gbps * kGiga));
  // Logits for the last position of each sequence: per micro-batch a GEMM with one row per
  // sequence, at the prefill as in decode.
  const double tflops = hw.GemmTflopsAt(p.gpu_batch_size, /*prefill=*/false) * kTera;
  f.gpu_gemm_s.constant = GemmSeconds(s, 2 * s.block * s.output_params / tflops, s.output_read, hw);
  if (p.compress_weight) f.gpu_dequant_s.constant = s.output_fp16 / (hw.gpu_dequant_gbps * kGiga);
  // Its weights load before it computes, and the next token step's first attention layer, whose
  // weights take the same slot, loads only after it (cost_model.h).
  if (p.overlap) {
    const LinearForm compute = f.gpu_gemm_s + f.gpu_dequant_s;
    f.slot_chains = {f.disk_read_s + compute, f.h2d_s + compute};
  }
  return f;
}

// The input embedding: only the trip of its gathered rows that live off the GPU.
LayerForms InputForms(const Sizes& s, const HardwareSpec& hw, bool prefill) {
  LayerForms f;
  const double bytes = prefill ? s.input_prefill : s.input_decode;
  const double disk = prefill ? s.input_prefill_disk : s.input_decode_disk;
  OffGpu(f.h2d_s, kWeightCpu, kWeightDisk, bytes / (hw.h2d_gbps * kGiga));
  f.disk_read_s.Add(kWeightDisk, disk / (hw.disk_read_gbps * kGiga));
  // Its output, the embedded hidden states, goes to the activations' home.
  f.disk_write_wait_s = WriteWait(s, hw, {{f.disk_read_s, true, false}});
  return f;
}

}  // namespace

double LayerTimes::step_s(bool overlap) const {
  if (!overlap) return disk_lane_s() + h2d_lane_s() + d2h_s + compute_lane_s();
  return std::max({disk_lane_s(), h2d_lane_s(), d2h_s, compute_lane_s(), slot_chain_s});
}

std::string LayerTimes::Bottleneck() const {
  std::pair<double, std::string> lanes[] = {{compute_lane_s(), "compute"},
                                            {h2d_lane_s(), "h2d"},
                                            {d2h_s, "d2h"},
                                            {disk_lane_s(), "disk"},
                                            {slot_chain_s, "weight slots"}};
  const auto& top =
      *std::max_element(std::begin(lanes), std::end(lanes),
                        [](const auto& a, const auto& b) { return a.first < b.first; });
  if (top.second != "compute") return top.second;
  std::pair<double, const char*> units[] = {{gpu_gemm_s, "GPU GEMM"},
                                            {gpu_attention_s, "GPU attention"},
                                            {cpu_attention_s, "CPU attention"},
                                            {gpu_dequant_s, "4-bit expansion"}};
  const auto& unit =
      *std::max_element(std::begin(units), std::end(units),
                        [](const auto& a, const auto& b) { return a.first < b.first; });
  return std::string("compute (") + unit.second + ")";
}

double SplitCopyForm::Eval(const Fractions& x) const {
  const int gpu = static_cast<int>(std::lround(x[kWeightGpu] * 100));
  double bytes = 0;
  for (const LayerRows& layer : layers) bytes += double(SplitGpuBytes(layer, gpu));
  return bytes * seconds_per_byte;
}

double WriteWaitForm::Eval(const Fractions& x) const {
  double total = 0;
  for (const Part& part : parts) {
    const int writes = (part.stores_activations && x[kActivationDisk] > 0 ? 1 : 0) +
                       (part.stores_cache && x[kCacheDisk] > 0 ? 1 : 0);
    total += writes * micro_batches * std::min(wait_s, part.disk_read_s.Eval(x) / 2);
  }
  return total;
}

LayerTimes LayerForms::Eval(const Fractions& x) const {
  double chain_s = 0;
  if (x[kWeightGpu] < 1) {  // otherwise no weights load, and there are no slots
    for (const LinearForm& chain : slot_chains) chain_s = std::max(chain_s, chain.Eval(x));
  }
  return {disk_read_s.Eval(x),
          h2d_s.Eval(x),
          d2h_s.Eval(x),
          disk_write_s.Eval(x),
          gpu_gemm_s.Eval(x),
          gpu_attention_s.Eval(x),
          cpu_attention_s.Eval(x),
          gpu_dequant_s.Eval(x),
          disk_write_wait_s.Eval(x),
          d2d_s.Eval(x),
          chain_s};
}

CostForms BuildCostForms(const ModelSpec& model, const Workload& workload, const Plan& plan,
                         const HardwareSpec& hardware) {
  const Sizes s = SizesOf(model, workload, plan);
  CostForms forms{TransformerForms(s, plan, hardware, /*prefill=*/true),
                  TransformerForms(s, plan, hardware, /*prefill=*/false),
                  OutputForms(s, plan, hardware),
                  {},
                  InputForms(s, hardware, /*prefill=*/true),
                  InputForms(s, hardware, /*prefill=*/false)};
  std::vector<LayerRows> rows;
  for (const WeightLayer& layer : BuildWeightLayers(model)) {
    rows.push_back(RowsOf(layer, plan.compress_weight, model.weight_dtype_bytes));
  }
  const auto split = [&](std::vector<LayerRows> placed) {
    return SplitCopyForm{std::move(placed), 1 / (hardware.D2dGbps() * kGiga)};
  };
  forms.layer_prefill.d2d_s = forms.layer_decode.d2d_s = split({rows[1]});
  forms.output_prefill.d2d_s =
      model.tie_word_embeddings ? split({rows[2], rows[0]}) : split({rows[2]});
  forms.output_decode = forms.output_prefill;
  return forms;
}

CostEstimate CombineCost(const CostForms& forms, const Fractions& x, const ModelSpec& model,
                         const Workload& workload, const Plan& plan) {
  auto phase = [&](const LayerForms& input, const LayerForms& layer, const LayerForms& output,
                   double steps) {
    PhaseCost c;
    c.input = input.Eval(x);
    c.layer = layer.Eval(x);
    c.output = output.Eval(x);
    c.token_step_s = c.input.step_s(plan.overlap) +
                     model.num_layers * c.layer.step_s(plan.overlap) +
                     c.output.step_s(plan.overlap);
    c.total_s = steps * c.token_step_s;
    return c;
  };
  CostEstimate e;
  e.prefill = phase(forms.input_prefill, forms.layer_prefill, forms.output_prefill, 1);
  e.decode =
      phase(forms.input_decode, forms.layer_decode, forms.output_decode, workload.gen_len - 1);
  e.block_s = e.prefill.total_s + e.decode.total_s;
  const int64_t block = plan.block_size();
  const int64_t prompts = workload.num_prompts > 0 ? workload.num_prompts : block;
  e.num_blocks = (prompts + block - 1) / block;
  e.total_s = e.num_blocks * e.block_s;
  e.throughput_tokens_per_s = double(prompts) * workload.gen_len / e.total_s;
  e.prefill_tokens_per_s = double(block) * workload.prompt_len / e.prefill.total_s;
  if (workload.gen_len > 1) {
    e.decode_tokens_per_s = double(block) * (workload.gen_len - 1) / e.decode.total_s;
  }
  return e;
}

CostEstimate EstimateCost(const ModelSpec& model, const Workload& workload, const Plan& plan,
                          const HardwareSpec& hardware) {
  return CombineCost(BuildCostForms(model, workload, plan, hardware), FractionsOf(plan), model,
                     workload, plan);
}

}  // namespace strata
