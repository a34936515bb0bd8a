// ModelSpec: the shape numbers the cost model and the memory accounting need, as plain data.
// Presets live in configs/models/<name>.yaml with one key per field; the CLI also fills one from
// a real model's config. Nothing here knows a model by its name.
#pragma once

#include <string>
#include <vector>

#include "src/core/status.h"

namespace strata {

struct ModelSpec {
  std::string name;    // for messages and reports
  int num_layers = 0;  // transformer blocks
  int hidden_size = 0;
  int intermediate_size = 0;  // MLP width (per projection for gated MLPs)
  int num_heads = 0;          // query heads
  int num_kv_heads = 0;       // == num_heads without grouped-query attention
  int head_dim = 0;
  int vocab_size = 0;
  int max_position_embeddings = 0;   // context length: prompt + generation must fit
  bool gated_mlp = false;            // gate, up, down (SwiGLU) instead of fc1, fc2
  bool linear_bias = false;          // q/k/v/o and MLP projections carry biases (OPT)
  bool qkv_bias = false;             // q/k/v projections carry biases (Qwen2; implied by the above)
  bool qk_norm = false;              // per-head RMSNorm weights [head_dim] for q and k (Qwen3)
  bool norm_bias = false;            // LayerNorm with bias (OPT) instead of RMSNorm
  int position_embedding_rows = 0;   // rows of a learned position table (OPT: max + 2); 0: RoPE
  bool tie_word_embeddings = false;  // the output projection is the input embedding
  int weight_dtype_bytes = 2;        // bytes per stored weight element (2: fp16/bf16)
  bool q4_weights = false;           // the matrices are stored 4-bit already (a strata store from
                                     // `convert --compress-weight`): plans need compress_weight
  int q4_group = 64;                 // elements per 4-bit group along a row (kernels/cpu/
                                     // weight_q4.h): 64, or 32 for a GGUF's own Q4 blocks
  int activation_dtype_bytes = 2;    // bytes per KV cache and hidden-state element the runtime
                                     // computes in (2 on the GPU; 4 in the fp32 CPU build)

  ModelSpec() = default;

  // Checks every size is positive and consistent; InvalidArgument names the field.
  Status Validate() const;
};

// YAML with one key per field. Every key is required except position_embedding_rows (default 0),
// tie_word_embeddings, linear_bias, qkv_bias, qk_norm, norm_bias, q4_weights (default false),
// q4_group (default 64) and activation_dtype_bytes (default 2); unknown keys are errors. Messages
// name the key and `origin`.
Result<ModelSpec> ParseModelSpecYaml(const std::string& text, const std::string& origin);
Result<ModelSpec> LoadModelSpecYaml(const std::string& path);
std::string ModelSpecToYaml(const ModelSpec& spec);

// Resolves `--model` or `--hardware` to a YAML file. `kind` is "models" or "hardware". A value
// that names an existing file is returned as is; a bare name N is looked up as
// ./configs/<kind>/N.yaml, then in the source tree's configs/<kind>/ (compiled in). NotFound
// lists the presets there.
Result<std::string> ResolveConfigFile(const std::string& kind, const std::string& name_or_path);

// The preset names (file names without .yaml) in the source tree's configs/<kind>/, sorted.
std::vector<std::string> ListConfigPresets(const std::string& kind);

}  // namespace strata
