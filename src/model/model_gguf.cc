// LoadGgufModel: a GGUF file (or its shards) of architecture llama, qwen2, qwen3 or phi3 to a Model
// with every tensor in F32, or deferred until asked for. qwen2 is llama's layout with biases on the
// q, k and v projections; qwen3 is llama's with a per-head RMSNorm of q and k (attn_q_norm,
// attn_k_norm); phi3 is llama's with q, k and v fused in attn_qkv and the gate and up projections
// in ffn_up (gate rows first). llama.cpp's converter leaves the q/k rows of all but llama as
// Hugging Face stores them (it permutes llama's for ggml's interleaved RoPE; strata un-permutes
// those back).
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <set>

#include "src/io/mapped_file.h"
#include "src/model/gguf.h"
#include "src/model/gguf_dequant.h"
#include "src/model/gguf_shards.h"
#include "src/model/model_builder.h"

namespace strata {
namespace {

using Shape = std::vector<int64_t>;

class GgufModelReader {
 public:
  GgufModelReader(const GgufShards& gguf, ModelBuilder& b) : gguf_(gguf), b_(b) {}

  Status ReadConfig() {
    const std::string* arch = String("general.architecture");
    if (arch == nullptr) return Corrupt("metadata 'general.architecture' is missing");
    if (*arch != "llama" && *arch != "qwen2" && *arch != "qwen3" && *arch != "phi3") {
      return Status::Unsupported(gguf_.path() + ": GGUF architecture '" + *arch +
                                 "' is not supported (strata reads llama, qwen2, qwen3 and phi3)");
    }
    arch_ = *arch;
    ModelConfig& c = b_.config();
    c.arch = Architecture::kLlama;
    c.attention_bias = arch_ == "qwen2";
    c.qk_norm = arch_ == "qwen3";
    STRATA_RETURN_IF_ERROR(Int(Key("block_count"), std::nullopt, &c.num_layers));
    STRATA_RETURN_IF_ERROR(Int(Key("context_length"), std::nullopt, &c.max_position_embeddings));
    STRATA_RETURN_IF_ERROR(Int(Key("embedding_length"), std::nullopt, &c.hidden_size));
    STRATA_RETURN_IF_ERROR(Int(Key("feed_forward_length"), std::nullopt, &c.intermediate_size));
    STRATA_RETURN_IF_ERROR(Int(Key("attention.head_count"), std::nullopt, &c.num_heads));
    STRATA_RETURN_IF_ERROR(Int(Key("attention.head_count_kv"), c.num_heads, &c.num_kv_heads));
    const int default_head_dim = c.num_heads > 0 ? c.hidden_size / c.num_heads : 0;
    STRATA_RETURN_IF_ERROR(Int(Key("attention.key_length"), default_head_dim, &c.head_dim));
    int value_dim = 0, rope_dim = 0;
    STRATA_RETURN_IF_ERROR(Int(Key("attention.value_length"), c.head_dim, &value_dim));
    STRATA_RETURN_IF_ERROR(Int(Key("rope.dimension_count"), c.head_dim, &rope_dim));
    if (value_dim != c.head_dim || rope_dim != c.head_dim) {
      return Status::Unsupported(gguf_.path() +
                                 ": value_length or rope.dimension_count differs "
                                 "from the head dimension (partial RoPE is not supported)");
    }
    const std::vector<std::string>* tokens = Strings("tokenizer.ggml.tokens");
    const int tokens_count =
        tokens ? static_cast<int>(std::min<size_t>(tokens->size(), INT32_MAX)) : 0;
    STRATA_RETURN_IF_ERROR(Int(Key("vocab_size"), tokens_count, &c.vocab_size));
    c.norm = NormKind::kRmsNorm;
    c.norm_eps = static_cast<float>(Float(Key("attention.layer_norm_rms_epsilon"), 1e-5));
    c.activation = Activation::kSilu;
    c.gated_mlp = true;
    c.use_rope = true;
    c.rope_theta = static_cast<float>(Float(Key("rope.freq_base"), 10000.0));
    STRATA_RETURN_IF_ERROR(ReadRopeScaling(c.head_dim, &c.rope_scaling));
    c.max_position_embeddings = ScaledContext(c);
    int window = 0;
    STRATA_RETURN_IF_ERROR(Int(Key("attention.sliding_window"), 0, &window));
    CapContextAtWindow(window, gguf_.path(), &c);
    c.tie_word_embeddings = gguf_.FindTensor("output.weight") == nullptr;
    STRATA_RETURN_IF_ERROR(Int("tokenizer.ggml.bos_token_id", -1, &c.bos_token_id));
    STRATA_RETURN_IF_ERROR(Int("tokenizer.ggml.eos_token_id", -1, &c.eos_token_id));
    STRATA_RETURN_IF_ERROR(Int("tokenizer.ggml.padding_token_id", -1, &c.pad_token_id));
    if (c.pad_token_id >= c.vocab_size) c.pad_token_id = -1;
    return c.Validate().WithContext(gguf_.path());
  }

  Status ReadTokenizer() {
    GgufTokenizerData& t = b_.gguf_tokenizer();
    if (const std::string* s = String("tokenizer.ggml.model")) t.model = *s;
    if (const std::string* s = String("tokenizer.ggml.pre")) t.pre = *s;
    if (const std::vector<std::string>* s = Strings("tokenizer.ggml.tokens")) t.tokens = *s;
    if (const std::vector<std::string>* s = Strings("tokenizer.ggml.merges")) t.merges = *s;
    STRATA_RETURN_IF_ERROR(
        PerToken("tokenizer.ggml.scores", &GgufValue::FloatAt, t.tokens.size(), &t.scores));
    if (const GgufValue* v = gguf_.Find("tokenizer.ggml.add_space_prefix"); v && v->AsBool()) {
      t.add_space_prefix = *v->AsBool();
    }
    STRATA_RETURN_IF_ERROR(
        PerToken("tokenizer.ggml.token_type", &GgufValue::IntAt, t.tokens.size(), &t.token_types));
    if (t.tokens.size() > static_cast<size_t>(b_.config().vocab_size)) {
      return Corrupt("the tokenizer has more tokens than the model's vocabulary");
    }
    const int n = static_cast<int>(t.tokens.size());
    const char* id_keys[] = {"tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
                             "tokenizer.ggml.eot_token_id", "tokenizer.ggml.padding_token_id"};
    int* ids[] = {&t.bos_token_id, &t.eos_token_id, &t.eot_token_id, &t.pad_token_id};
    for (int k = 0; k < 4; ++k) {
      STRATA_RETURN_IF_ERROR(Int(id_keys[k], -1, ids[k]));
      if (*ids[k] < -1 || *ids[k] >= n) return Corrupt(std::string(id_keys[k]) + " out of range");
    }
    const GgufValue* add_bos = gguf_.Find("tokenizer.ggml.add_bos_token");
    if (add_bos && add_bos->AsBool()) t.add_bos = *add_bos->AsBool();
    if (const std::string* s = String("tokenizer.chat_template")) b_.set_chat_template(*s);
    return Status::Ok();
  }

  Status ReadWeights() {
    const ModelConfig& c = b_.config();
    const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                  kv = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.intermediate_size;
    ModelWeights& w = b_.weights();
    const bool permuted = arch_ == "llama", fused = arch_ == "phi3";
    STRATA_RETURN_IF_ERROR(Expand("token_embd.weight", {c.vocab_size, h}, 0, &w.token_embedding));
    w.layers.resize(static_cast<size_t>(c.num_layers));
    for (int i = 0; i < c.num_layers; ++i) {
      LayerWeights& l = w.layers[static_cast<size_t>(i)];
      const std::string p = "blk." + std::to_string(i) + ".";
      STRATA_RETURN_IF_ERROR(Expand(p + "attn_norm.weight", {h}, 0, &l.attn_norm));
      if (fused) {
        const Shape qkv = {q + 2 * kv, h};
        STRATA_RETURN_IF_ERROR(ExpandRows(p + "attn_qkv.weight", qkv, 0, q, &l.wq));
        STRATA_RETURN_IF_ERROR(ExpandRows(p + "attn_qkv.weight", qkv, q, kv, &l.wk));
        STRATA_RETURN_IF_ERROR(ExpandRows(p + "attn_qkv.weight", qkv, q + kv, kv, &l.wv));
      } else {
        STRATA_RETURN_IF_ERROR(
            Expand(p + "attn_q.weight", {q, h}, permuted ? c.num_heads : 0, &l.wq));
        STRATA_RETURN_IF_ERROR(
            Expand(p + "attn_k.weight", {kv, h}, permuted ? c.num_kv_heads : 0, &l.wk));
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_v.weight", {kv, h}, 0, &l.wv));
      }
      if (c.attention_bias) {
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_q.bias", {q}, 0, &l.bq));
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_k.bias", {kv}, 0, &l.bk));
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_v.bias", {kv}, 0, &l.bv));
      }
      if (c.qk_norm) {
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_q_norm.weight", {c.head_dim}, 0, &l.q_norm));
        STRATA_RETURN_IF_ERROR(Expand(p + "attn_k_norm.weight", {c.head_dim}, 0, &l.k_norm));
      }
      STRATA_RETURN_IF_ERROR(Expand(p + "attn_output.weight", {h, q}, 0, &l.wo));
      STRATA_RETURN_IF_ERROR(Expand(p + "ffn_norm.weight", {h}, 0, &l.mlp_norm));
      if (fused) {
        STRATA_RETURN_IF_ERROR(ExpandRows(p + "ffn_up.weight", {2 * ffn, h}, 0, ffn, &l.w_gate));
        STRATA_RETURN_IF_ERROR(ExpandRows(p + "ffn_up.weight", {2 * ffn, h}, ffn, ffn, &l.w_up));
      } else {
        STRATA_RETURN_IF_ERROR(Expand(p + "ffn_gate.weight", {ffn, h}, 0, &l.w_gate));
        STRATA_RETURN_IF_ERROR(Expand(p + "ffn_up.weight", {ffn, h}, 0, &l.w_up));
      }
      STRATA_RETURN_IF_ERROR(Expand(p + "ffn_down.weight", {h, ffn}, 0, &l.w_down));
    }
    STRATA_RETURN_IF_ERROR(Expand("output_norm.weight", {h}, 0, &w.final_norm));
    if (c.tie_word_embeddings) {
      w.lm_head = w.token_embedding;
    } else {
      STRATA_RETURN_IF_ERROR(Expand("output.weight", {c.vocab_size, h}, 0, &w.lm_head));
    }
    // As llama.cpp does, refuse tensors the forward would ignore (biases, extra norms): running
    // without them would silently compute something else.
    for (const GgufTensorInfo* info : gguf_.tensors()) {
      if (used_.count(info->name) == 0) {
        return Status::Unsupported(gguf_.path() + ": tensor '" + info->name +
                                   "' is not part of the " + arch_ + " layout strata runs");
      }
    }
    return Status::Ok();
  }

 private:
  Status Corrupt(const std::string& what) const {
    return Status::Corrupt(gguf_.path() + ": " + what);
  }

  // The metadata key `suffix` of the file's architecture, e.g. "qwen2.block_count".
  std::string Key(const char* suffix) const { return arch_ + "." + suffix; }

  const std::string* String(const std::string& key) const {
    const GgufValue* v = gguf_.Find(key);
    return v ? v->AsString() : nullptr;
  }

  const std::vector<std::string>* Strings(const std::string& key) const {
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr || v->type() != GgufValueType::kArray ||
        v->element_type() != GgufValueType::kString) {
      return nullptr;
    }
    return &v->strings();
  }

  // The numeric array `key`, one element per token, read with `at` (GgufValue::IntAt or FloatAt)
  // into `out`; nothing when the key is absent.
  template <typename T, typename Element>
  Status PerToken(const char* key, std::optional<Element> (GgufValue::*at)(uint64_t) const,
                  size_t tokens, std::vector<T>* out) const {
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr) return Status::Ok();
    if (v->type() != GgufValueType::kArray || v->size() != tokens) {
      return Corrupt(std::string(key) + " is not an array as long as the token list");
    }
    out->reserve(tokens);
    for (uint64_t i = 0; i < v->size(); ++i) {
      const std::optional<Element> e = (v->*at)(i);
      if (!e) return Corrupt(std::string(key) + " holds an element of the wrong type");
      out->push_back(static_cast<T>(*e));
    }
    return Status::Ok();
  }

  // An int-valued key; `fallback` when absent (Corrupt when absent without one, or not an int).
  Status Int(const std::string& key, std::optional<int> fallback, int* out) const {
    const GgufValue* v = gguf_.Find(key);
    if (v == nullptr && fallback) {
      *out = *fallback;
      return Status::Ok();
    }
    const std::optional<int64_t> i = v ? v->AsInt() : std::nullopt;
    if (!i || *i < std::numeric_limits<int>::min() || *i > std::numeric_limits<int>::max()) {
      return Corrupt("metadata '" + key + "' is missing or not an integer");
    }
    *out = static_cast<int>(*i);
    return Status::Ok();
  }

  double Float(const std::string& key, double fallback) const {
    const GgufValue* v = gguf_.Find(key);
    const std::optional<double> f = v ? v->AsFloat() : std::nullopt;
    return f.value_or(fallback);
  }

  // Linear or YaRN scaling from the metadata, or per-dimension frequency factors from the tensor
  // rope_freqs.weight (Llama 3.1 and later: llama.cpp's converter turns their llama3 scaling into
  // head_dim / 2 divisors of the inverse frequencies, F32).
  Status ReadRopeScaling(int head_dim, RopeScaling* out) {
    if (gguf_.FindTensor("rope_factors_long.weight") != nullptr) {
      return Status::Unsupported(gguf_.path() +
                                 ": LongRoPE (rope_factors_long/short, the 128k Phi-3 models) is "
                                 "not supported");
    }
    const std::string* type = String(Key("rope.scaling.type"));
    double factor = Float(Key("rope.scaling.factor"), Float(Key("rope.scale_linear"), 1.0));
    if (type != nullptr && *type == "yarn") return ReadYarn(factor, out);
    if (type != nullptr && *type != "none" && *type != "linear") {
      return Status::Unsupported(gguf_.path() + ": rope scaling type '" + *type +
                                 "' is not supported (strata implements linear and yarn)");
    }
    const bool linear =
        (type != nullptr && *type == "linear") || (type == nullptr && factor != 1.0);
    if (const GgufTensorInfo* freqs = gguf_.FindTensor("rope_freqs.weight")) {
      used_.insert(freqs->name);
      if (linear) {
        return Status::Unsupported(gguf_.path() +
                                   ": both linear rope scaling and rope_freqs.weight are given");
      }
      if (freqs->type != static_cast<uint32_t>(GgmlType::kF32) || freqs->ne.size() != 1 ||
          freqs->ne[0] != head_dim / 2) {
        return Corrupt("rope_freqs.weight is not " + std::to_string(head_dim / 2) +
                       " F32 values (head_dim / 2)");
      }
      out->kind = RopeScalingKind::kFactors;
      out->freq_factors.resize(static_cast<size_t>(head_dim / 2));
      std::memcpy(out->freq_factors.data(), gguf_.TensorData(*freqs), freqs->bytes);
    } else if (linear) {
      out->kind = RopeScalingKind::kLinear;
      out->factor = static_cast<float>(factor);
    }
    return Status::Ok();
  }

  // YaRN as llama.cpp's converter writes it from a Hugging Face rope_scaling (factor, the original
  // context, beta_fast and beta_slow when given), with transformers' defaults for the rest. The
  // keys that change llama.cpp's attention factor or ramp in ways Hugging Face configs do not
  // describe are refused rather than guessed at.
  Status ReadYarn(double factor, RopeScaling* out) {
    for (const char* key : {"rope.scaling.attn_factor", "rope.scaling.yarn_attn_factor",
                            "rope.scaling.yarn_ext_factor", "rope.scaling.yarn_log_multiplier"}) {
      if (gguf_.Find(Key(key)) != nullptr) {
        return Status::Unsupported(gguf_.path() + ": YaRN with '" + Key(key) +
                                   "' is not supported (strata reads factor, "
                                   "original_context_length, yarn_beta_fast and yarn_beta_slow)");
      }
    }
    int original = 0;
    STRATA_RETURN_IF_ERROR(
        Int(Key("rope.scaling.original_context_length"), std::nullopt, &original));
    if (!(factor > 0) || original <= 0) {
      return Corrupt("YaRN needs a positive rope.scaling.factor and original_context_length");
    }
    out->kind = RopeScalingKind::kYarn;
    out->factor = static_cast<float>(factor);
    out->original_max_position_embeddings = original;
    out->attention_factor = static_cast<float>(factor <= 1 ? 1.0 : 0.1 * std::log(factor) + 1.0);
    out->beta_fast = static_cast<float>(Float(Key("rope.scaling.yarn_beta_fast"), 32.0));
    out->beta_slow = static_cast<float>(Float(Key("rope.scaling.yarn_beta_slow"), 1.0));
    return Status::Ok();
  }

  // Makes `out` an F32 view of tensor `name` with outermost-first `shape`: the file's bytes when
  // they are F32 in place, else a deferred view (ModelBuilder::Defer) that a positive
  // `unpermute_heads` un-permutes (llama.cpp's q/k row permutation) when it is expanded.
  Status Expand(const std::string& name, const Shape& shape, int unpermute_heads, TensorView* out) {
    return ExpandRows(name, shape, 0, shape[0], out, unpermute_heads);
  }

  // Expand() of rows [first, first + rows) of the tensor `name` of shape `shape`, {total rows,
  // ...}: one part of a fused projection. A row of any ggml type is a whole number of blocks, so
  // the part is the file's bytes from its first row on.
  Status ExpandRows(const std::string& name, const Shape& shape, int64_t first, int64_t rows,
                    TensorView* out, int unpermute_heads = 0) {
    const GgufTensorInfo* info = gguf_.FindTensor(name);
    if (info == nullptr) {
      return Status::NotFound(gguf_.path() + ": tensor '" + name + "' is missing");
    }
    STRATA_RETURN_IF_ERROR(b_.CheckShape(name, info->Shape(), shape));
    used_.insert(name);
    if (!GgufCanDequantize(info->type)) {
      return Status::Unsupported(gguf_.path() + ": tensor '" + name + "' has type " +
                                 GgmlTypeName(info->type) + "; strata expands " +
                                 GgufDequantizableTypes() + " (use e.g. a Q4_K_M or Q8_0 file)");
    }
    Shape part = shape;
    part[0] = rows;
    const uint64_t row_bytes = shape[0] > 0 ? info->bytes / static_cast<uint64_t>(shape[0]) : 0;
    const uint8_t* data = gguf_.TensorData(*info) + static_cast<uint64_t>(first) * row_bytes;
    const TensorView raw{DType::kF32, part, data};
    if (info->type == static_cast<uint32_t>(GgmlType::kF32) && unpermute_heads == 0) {
      *out = b_.Aligned(raw);
      return Status::Ok();
    }
    *out = b_.Defer(raw, info->type, unpermute_heads);
    return Status::Ok();
  }

  const GgufShards& gguf_;
  ModelBuilder& b_;
  std::string arch_;            // general.architecture: "llama", "qwen2", "qwen3" or "phi3"
  std::set<std::string> used_;  // tensors Expand() has consumed
};

}  // namespace

Result<std::unique_ptr<Model>> LoadGgufModel(const std::string& path,
                                             std::optional<int64_t> expand_memory) {
  STRATA_ASSIGN_OR_RETURN(GgufShards gguf, GgufShards::Open(path));
  ModelBuilder b(path);
  GgufModelReader reader(gguf, b);
  STRATA_RETURN_IF_ERROR(reader.ReadConfig());
  STRATA_RETURN_IF_ERROR(reader.ReadTokenizer());
  STRATA_RETURN_IF_ERROR(reader.ReadWeights());
  if (expand_memory) STRATA_RETURN_IF_ERROR(b.ExpandDeferred(*expand_memory));
  for (std::unique_ptr<MappedFile>& file : gguf.TakeFiles()) b.AddFile(std::move(file));
  return b.Finish();
}

}  // namespace strata
