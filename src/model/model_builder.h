// ModelBuilder: the loaders' write access to a Model under construction (internal to
// src/model). The Hugging Face and GGUF loaders fill one in, then Finish() hands the Model out.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "src/model/model.h"

namespace strata {

class ModelBuilder {
 public:
  explicit ModelBuilder(std::string source);

  ModelConfig& config() { return model_->config_; }
  ModelWeights& weights() { return model_->weights_; }
  GgufTokenizerData& gguf_tokenizer() { return model_->gguf_tokenizer_; }
  void set_tokenizer_json_path(std::string p) { model_->tokenizer_json_path_ = std::move(p); }
  void set_chat_template(std::string t) { model_->chat_template_ = std::move(t); }

  // Keeps `file` alive as long as the Model, for the views into it.
  void AddFile(std::unique_ptr<MappedFile> file);
  // Keeps `file`, a store's tensors.bin, alive as AddFile does, and records it as the file
  // Model::StoreOffsetOf() finds views in.
  void AddStoreData(std::unique_ptr<MappedFile> file);
  // A zeroed F32 buffer of `n` elements owned by the Model.
  float* NewBuffer(size_t n);
  // `view`, an F32 view of GGUF tensor bytes of `ggml_type`, recorded as deferred
  // (Model::IsDeferred, ExpandDeferred).
  TensorView Defer(const TensorView& view, uint32_t ggml_type, int unpermute_heads);
  // Expands every deferred tensor into a buffer the Model owns and points its views there
  // (ResourceExhausted, saying what to do instead, when that needs more than `memory_bytes`).
  Status ExpandDeferred(int64_t memory_bytes);
  // Weights made on demand by `maker` (Model::weights_on_demand): reserves `bytes` of address
  // space that faults when touched, for the views' data, and returns its start. Errors:
  // ResourceExhausted when the address space cannot be had. REQUIRES: called at most once.
  Result<const uint8_t*> ReserveOnDemand(uint64_t bytes, TensorBytesMaker maker);
  // Keeps `planes` for the Model's lifetime, for a kQ4 view to point at.
  // REQUIRES: the planes lie in a file added with AddStoreData.
  const Q4Planes* AddQ4Planes(Q4Planes planes);
  // `view` itself when its data is aligned to its element size, else an F32 copy the Model owns
  // (safetensors does not promise alignment).
  TensorView Aligned(const TensorView& view);
  // Corrupt naming `name` and both shapes unless `shape` == `expected`.
  Status CheckShape(const std::string& name, const std::vector<int64_t>& shape,
                    const std::vector<int64_t>& expected) const;

  // REQUIRES: called once, last.
  std::unique_ptr<Model> Finish() { return std::move(model_); }

 private:
  std::unique_ptr<Model> model_;
};

// Loads a Hugging Face model directory; see LoadModel().
Result<std::unique_ptr<Model>> LoadHfModel(const std::string& dir);
// Loads a GGUF file of architecture llama, expanding every tensor to F32 within `expand_memory`
// bytes (or, without it, deferring those that need it: LoadOptions); see LoadModel().
Result<std::unique_ptr<Model>> LoadGgufModel(const std::string& path,
                                             std::optional<int64_t> expand_memory);

}  // namespace strata
