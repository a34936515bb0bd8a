// Model: a loaded model — its config, its weights as tensor views, and what its file says about
// its tokenizer and chat template. Loading memory-maps the files; F32/F16/BF16 tensors are views
// into the maps, quantized GGUF tensors are expanded to F32 buffers the Model owns (or left as
// stored until asked for: LoadOptions), and the 4-bit matrices of a strata store stay as stored
// (DType::kQ4 views of their planes in the map).
#pragma once

#include <array>
#include <cstdint>
#include <cstdlib>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/core/status.h"
#include "src/core/tensor.h"
#include "src/model/model_config.h"

namespace strata {

class MappedFile;

// One transformer block. Absent tensors (TensorView::present() == false) are not used.
// Linear weights are [out_features, in_features], exactly as Hugging Face stores them; GGUF
// attention q/k weights are un-permuted at load so that both sources use the same RoPE layout
// (rotate-half, as transformers' LlamaRotaryEmbedding). T is TensorView for the model's own
// (host) views, and the engine's device views for where placement put them
// (src/runtime/transformer.h).
template <class T>
struct LayerTensors {
  T attn_norm, attn_norm_bias;  // [hidden]
  T wq, wk, wv, wo;             // [heads*head_dim, hidden], [kv*head_dim, hidden] x2, [hidden, heads*head_dim]
  T bq, bk, bv, bo;             // OPT, and Llama with attention_bias
  T q_norm, k_norm;             // [head_dim]: per-head RMSNorm of q and k (Qwen3)
  T mlp_norm, mlp_norm_bias;    // [hidden]
  T w_gate;                     // [intermediate, hidden], gated MLP only
  T b_gate;                     // [intermediate], Llama with mlp_bias only
  T w_up;                       // [intermediate, hidden] (OPT fc1)
  T w_down;                     // [hidden, intermediate] (OPT fc2)
  T b_up, b_down;               // OPT, and Llama with mlp_bias
};
using LayerWeights = LayerTensors<TensorView>;

// Every member of a LayerTensors<T>, in declaration order.
template <class T>
constexpr std::array<T LayerTensors<T>::*, 20> kLayerTensorFields = {
    &LayerTensors<T>::attn_norm, &LayerTensors<T>::attn_norm_bias, &LayerTensors<T>::wq,
    &LayerTensors<T>::wk,        &LayerTensors<T>::wv,             &LayerTensors<T>::wo,
    &LayerTensors<T>::bq,        &LayerTensors<T>::bk,             &LayerTensors<T>::bv,
    &LayerTensors<T>::bo,        &LayerTensors<T>::q_norm,         &LayerTensors<T>::k_norm,
    &LayerTensors<T>::mlp_norm,  &LayerTensors<T>::mlp_norm_bias,  &LayerTensors<T>::w_gate,
    &LayerTensors<T>::b_gate,    &LayerTensors<T>::w_up,           &LayerTensors<T>::w_down,
    &LayerTensors<T>::b_up,      &LayerTensors<T>::b_down};
static_assert(sizeof(LayerWeights) == kLayerTensorFields<TensorView>.size() * sizeof(TensorView),
              "kLayerTensorFields lists every member");

// The member of `to` that `field` names in a LayerWeights.
template <class T>
T& SameField(LayerTensors<T>& to, TensorView LayerWeights::*field) {
  for (size_t i = 0; i < kLayerTensorFields<T>.size(); ++i) {
    if (kLayerTensorFields<TensorView>[i] == field) return to.*kLayerTensorFields<T>[i];
  }
  std::abort();  // every member is listed (static_assert above)
}

struct ModelWeights {
  TensorView token_embedding;     // [vocab, hidden]
  TensorView position_embedding;  // [max_positions + offset, hidden], OPT only
  TensorView final_norm, final_norm_bias;
  TensorView lm_head;             // [vocab, hidden]; the token embedding when tied
  std::vector<LayerWeights> layers;
};

// The tokenizer as a GGUF file describes it (tokenizer.ggml.*), as plain data; empty `tokens`
// means the model came without one (a Hugging Face directory carries tokenizer.json instead).
struct GgufTokenizerData {
  std::string model;                 // tokenizer.ggml.model, e.g. "gpt2", "llama"
  std::string pre;                   // tokenizer.ggml.pre, e.g. "smollm", "llama-bpe"
  std::vector<std::string> tokens;
  std::vector<int32_t> token_types;  // 1 normal, 2 unknown, 3 control, 4 user-defined, 6 byte
  std::vector<std::string> merges;   // "a b"
  std::vector<float> scores;         // tokenizer.ggml.scores (SentencePiece vocabularies)
  bool add_space_prefix = true;      // tokenizer.ggml.add_space_prefix
  int bos_token_id = -1;
  int eos_token_id = -1;
  int eot_token_id = -1;
  int pad_token_id = -1;
  // tokenizer.ggml.add_bos_token; absent, the tokenizer takes llama.cpp's default for the
  // vocabulary (Tokenizer::FromGgufVocab).
  std::optional<bool> add_bos;
};

// Makes bytes [offset, offset + bytes) of `view`, a tensor of a model whose weights are made on
// demand, as stored, at `dst` (Model::ReadTensorBytes). Must be safe to call from any thread.
using TensorBytesMaker =
    std::function<void(const TensorView& view, uint64_t offset, uint64_t bytes, void* dst)>;

class Model {
 public:
  ~Model();
  Model(const Model&) = delete;
  Model& operator=(const Model&) = delete;

  const ModelConfig& config() const { return config_; }
  const ModelWeights& weights() const { return weights_; }
  // Full path of tokenizer.json for Hugging Face models that ship one; empty otherwise (GGUF).
  const std::string& tokenizer_json_path() const { return tokenizer_json_path_; }
  const GgufTokenizerData& gguf_tokenizer() const { return gguf_tokenizer_; }
  // The Jinja chat template, from tokenizer_config.json or GGUF metadata; empty when none.
  const std::string& chat_template() const { return chat_template_; }
  // Bytes of weight data the forward pass reads (all tensors, as stored in memory; planes for
  // kQ4 ones).
  uint64_t weight_bytes() const;
  // True when some matrices are kQ4 (a store written by `strata convert --compress-weight`): such
  // a model runs with 4-bit weights only (plan.compress_weight).
  bool has_q4_weights() const { return !q4_planes_.empty(); }
  // Elements per group of the model's 4-bit weights (kernels/cpu/weight_q4.h): a 4-bit store's
  // own; 32 for a GGUF file with Q4_0, Q4_1 or Q4_K matrices, whose blocks become the groups as
  // they are (GgufQ4Planes); else FlexGen's 64.
  int q4_group() const;
  // When `view`, a matrix of this model, holds a GGUF file's Q4_0, Q4_1 or Q4_K blocks: writes
  // them as planes in groups of 32 (src/model/gguf_q4.h) and returns true. False for any other,
  // and when the planes cannot hold them (fp16 overflow; GgufQ4Planes): quantize it instead.
  bool GgufQ4Planes(const TensorView& view, uint8_t* codes, uint16_t* params) const;
  const std::string& source() const { return source_; }
  // The tensors.bin of the strata store the model was loaded from; empty for other sources.
  const std::string& store_data_path() const { return store_data_path_; }
  // The offset in store_data_path() of the bytes at `data` when they are the store's own bytes
  // (store tensors are views into its map; checksums were verified at load); -1 otherwise (other
  // sources, and the data of kQ4 views: their Q4Planes point into the map).
  int64_t StoreOffsetOf(const void* data) const;
  // True when `view` is a GGUF tensor that LoadOptions::expand_gguf = false left as stored: an F32
  // view of its full shape whose data are the file's bytes, not floats (only ExpandDeferred()
  // reads them). Such a model is for shapes and conversion only, never for running.
  bool IsDeferred(const TensorView& view) const;
  // The values of such a view into `dst` (view.numel() floats).
  Status ExpandDeferred(const TensorView& view, float* dst) const;
  // Writes bytes [offset, offset + bytes) of `view`, a dense (F32, F16, BF16) tensor of this
  // model, as stored, to `dst`: a copy of its data, or for weights made on demand, made now.
  // Thread-safe. REQUIRES: offset + bytes <= view.bytes(), both multiples of its element size.
  void ReadTensorBytes(const TensorView& view, uint64_t offset, uint64_t bytes, void* dst) const;
  // True when the weights exist only through ReadTensorBytes (MakeSyntheticModel's
  // SyntheticWeights::kOnDemand): the views' data are distinct addresses in a reserved range that
  // faults when read, so only code that reads weights through ReadTensorBytes runs such a model
  // (the offloading engine, which copies them to their homes so: src/memory/weight_homes.h).
  bool weights_on_demand() const { return on_demand_ != nullptr; }

 private:
  friend class ModelBuilder;
  Model() = default;
  ModelConfig config_;
  ModelWeights weights_;
  std::string tokenizer_json_path_;
  GgufTokenizerData gguf_tokenizer_;
  std::string chat_template_;
  std::string source_;
  std::string store_data_path_;
  const MappedFile* store_data_ = nullptr;  // one of files_
  std::vector<std::unique_ptr<MappedFile>> files_;
  std::vector<std::vector<float>> owned_;      // expanded quantized GGUF tensors
  std::deque<Q4Planes> q4_planes_;             // what kQ4 views point at: planes in the store's map
  struct Deferred {
    uint32_t ggml_type;
    int unpermute_heads;
    uint64_t f32_bytes;  // once expanded
  };
  std::map<const void*, Deferred> deferred_;  // GGUF tensors not expanded, by their bytes
  struct GgufQ4 {
    const uint8_t* blocks;  // in the file's map
    uint32_t ggml_type;
    int unpermute_heads;
  };
  std::map<const void*, GgufQ4> gguf_q4_;  // GGUF tensors of 4-bit blocks, by their views' data
  TensorBytesMaker on_demand_;  // weights made on demand: their bytes,
  void* reserved_ = nullptr;    // and the inaccessible range their views point into
  size_t reserved_bytes_ = 0;
};

struct LoadOptions {
  // False: GGUF tensors that need expanding (quantized ones, and q/k weights to un-permute) stay
  // as stored, and Model::ExpandDeferred() expands one when asked. `strata plan` needs only the
  // shapes and `strata convert` writes a tensor at a time, so neither holds a large quantized
  // model in fp32 (a 70B Q4_K_M file is 40 GB; expanded, 280 GB).
  bool expand_gguf = true;
  // The memory expanding may take; a GGUF file whose expansion needs more is refused with a
  // message that says to convert it. -1: the host's available memory (MemAvailable).
  int64_t expand_memory_bytes = -1;
};

// Loads a model from `path`: a Hugging Face directory (config.json, model.safetensors or
// model.safetensors.index.json + shards, tokenizer.json), a strata store written by
// `strata convert` (src/model/store.h), or a GGUF v3 file. Every offset and size
// in a header is bounds-checked; a missing path, truncated file, unknown dtype or missing tensor
// returns a Status whose message names the file and what to do.
Result<std::unique_ptr<Model>> LoadModel(const std::string& path, const LoadOptions& options = {});

}  // namespace strata
