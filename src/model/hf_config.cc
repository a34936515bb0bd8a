#include "src/model/hf_config.h"

#include <cmath>
#include <limits>
#include <optional>

#include "src/model/json_file.h"

namespace strata {
namespace {

using nlohmann::json;

// Reads a required integer field that must fit in an int.
Status RequireInt(const json& c, const char* key, const std::string& source, int* out) {
  const std::optional<int64_t> v = JsonInt(c, key);
  if (!v) return Status::Corrupt(source + ": missing integer '" + key + "'");
  if (*v < std::numeric_limits<int>::min() || *v > std::numeric_limits<int>::max()) {
    return Status::OutOfRange(source + ": '" + key + "' = " + std::to_string(*v) +
                              " is out of range");
  }
  *out = static_cast<int>(*v);
  return Status::Ok();
}

// Like RequireInt, but `fallback` when the field is absent or null.
Status OptionalInt(const json& c, const char* key, const std::string& source, int fallback,
                   int* out) {
  if (!c.contains(key) || c[key].is_null()) {
    *out = fallback;
    return Status::Ok();
  }
  return RequireInt(c, key, source, out);
}

// A token id field: an integer, a list whose first element is taken (Llama 3's eos), null for
// none (-1), or `fallback` when absent.
int TokenId(const json& c, const char* key, int fallback) {
  if (!c.contains(key)) return fallback;
  const json& v = c[key];
  const json* first = v.is_array() && !v.empty() ? &v[0] : &v;
  if (!first->is_number_integer()) return -1;
  const int64_t id = first->get<int64_t>();
  return id >= 0 && id <= std::numeric_limits<int>::max() ? static_cast<int>(id) : -1;
}

// The YaRN parameters of `rs` as transformers reads them (_compute_yarn_parameters): the original
// context is required; attention_factor, when absent, is 0.1 ln(factor) + 1, or the ratio of that
// with `mscale` and with `mscale_all_dim` when both are given; beta_fast and beta_slow default to
// 32 and 1 (also when 0); truncate to true. `out->factor` is read already.
Status ParseYarn(const json& rs, const std::string& source, RopeScaling* out) {
  const std::optional<int64_t> original = JsonInt(rs, "original_max_position_embeddings");
  if (!original || *original <= 0 || *original > std::numeric_limits<int>::max()) {
    return Status::Corrupt(source + ": yarn rope_scaling needs original_max_position_embeddings");
  }
  const auto mscale = [&](double m) {
    return out->factor <= 1 ? 1.0 : 0.1 * m * std::log(out->factor) + 1.0;
  };
  const double m = JsonNumber(rs, "mscale").value_or(0),
               m_all = JsonNumber(rs, "mscale_all_dim").value_or(0);
  const std::optional<double> attention = JsonNumber(rs, "attention_factor");
  out->kind = RopeScalingKind::kYarn;
  out->original_max_position_embeddings = static_cast<int>(*original);
  out->attention_factor = static_cast<float>(attention              ? *attention
                                             : m != 0 && m_all != 0 ? mscale(m) / mscale(m_all)
                                                                    : mscale(1));
  const double fast = JsonNumber(rs, "beta_fast").value_or(0),
               slow = JsonNumber(rs, "beta_slow").value_or(0);
  out->beta_fast = static_cast<float>(fast != 0 ? fast : 32);
  out->beta_slow = static_cast<float>(slow != 0 ? slow : 1);
  out->truncate = JsonBool(rs, "truncate").value_or(true);
  return Status::Ok();
}

// Reads a `rope_scaling` (or transformers 5 `rope_parameters`) object.
Status ParseRopeScaling(const json& rs, const std::string& source, RopeScaling* out) {
  if (!rs.is_object()) return Status::Corrupt(source + ": 'rope_scaling' is not an object");
  std::optional<std::string> type = JsonString(rs, "rope_type");
  if (!type) type = JsonString(rs, "type");
  if (!type) return Status::Corrupt(source + ": rope_scaling has no 'rope_type' or 'type'");
  if (*type == "default") return Status::Ok();
  if (*type != "linear" && *type != "yarn" && *type != "llama3") {
    return Status::Unsupported(source + ": rope_scaling type '" + *type +
                               "' is not supported (strata implements linear, llama3 and yarn)");
  }
  const std::optional<double> factor = JsonNumber(rs, "factor");
  if (!factor || *factor <= 0) {
    return Status::Corrupt(source + ": rope_scaling '" + *type + "' needs a positive 'factor'");
  }
  out->factor = static_cast<float>(*factor);
  if (*type == "linear") {
    out->kind = RopeScalingKind::kLinear;
    return Status::Ok();
  }
  if (*type == "yarn") return ParseYarn(rs, source, out);
  const std::optional<double> low = JsonNumber(rs, "low_freq_factor");
  const std::optional<double> high = JsonNumber(rs, "high_freq_factor");
  const std::optional<int64_t> original = JsonInt(rs, "original_max_position_embeddings");
  if (!low || !high || !original || *original <= 0 || *original > std::numeric_limits<int>::max()) {
    return Status::Corrupt(source +
                           ": llama3 rope_scaling needs low_freq_factor, "
                           "high_freq_factor and original_max_position_embeddings");
  }
  out->kind = RopeScalingKind::kLlama3;
  out->low_freq_factor = static_cast<float>(*low);
  out->high_freq_factor = static_cast<float>(*high);
  out->original_max_position_embeddings = static_cast<int>(*original);
  return Status::Ok();
}

// The window of a config whose layers (some or all) attend only to the last `window` positions:
// Mistral's and Phi-3's sliding_window; Qwen2's and Qwen3's from max_window_layers on when
// use_sliding_window is set (transformers 5 writes the outcome as layer_types). nullopt when every
// layer sees the whole context.
Result<std::optional<int64_t>> SlidingWindow(const json& c, const std::optional<std::string>& type,
                                             const std::string& source) {
  bool sliding = false;
  if (type == "mistral" || type == "phi3") {
    sliding = c.contains("sliding_window") && !c["sliding_window"].is_null();
  } else if (type == "qwen2" || type == "qwen3") {
    if (auto it = c.find("layer_types"); it != c.end() && it->is_array()) {
      for (const json& t : *it) {
        sliding |= t.is_string() && t.get<std::string>() == "sliding_attention";
      }
    } else if (JsonBool(c, "use_sliding_window").value_or(false)) {
      sliding =
          JsonInt(c, "max_window_layers").value_or(0) < JsonInt(c, "num_hidden_layers").value_or(0);
    }
  }
  if (!sliding) return std::optional<int64_t>();
  const std::optional<int64_t> window = JsonInt(c, "sliding_window");
  if (!window || *window <= 0) {
    return Status::Corrupt(source + ": sliding-window layers without a positive sliding_window");
  }
  return window;
}

Status ParseLlama(const json& c, const std::string& source, ModelConfig* m) {
  const std::string act = JsonString(c, "hidden_act").value_or("silu");
  if (act != "silu") {
    return Status::Unsupported(source + ": Llama hidden_act '" + act +
                               "' (only silu is supported)");
  }
  const std::optional<std::string> type = JsonString(c, "model_type");
  STRATA_ASSIGN_OR_RETURN(const std::optional<int64_t> window, SlidingWindow(c, type, source));
  m->arch = Architecture::kLlama;
  STRATA_RETURN_IF_ERROR(RequireInt(c, "vocab_size", source, &m->vocab_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "hidden_size", source, &m->hidden_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "intermediate_size", source, &m->intermediate_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "num_hidden_layers", source, &m->num_layers));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "num_attention_heads", source, &m->num_heads));
  STRATA_RETURN_IF_ERROR(
      OptionalInt(c, "num_key_value_heads", source, m->num_heads, &m->num_kv_heads));
  const int default_head_dim = m->num_heads > 0 ? m->hidden_size / m->num_heads : 0;
  STRATA_RETURN_IF_ERROR(OptionalInt(c, "head_dim", source, default_head_dim, &m->head_dim));
  STRATA_RETURN_IF_ERROR(
      OptionalInt(c, "max_position_embeddings", source, 2048, &m->max_position_embeddings));
  m->norm = NormKind::kRmsNorm;
  m->norm_eps = static_cast<float>(JsonNumber(c, "rms_norm_eps").value_or(1e-6));
  m->activation = Activation::kSilu;
  m->gated_mlp = true;
  // Qwen2: biases on q/k/v, none on o (its config has no attention_bias key).
  m->attention_bias = type == "qwen2" || JsonBool(c, "attention_bias").value_or(false);
  m->attention_output_bias = type != "qwen2" && m->attention_bias;
  m->qk_norm = type == "qwen3";
  m->mlp_bias = JsonBool(c, "mlp_bias").value_or(false);
  m->tie_word_embeddings = JsonBool(c, "tie_word_embeddings").value_or(false);
  m->use_rope = true;
  m->position_offset = 0;
  // transformers 5 moves rope_theta and the scaling into one `rope_parameters` object.
  const json* params = nullptr;
  if (auto it = c.find("rope_parameters"); it != c.end() && it->is_object()) params = &*it;
  const json* scaling = params;
  if (auto it = c.find("rope_scaling"); it != c.end() && !it->is_null()) scaling = &*it;
  std::optional<double> theta = JsonNumber(c, "rope_theta");
  if (!theta && params != nullptr) theta = JsonNumber(*params, "rope_theta");
  m->rope_theta = static_cast<float>(theta.value_or(10000.0));
  if (scaling != nullptr) {
    STRATA_RETURN_IF_ERROR(ParseRopeScaling(*scaling, source, &m->rope_scaling));
  }
  // Phi-3.5-MoE and Phi-4-mini rotate only part of each head.
  std::optional<double> rotary = JsonNumber(c, "partial_rotary_factor");
  if (!rotary && params != nullptr) rotary = JsonNumber(*params, "partial_rotary_factor");
  if (rotary && *rotary != 1.0) {
    return Status::Unsupported(source + ": partial_rotary_factor " + std::to_string(*rotary) +
                               " (strata rotates whole heads)");
  }
  m->max_position_embeddings = ScaledContext(*m);
  if (window) CapContextAtWindow(*window, source, m);
  m->bos_token_id = TokenId(c, "bos_token_id", 1);
  m->eos_token_id = TokenId(c, "eos_token_id", 2);
  m->pad_token_id = TokenId(c, "pad_token_id", -1);
  return Status::Ok();
}

Status ParseOpt(const json& c, const std::string& source, ModelConfig* m) {
  m->arch = Architecture::kOpt;
  STRATA_RETURN_IF_ERROR(RequireInt(c, "vocab_size", source, &m->vocab_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "hidden_size", source, &m->hidden_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "ffn_dim", source, &m->intermediate_size));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "num_hidden_layers", source, &m->num_layers));
  STRATA_RETURN_IF_ERROR(RequireInt(c, "num_attention_heads", source, &m->num_heads));
  STRATA_RETURN_IF_ERROR(
      RequireInt(c, "max_position_embeddings", source, &m->max_position_embeddings));
  int proj_dim = 0;
  STRATA_RETURN_IF_ERROR(OptionalInt(c, "word_embed_proj_dim", source, m->hidden_size, &proj_dim));
  if (!JsonBool(c, "do_layer_norm_before").value_or(true) || proj_dim != m->hidden_size) {
    return Status::Unsupported(source +
                               ": OPT-350m style post-LayerNorm/projection is not supported");
  }
  if (!JsonBool(c, "layer_norm_elementwise_affine").value_or(true)) {
    return Status::Unsupported(source + ": OPT without LayerNorm weights is not supported");
  }
  const std::string act = JsonString(c, "activation_function").value_or("relu");
  if (act == "relu") {
    m->activation = Activation::kRelu;
  } else if (act == "gelu") {
    m->activation = Activation::kGelu;
  } else {
    return Status::Unsupported(source + ": OPT activation_function '" + act +
                               "' (relu and gelu are supported)");
  }
  m->num_kv_heads = m->num_heads;
  m->head_dim = m->num_heads > 0 ? m->hidden_size / m->num_heads : 0;
  m->norm = NormKind::kLayerNorm;
  m->norm_eps = 1e-5f;
  m->gated_mlp = false;
  m->attention_bias = JsonBool(c, "enable_bias").value_or(true);
  m->attention_output_bias = m->mlp_bias = m->attention_bias;
  m->tie_word_embeddings = JsonBool(c, "tie_word_embeddings").value_or(true);
  m->use_rope = false;
  m->position_offset = 2;
  m->bos_token_id = TokenId(c, "bos_token_id", 2);
  m->eos_token_id = TokenId(c, "eos_token_id", 2);
  m->pad_token_id = TokenId(c, "pad_token_id", 1);
  return Status::Ok();
}

}  // namespace

Result<ModelConfig> ParseHfConfig(const json& config, const std::string& source) {
  if (!config.is_object()) return Status::Corrupt(source + ": not a JSON object");
  const std::optional<std::string> type = JsonString(config, "model_type");
  if (!type) return Status::Corrupt(source + ": missing string 'model_type'");
  ModelConfig m;
  if (*type == "opt") {
    STRATA_RETURN_IF_ERROR(ParseOpt(config, source, &m));
  } else if (*type == "llama" || *type == "mistral" || *type == "qwen2" || *type == "qwen3" ||
             *type == "phi3") {
    STRATA_RETURN_IF_ERROR(ParseLlama(config, source, &m));
  } else {
    return Status::Unsupported(
        source + ": model_type '" + *type +
        "' is not supported (strata runs opt, llama, mistral, qwen2, qwen3 and phi3 models)");
  }
  // Some configs name a pad id past the vocabulary (an added token never trained); none is used.
  if (m.pad_token_id >= m.vocab_size) m.pad_token_id = -1;
  STRATA_RETURN_IF_ERROR(m.Validate().WithContext(source));
  return m;
}

Result<ModelConfig> ReadHfConfig(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(json config, ReadJsonFile(path));
  return ParseHfConfig(config, path);
}

}  // namespace strata
