// LoadHfModel: a Hugging Face directory (config.json, safetensors, tokenizer files) to a Model.
#include <filesystem>

#include "src/io/mapped_file.h"
#include "src/model/hf_config.h"
#include "src/model/json_file.h"
#include "src/model/model_builder.h"
#include "src/model/safetensors.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using Shape = std::vector<int64_t>;

// Looks tensors up by their Hugging Face names, with or without the leading "model.".
class HfTensors {
 public:
  HfTensors(const SafetensorsCheckpoint& ckpt, ModelBuilder& builder, std::string dir)
      : ckpt_(ckpt), builder_(builder), dir_(std::move(dir)) {}

  // Fills `out` with the tensor `name` of shape `shape`; NotFound when it is missing.
  Status Get(const std::string& name, const Shape& shape, TensorView* out) {
    const TensorView* v = Find(name);
    if (v == nullptr) return Missing(name);
    STRATA_RETURN_IF_ERROR(builder_.CheckShape(name, v->shape, shape));
    *out = builder_.Aligned(*v);
    return Status::Ok();
  }

  // Rows [first, first + rows) of the tensor `name` of shape {total rows, cols}: one part of a
  // fused projection (Phi-3's qkv_proj and gate_up_proj).
  Status GetRows(const std::string& name, const Shape& shape, int64_t first, int64_t rows,
                 TensorView* out) {
    const TensorView* v = Find(name);
    if (v == nullptr) return Missing(name);
    STRATA_RETURN_IF_ERROR(builder_.CheckShape(name, v->shape, shape));
    TensorView part = *v;
    part.shape = {rows, shape[1]};
    part.data = static_cast<const uint8_t*>(v->data) + first * shape[1] * DTypeBytes(v->dtype);
    *out = builder_.Aligned(part);
    return Status::Ok();
  }

  // True when the checkpoint has tensor `name`.
  bool Has(const std::string& name) const { return Find(name) != nullptr; }

  // Like Get(), but only when `present`; otherwise leaves `out` absent.
  Status GetIf(bool present, const std::string& name, const Shape& shape, TensorView* out) {
    return present ? Get(name, shape, out) : Status::Ok();
  }

  // The output projection: the token embedding when tied, else lm_head.weight.
  Status LmHead(const ModelConfig& c, const TensorView& embedding, TensorView* out) {
    if (c.tie_word_embeddings) {
      *out = embedding;
      return Status::Ok();
    }
    const TensorView* v = ckpt_.Find("lm_head.weight");
    if (v == nullptr) {
      return Status::NotFound(dir_ +
                              ": tensor 'lm_head.weight' is missing and config.json "
                              "does not tie it to the embedding");
    }
    STRATA_RETURN_IF_ERROR(
        builder_.CheckShape("lm_head.weight", v->shape, {c.vocab_size, c.hidden_size}));
    *out = builder_.Aligned(*v);
    return Status::Ok();
  }

 private:
  const TensorView* Find(const std::string& name) const {
    const TensorView* v = ckpt_.Find("model." + name);
    return v != nullptr ? v : ckpt_.Find(name);
  }

  Status Missing(const std::string& name) const {
    return Status::NotFound(dir_ + ": tensor 'model." + name + "' is missing from the checkpoint");
  }

  const SafetensorsCheckpoint& ckpt_;
  ModelBuilder& builder_;
  std::string dir_;
};

Status LoadLlamaWeights(const ModelConfig& c, HfTensors& t, ModelWeights* w) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, ffn = c.intermediate_size,
                d = c.head_dim;
  const bool bias = c.attention_bias;
  STRATA_RETURN_IF_ERROR(t.Get("embed_tokens.weight", {c.vocab_size, h}, &w->token_embedding));
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    STRATA_RETURN_IF_ERROR(t.Get(p + "input_layernorm.weight", {h}, &l.attn_norm));
    if (const std::string qkv = p + "self_attn.qkv_proj.weight"; t.Has(qkv)) {  // Phi-3
      const Shape fused = {q + 2 * kv, h};
      STRATA_RETURN_IF_ERROR(t.GetRows(qkv, fused, 0, q, &l.wq));
      STRATA_RETURN_IF_ERROR(t.GetRows(qkv, fused, q, kv, &l.wk));
      STRATA_RETURN_IF_ERROR(t.GetRows(qkv, fused, q + kv, kv, &l.wv));
    } else {
      STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.q_proj.weight", {q, h}, &l.wq));
      STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.k_proj.weight", {kv, h}, &l.wk));
      STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.v_proj.weight", {kv, h}, &l.wv));
    }
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.o_proj.weight", {h, q}, &l.wo));
    STRATA_RETURN_IF_ERROR(t.GetIf(bias, p + "self_attn.q_proj.bias", {q}, &l.bq));
    STRATA_RETURN_IF_ERROR(t.GetIf(bias, p + "self_attn.k_proj.bias", {kv}, &l.bk));
    STRATA_RETURN_IF_ERROR(t.GetIf(bias, p + "self_attn.v_proj.bias", {kv}, &l.bv));
    STRATA_RETURN_IF_ERROR(
        t.GetIf(c.attention_output_bias, p + "self_attn.o_proj.bias", {h}, &l.bo));
    STRATA_RETURN_IF_ERROR(t.GetIf(c.qk_norm, p + "self_attn.q_norm.weight", {d}, &l.q_norm));
    STRATA_RETURN_IF_ERROR(t.GetIf(c.qk_norm, p + "self_attn.k_norm.weight", {d}, &l.k_norm));
    STRATA_RETURN_IF_ERROR(t.Get(p + "post_attention_layernorm.weight", {h}, &l.mlp_norm));
    if (const std::string gate_up = p + "mlp.gate_up_proj.weight"; t.Has(gate_up)) {  // Phi-3
      STRATA_RETURN_IF_ERROR(t.GetRows(gate_up, {2 * ffn, h}, 0, ffn, &l.w_gate));
      STRATA_RETURN_IF_ERROR(t.GetRows(gate_up, {2 * ffn, h}, ffn, ffn, &l.w_up));
    } else {
      STRATA_RETURN_IF_ERROR(t.Get(p + "mlp.gate_proj.weight", {ffn, h}, &l.w_gate));
      STRATA_RETURN_IF_ERROR(t.Get(p + "mlp.up_proj.weight", {ffn, h}, &l.w_up));
    }
    STRATA_RETURN_IF_ERROR(t.Get(p + "mlp.down_proj.weight", {h, ffn}, &l.w_down));
    STRATA_RETURN_IF_ERROR(t.GetIf(c.mlp_bias, p + "mlp.gate_proj.bias", {ffn}, &l.b_gate));
    STRATA_RETURN_IF_ERROR(t.GetIf(c.mlp_bias, p + "mlp.up_proj.bias", {ffn}, &l.b_up));
    STRATA_RETURN_IF_ERROR(t.GetIf(c.mlp_bias, p + "mlp.down_proj.bias", {h}, &l.b_down));
  }
  STRATA_RETURN_IF_ERROR(t.Get("norm.weight", {h}, &w->final_norm));
  return t.LmHead(c, w->token_embedding, &w->lm_head);
}

Status LoadOptWeights(const ModelConfig& c, HfTensors& t, ModelWeights* w) {
  const int64_t h = c.hidden_size, ffn = c.intermediate_size;
  const bool ab = c.attention_bias, mb = c.mlp_bias;
  STRATA_RETURN_IF_ERROR(
      t.Get("decoder.embed_tokens.weight", {c.vocab_size, h}, &w->token_embedding));
  STRATA_RETURN_IF_ERROR(t.Get("decoder.embed_positions.weight",
                               {int64_t{c.max_position_embeddings} + c.position_offset, h},
                               &w->position_embedding));
  w->layers.resize(static_cast<size_t>(c.num_layers));
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "decoder.layers." + std::to_string(i) + ".";
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn_layer_norm.weight", {h}, &l.attn_norm));
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn_layer_norm.bias", {h}, &l.attn_norm_bias));
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.q_proj.weight", {h, h}, &l.wq));
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.k_proj.weight", {h, h}, &l.wk));
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.v_proj.weight", {h, h}, &l.wv));
    STRATA_RETURN_IF_ERROR(t.Get(p + "self_attn.out_proj.weight", {h, h}, &l.wo));
    STRATA_RETURN_IF_ERROR(t.GetIf(ab, p + "self_attn.q_proj.bias", {h}, &l.bq));
    STRATA_RETURN_IF_ERROR(t.GetIf(ab, p + "self_attn.k_proj.bias", {h}, &l.bk));
    STRATA_RETURN_IF_ERROR(t.GetIf(ab, p + "self_attn.v_proj.bias", {h}, &l.bv));
    STRATA_RETURN_IF_ERROR(
        t.GetIf(c.attention_output_bias, p + "self_attn.out_proj.bias", {h}, &l.bo));
    STRATA_RETURN_IF_ERROR(t.Get(p + "final_layer_norm.weight", {h}, &l.mlp_norm));
    STRATA_RETURN_IF_ERROR(t.Get(p + "final_layer_norm.bias", {h}, &l.mlp_norm_bias));
    STRATA_RETURN_IF_ERROR(t.Get(p + "fc1.weight", {ffn, h}, &l.w_up));
    STRATA_RETURN_IF_ERROR(t.Get(p + "fc2.weight", {h, ffn}, &l.w_down));
    STRATA_RETURN_IF_ERROR(t.GetIf(mb, p + "fc1.bias", {ffn}, &l.b_up));
    STRATA_RETURN_IF_ERROR(t.GetIf(mb, p + "fc2.bias", {h}, &l.b_down));
  }
  STRATA_RETURN_IF_ERROR(t.Get("decoder.final_layer_norm.weight", {h}, &w->final_norm));
  STRATA_RETURN_IF_ERROR(t.Get("decoder.final_layer_norm.bias", {h}, &w->final_norm_bias));
  return t.LmHead(c, w->token_embedding, &w->lm_head);
}

// The chat template of tokenizer_config.json (a string, or a list of {name, template} where the
// one named "default" wins), else of chat_template.jinja; empty when there is none.
Result<std::string> ReadChatTemplate(const fs::path& dir) {
  std::error_code ec;
  const fs::path config_path = dir / "tokenizer_config.json";
  if (fs::exists(config_path, ec)) {
    STRATA_ASSIGN_OR_RETURN(nlohmann::json config, ReadJsonFile(config_path.string()));
    if (std::optional<std::string> t = JsonString(config, "chat_template")) return *t;
    auto it = config.is_object() ? config.find("chat_template") : config.end();
    if (it != config.end() && it->is_array()) {
      std::string chosen;
      for (const nlohmann::json& entry : *it) {
        const std::optional<std::string> t = JsonString(entry, "template");
        if (t && (chosen.empty() || JsonString(entry, "name") == "default")) chosen = *t;
      }
      if (!chosen.empty()) return chosen;
    }
  }
  const fs::path jinja = dir / "chat_template.jinja";
  if (!fs::exists(jinja, ec)) return std::string();
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> f, MappedFile::Open(jinja.string()));
  return std::string(reinterpret_cast<const char*>(f->data()), f->size());
}

}  // namespace

Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir) {
  const fs::path d(dir);
  ModelBuilder b(dir);
  STRATA_ASSIGN_OR_RETURN(b.config(), ReadHfConfig((d / "config.json").string()));
  STRATA_ASSIGN_OR_RETURN(SafetensorsCheckpoint ckpt, SafetensorsCheckpoint::OpenDirectory(dir));
  HfTensors tensors(ckpt, b, dir);
  const ModelConfig& c = b.config();
  STRATA_RETURN_IF_ERROR(c.arch == Architecture::kOpt ? LoadOptWeights(c, tensors, &b.weights())
                                                      : LoadLlamaWeights(c, tensors, &b.weights()));
  for (auto& file : ckpt.TakeFiles()) b.AddFile(std::move(file));
  std::error_code ec;
  if (fs::exists(d / "tokenizer.json", ec))
    b.set_tokenizer_json_path((d / "tokenizer.json").string());
  STRATA_ASSIGN_OR_RETURN(std::string chat_template, ReadChatTemplate(d));
  b.set_chat_template(std::move(chat_template));
  return b.Finish();
}

}  // namespace strata
