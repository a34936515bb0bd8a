#include "policy/model_spec.h"

#include <algorithm>
#include <filesystem>
#include <sstream>

#include "policy/yaml_reader.h"

namespace strata {
namespace {

Status Positive(const char* field, int64_t value) {
  if (value > 0) return Status::Ok();
  return Status::InvalidArgument(std::string(field) + " must be positive, got " +
                                 std::to_string(value));
}

std::string SourceConfigDir() { return STRATA_CONFIG_DIR; }

}  // namespace

Status ModelSpec::Validate() const {
  STRATA_RETURN_IF_ERROR(Positive("num_layers", num_layers));
  STRATA_RETURN_IF_ERROR(Positive("hidden_size", hidden_size));
  STRATA_RETURN_IF_ERROR(Positive("intermediate_size", intermediate_size));
  STRATA_RETURN_IF_ERROR(Positive("num_heads", num_heads));
  STRATA_RETURN_IF_ERROR(Positive("num_kv_heads", num_kv_heads));
  STRATA_RETURN_IF_ERROR(Positive("head_dim", head_dim));
  STRATA_RETURN_IF_ERROR(Positive("vocab_size", vocab_size));
  STRATA_RETURN_IF_ERROR(Positive("max_position_embeddings", max_position_embeddings));
  STRATA_RETURN_IF_ERROR(Positive("weight_dtype_bytes", weight_dtype_bytes));
  STRATA_RETURN_IF_ERROR(Positive("activation_dtype_bytes", activation_dtype_bytes));
  if (num_heads % num_kv_heads != 0) {
    return Status::InvalidArgument("num_heads (" + std::to_string(num_heads) +
                                   ") must be a multiple of num_kv_heads (" +
                                   std::to_string(num_kv_heads) + ")");
  }
  if (q4_group != 32 && q4_group != 64) {
    return Status::InvalidArgument("q4_group must be 32 or 64, got " + std::to_string(q4_group));
  }
  if (position_embedding_rows < 0) {
    return Status::InvalidArgument("position_embedding_rows must not be negative");
  }
  return Status::Ok();
}

Result<ModelSpec> ParseModelSpecYaml(const std::string& text, const std::string& origin) {
  policy_internal::YamlMapReader reader(text, origin);
  ModelSpec spec;
  reader.String("name", &spec.name);
  reader.Int("num_layers", &spec.num_layers, 1);
  reader.Int("hidden_size", &spec.hidden_size, 1);
  reader.Int("intermediate_size", &spec.intermediate_size, 1);
  reader.Int("num_heads", &spec.num_heads, 1);
  reader.Int("num_kv_heads", &spec.num_kv_heads, 1);
  reader.Int("head_dim", &spec.head_dim, 1);
  reader.Int("vocab_size", &spec.vocab_size, 1);
  reader.Int("max_position_embeddings", &spec.max_position_embeddings, 1);
  reader.Bool("gated_mlp", &spec.gated_mlp);
  reader.OptionalBool("linear_bias", &spec.linear_bias);
  reader.OptionalBool("qkv_bias", &spec.qkv_bias);
  reader.OptionalBool("qk_norm", &spec.qk_norm);
  reader.OptionalBool("norm_bias", &spec.norm_bias);
  reader.OptionalInt("position_embedding_rows", &spec.position_embedding_rows, 0);
  reader.OptionalBool("tie_word_embeddings", &spec.tie_word_embeddings);
  reader.Int("weight_dtype_bytes", &spec.weight_dtype_bytes, 1);
  reader.OptionalBool("q4_weights", &spec.q4_weights);
  reader.OptionalInt("q4_group", &spec.q4_group, 1);
  reader.OptionalInt("activation_dtype_bytes", &spec.activation_dtype_bytes, 1);
  STRATA_RETURN_IF_ERROR(reader.Finish());
  Status valid = spec.Validate();
  if (!valid.ok()) return valid.WithContext(origin);
  return spec;
}

Result<ModelSpec> LoadModelSpecYaml(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(std::string text, policy_internal::ReadTextFile(path));
  return ParseModelSpecYaml(text, path);
}

std::string ModelSpecToYaml(const ModelSpec& spec) {
  auto b = [](bool v) { return v ? "true" : "false"; };
  std::ostringstream out;
  out << "name: " << spec.name << "\n"
      << "num_layers: " << spec.num_layers << "\n"
      << "hidden_size: " << spec.hidden_size << "\n"
      << "intermediate_size: " << spec.intermediate_size << "\n"
      << "num_heads: " << spec.num_heads << "\n"
      << "num_kv_heads: " << spec.num_kv_heads << "\n"
      << "head_dim: " << spec.head_dim << "\n"
      << "vocab_size: " << spec.vocab_size << "\n"
      << "max_position_embeddings: " << spec.max_position_embeddings << "\n"
      << "gated_mlp: " << b(spec.gated_mlp) << "\n"
      << "linear_bias: " << b(spec.linear_bias) << "\n"
      << "qkv_bias: " << b(spec.qkv_bias) << "\n"
      << "qk_norm: " << b(spec.qk_norm) << "\n"
      << "norm_bias: " << b(spec.norm_bias) << "\n"
      << "position_embedding_rows: " << spec.position_embedding_rows << "\n"
      << "tie_word_embeddings: " << b(spec.tie_word_embeddings) << "\n"
      << "weight_dtype_bytes: " << spec.weight_dtype_bytes << "\n"
      << "q4_weights: " << b(spec.q4_weights) << "\n"
      << "q4_group: " << spec.q4_group << "\n"
      << "activation_dtype_bytes: " << spec.activation_dtype_bytes << "\n";
  return out.str();
}

Result<std::string> ResolveConfigFile(const std::string& kind, const std::string& name_or_path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (name_or_path.empty()) return Status::InvalidArgument("no " + kind + " preset given");
  if (fs::is_regular_file(name_or_path, ec)) return name_or_path;
  const bool bare = name_or_path.find('/') == std::string::npos;
  if (bare) {
    const std::string file = name_or_path + ".yaml";
    for (const fs::path& dir : {fs::path("configs") / kind, fs::path(SourceConfigDir()) / kind}) {
      if (fs::is_regular_file(dir / file, ec)) return (dir / file).string();
    }
  }
  std::string presets;
  for (const std::string& p : ListConfigPresets(kind)) presets += (presets.empty() ? "" : ", ") + p;
  return Status::NotFound("'" + name_or_path + "' is neither a file nor a preset in configs/" +
                          kind + "/ (presets: " + (presets.empty() ? "none" : presets) + ")");
}

std::vector<std::string> ListConfigPresets(const std::string& kind) {
  namespace fs = std::filesystem;
  std::vector<std::string> names;
  std::error_code ec;
  for (fs::directory_iterator it(fs::path(SourceConfigDir()) / kind, ec), end; !ec && it != end;
       it.increment(ec)) {
    if (it->path().extension() == ".yaml") names.push_back(it->path().stem().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace strata
