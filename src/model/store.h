// The strata store: a converted model in one directory, self-contained and ready for direct I/O.
//   manifest.json   format and version, the ModelConfig, the tokenizer data, the chat template,
//                   and the tensor table: name, dtype, shape, encoding (raw, or q4 with its
//                   q4_group), extents with checksums
//   tensors.bin     every tensor's bytes as an extent at a 4 KiB-aligned offset, zero-padded to
//                   a multiple of 4 KiB, so the disk tier reads any extent with O_DIRECT
//   tokenizer.json  a copy of the source's Hugging Face tokenizer, when it had one
// `strata convert` writes it (store_writer.h). LoadStore() reads it into a Model; the disk tier
// opens it with Store::Open() and reads extents from data_path() through a FileEnv.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/dtype.h"
#include "src/core/status.h"
#include "src/io/aligned_buffer.h"
#include "src/model/model.h"

namespace strata {

inline constexpr char kStoreManifestName[] = "manifest.json";
inline constexpr char kStoreDataName[] = "tensors.bin";
inline constexpr char kStoreTokenizerName[] = "tokenizer.json";
// A Hugging Face directory's SentencePiece model, next to its tokenizer.json; a store keeps it
// under the same name beside its copy of tokenizer.json.
inline constexpr char kSentencePieceModelName[] = "tokenizer.model";
inline constexpr char kStoreFormat[] = "strata-store";
inline constexpr int kStoreVersion = 1;
enum class StoreEncoding {
  kRaw,  // elements of `dtype`, row-major
  kQ4,   // group-wise 4-bit, the layout of kernels/cpu/weight_q4.h, quantized from `dtype`
};

// Where a tensor's bytes lie in tensors.bin.
struct StoreExtent {
  uint64_t offset = 0;    // a multiple of kDirectIoAlignment
  uint64_t bytes = 0;     // the payload; the extent occupies padded_bytes(), zero after bytes
  uint64_t checksum = 0;  // Checksum64 (src/io/checksum.h) of the payload

  uint64_t padded_bytes() const { return AlignUp(bytes); }
};

struct StoreTensor {
  std::string name;  // a WeightSlots() name: "token_embedding", "layers.3.wq", ...
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;  // as the Model holds it; [out_features, in_features] for Linear
  StoreEncoding encoding = StoreEncoding::kRaw;
  StoreExtent data;       // kRaw: the elements; kQ4: codes [rows, cols / 2] bytes
  StoreExtent q4_params;  // kQ4 only: fp16 bits {scale, minimum} [rows, cols / q4_group, 2]
  int q4_group = 64;      // kQ4 only: elements per group (manifest key "q4_group", default 64)
};

// A store's manifest, opened. Immutable after Open(); thread-safe.
class Store {
 public:
  // Reads and checks `dir`/manifest.json. NotFound when there is none, Corrupt (naming the file
  // and the field) when it is malformed or an extent lies outside tensors.bin, Unsupported for
  // another format version.
  static Result<std::unique_ptr<Store>> Open(const std::string& dir);

  const std::string& dir() const { return dir_; }
  // The path of tensors.bin, for FileEnv::Open.
  std::string data_path() const;
  const ModelConfig& config() const { return config_; }
  // Every stored tensor, in file order.
  const std::vector<StoreTensor>& tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr. A name stored as a copy of another (a tied lm_head)
  // resolves to that one.
  const StoreTensor* Find(std::string_view name) const;

  // The path of the store's tokenizer.json; empty when the source had none (GGUF).
  const std::string& tokenizer_json_path() const { return tokenizer_json_path_; }
  const GgufTokenizerData& gguf_tokenizer() const { return gguf_tokenizer_; }
  const std::string& chat_template() const { return chat_template_; }
  // The path the store was converted from.
  const std::string& source() const { return source_; }

 private:
  Store() = default;
  Status ParseManifest(const nlohmann::json& manifest, const std::string& file,
                       uint64_t data_bytes);
  std::string dir_;
  ModelConfig config_;
  std::vector<StoreTensor> tensors_;
  std::map<std::string, size_t, std::less<>> index_;  // name (and alias) -> tensors_ index
  std::string tokenizer_json_path_;
  GgufTokenizerData gguf_tokenizer_;
  std::string chat_template_;
  std::string source_;
};

// True when `path` is a directory holding a store manifest. LoadModel() uses this to route a
// store directory to LoadStore() instead of the Hugging Face reader.
bool IsStoreDirectory(const std::string& path);

// Loads the store in `dir` as a Model: raw tensors are views into a read-only map of
// tensors.bin, 4-bit tensors are expanded to F32 once. Every extent's checksum is verified; a
// mismatch is Corrupt naming the tensor and saying to convert again. The tensors must be
// exactly those the config implies, with the shapes it implies.
Result<std::unique_ptr<Model>> LoadStore(const std::string& dir);

// The manifest's JSON form of a ModelConfig, and back: Corrupt naming a missing or malformed
// field, or a config that fails ModelConfig::Validate().
nlohmann::json ModelConfigToJson(const ModelConfig& config);
Result<ModelConfig> ModelConfigFromJson(const nlohmann::json& json);

// The manifest's JSON form of GGUF tokenizer data, and back (Corrupt naming the field).
nlohmann::json GgufTokenizerToJson(const GgufTokenizerData& tokenizer);
Result<GgufTokenizerData> GgufTokenizerFromJson(const nlohmann::json& json);

// One weight of a Model and its store name.
struct WeightSlot {
  std::string name;
  TensorView* view;
  std::vector<int64_t> shape;  // the shape `config` implies
};

// The weights a model of `config` has, named, in a fixed order (embeddings, then each layer in
// LayerWeights order, then the final norm and lm_head). Optional weights the config rules out
// (biases, gates, learned positions) are not listed.
// REQUIRES: weights->layers.size() == config.num_layers.
std::vector<WeightSlot> WeightSlots(const ModelConfig& config, ModelWeights* weights);

}  // namespace strata
