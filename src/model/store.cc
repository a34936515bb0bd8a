#include "src/model/store.h"

#include <charconv>
#include <filesystem>
#include <utility>

#include "src/io/checksum.h"
#include "src/io/mapped_file.h"
#include "src/model/json_file.h"
#include "src/model/model_builder.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

template <typename E>
using NameTable = std::initializer_list<std::pair<E, const char*>>;
const NameTable<Architecture> kArchNames = {{Architecture::kOpt, "opt"},
                                            {Architecture::kLlama, "llama"}};
const NameTable<NormKind> kNormNames = {{NormKind::kLayerNorm, "layer_norm"},
                                        {NormKind::kRmsNorm, "rms_norm"}};
const NameTable<Activation> kActivationNames = {
    {Activation::kRelu, "relu"}, {Activation::kGelu, "gelu"}, {Activation::kSilu, "silu"}};
const NameTable<RopeScalingKind> kRopeNames = {{RopeScalingKind::kNone, "none"},
                                               {RopeScalingKind::kLinear, "linear"},
                                               {RopeScalingKind::kLlama3, "llama3"},
                                               {RopeScalingKind::kFactors, "factors"},
                                               {RopeScalingKind::kYarn, "yarn"}};

template <typename E>
const char* NameOf(NameTable<E> table, E e) {
  for (const auto& [value, name] : table) {
    if (value == e) return name;
  }
  return "?";
}

const std::pair<const char*, int ModelConfig::*> kIntFields[] = {
    {"vocab_size", &ModelConfig::vocab_size},
    {"hidden_size", &ModelConfig::hidden_size},
    {"intermediate_size", &ModelConfig::intermediate_size},
    {"num_layers", &ModelConfig::num_layers},
    {"num_heads", &ModelConfig::num_heads},
    {"num_kv_heads", &ModelConfig::num_kv_heads},
    {"head_dim", &ModelConfig::head_dim},
    {"max_position_embeddings", &ModelConfig::max_position_embeddings},
    {"position_offset", &ModelConfig::position_offset},
    {"bos_token_id", &ModelConfig::bos_token_id},
    {"eos_token_id", &ModelConfig::eos_token_id},
    {"pad_token_id", &ModelConfig::pad_token_id}};
const std::pair<const char*, bool ModelConfig::*> kBoolFields[] = {
    {"gated_mlp", &ModelConfig::gated_mlp},
    {"attention_bias", &ModelConfig::attention_bias},
    {"mlp_bias", &ModelConfig::mlp_bias},
    {"tie_word_embeddings", &ModelConfig::tie_word_embeddings},
    {"use_rope", &ModelConfig::use_rope}};
// Keys added after the first stores were written; absent, they take the value those stores had.
constexpr char kOutputBiasKey[] = "attention_output_bias";
constexpr char kQkNormKey[] = "qk_norm";
const std::pair<const char*, float ModelConfig::*> kFloatFields[] = {
    {"norm_eps", &ModelConfig::norm_eps}, {"rope_theta", &ModelConfig::rope_theta}};
const std::pair<const char*, float RopeScaling::*> kRopeFloatFields[] = {
    {"factor", &RopeScaling::factor},
    {"low_freq_factor", &RopeScaling::low_freq_factor},
    {"high_freq_factor", &RopeScaling::high_freq_factor}};
// YaRN's, written since YaRN support; absent (older stores), they keep their defaults.
const std::pair<const char*, float RopeScaling::*> kRopeYarnFields[] = {
    {"attention_factor", &RopeScaling::attention_factor},
    {"beta_fast", &RopeScaling::beta_fast},
    {"beta_slow", &RopeScaling::beta_slow}};

Status Missing(const char* field) {
  return Status::Corrupt("field '" + std::string(field) + "' is missing or malformed");
}

template <typename E>
Status ReadEnum(const json& j, const char* key, NameTable<E> table, E* out) {
  const std::optional<std::string> name = JsonString(j, key);
  for (const auto& [value, n] : table) {
    if (name == n) {
      *out = value;
      return Status::Ok();
    }
  }
  return Missing(key);
}

Status ReadInt(const json& j, const char* key, int* out) {
  const std::optional<int64_t> v = JsonInt(j, key);
  if (!v || *v < INT32_MIN || *v > INT32_MAX) return Missing(key);
  *out = static_cast<int>(*v);
  return Status::Ok();
}

Status ReadFloat(const json& j, const char* key, float* out) {
  const std::optional<double> v = JsonNumber(j, key);
  if (!v) return Missing(key);
  *out = static_cast<float>(*v);
  return Status::Ok();
}

// A JSON array of strings or of integers into `out`; false when it is anything else.
template <typename T>
bool ReadArray(const json& j, const char* key, std::vector<T>* out) {
  auto it = j.find(key);
  if (it == j.end() || !it->is_array()) return false;
  for (const json& v : *it) {
    if constexpr (std::is_same_v<T, std::string>) {
      if (!v.is_string()) return false;
      out->push_back(v.get<std::string>());
    } else {
      if (!v.is_number_integer()) return false;
      out->push_back(v.get<T>());
    }
  }
  return true;
}

Result<StoreExtent> ReadExtent(const json& j, uint64_t data_bytes) {
  StoreExtent e;
  const std::optional<int64_t> offset = JsonInt(j, "offset"), bytes = JsonInt(j, "bytes");
  const std::optional<std::string> sum = JsonString(j, "checksum");
  if (!offset || !bytes || *offset < 0 || *bytes < 0) return Missing("offset/bytes");
  e.offset = static_cast<uint64_t>(*offset);
  e.bytes = static_cast<uint64_t>(*bytes);
  if (!sum ||
      std::from_chars(sum->data(), sum->data() + sum->size(), e.checksum, 16).ec != std::errc()) {
    return Missing("checksum");
  }
  if (!IsAligned(e.offset) || e.offset > data_bytes || e.padded_bytes() > data_bytes - e.offset) {
    return Status::Corrupt("extent [" + std::to_string(e.offset) + ", +" + std::to_string(e.bytes) +
                           ") is unaligned or lies outside " + kStoreDataName + " (" +
                           std::to_string(data_bytes) + " bytes)");
  }
  return e;
}

// Parses one entry of the tensor table; checks that its extents hold exactly its shape.
Result<StoreTensor> ReadTensor(const json& j, uint64_t data_bytes) {
  StoreTensor t;
  t.name = JsonString(j, "name").value_or("");
  const std::optional<DType> dtype = DTypeFromName(JsonString(j, "dtype").value_or(""));
  if (!dtype) return Missing("dtype");
  t.dtype = *dtype;
  if (!ReadArray(j, "shape", &t.shape) || t.shape.empty()) return Missing("shape");
  int64_t numel = 1;
  for (int64_t d : t.shape) {
    if (d <= 0 || d > (int64_t{1} << 40) / numel) return Missing("shape");
    numel *= d;
  }
  STRATA_ASSIGN_OR_RETURN(t.data, ReadExtent(j, data_bytes));
  uint64_t expected = static_cast<uint64_t>(numel) * DTypeBytes(t.dtype);
  if (JsonString(j, "encoding") == "q4") {
    t.encoding = StoreEncoding::kQ4;
    const int64_t cols = t.shape.back();
    const auto group = j.find("q4_group");
    if (group != j.end()) {
      if (!group->is_number_integer() || (*group != 32 && *group != 64)) return Missing("q4_group");
      t.q4_group = group->get<int>();
    }
    if (t.shape.size() != 2 || cols % t.q4_group != 0) return Missing("shape");
    auto params = j.find("q4_params");
    if (params == j.end()) return Missing("q4_params");
    STRATA_ASSIGN_OR_RETURN(t.q4_params, ReadExtent(*params, data_bytes));
    expected = static_cast<uint64_t>(numel) / 2;
    if (t.q4_params.bytes != static_cast<uint64_t>(numel / t.q4_group) * 4) {
      return Status::Corrupt("q4_params of " + std::to_string(t.q4_params.bytes) +
                             " bytes do not match the shape");
    }
  } else if (JsonString(j, "encoding") != "raw") {
    return Missing("encoding");
  }
  if (t.data.bytes != expected) {
    return Status::Corrupt(std::to_string(t.data.bytes) + " bytes do not match the shape");
  }
  return t;
}

}  // namespace

json ModelConfigToJson(const ModelConfig& c) {
  json j = {{"arch", NameOf(kArchNames, c.arch)},
            {"norm", NameOf(kNormNames, c.norm)},
            {"activation", NameOf(kActivationNames, c.activation)}};
  for (const auto& [key, field] : kIntFields) j[key] = c.*field;
  for (const auto& [key, field] : kBoolFields) j[key] = c.*field;
  j[kOutputBiasKey] = c.attention_output_bias;
  j[kQkNormKey] = c.qk_norm;
  for (const auto& [key, field] : kFloatFields) j[key] = c.*field;
  json rope = {
      {"kind", NameOf(kRopeNames, c.rope_scaling.kind)},
      {"original_max_position_embeddings", c.rope_scaling.original_max_position_embeddings}};
  for (const auto& [key, field] : kRopeFloatFields) rope[key] = c.rope_scaling.*field;
  for (const auto& [key, field] : kRopeYarnFields) rope[key] = c.rope_scaling.*field;
  rope["truncate"] = c.rope_scaling.truncate;
  if (c.rope_scaling.kind == RopeScalingKind::kFactors) {
    rope["freq_factors"] = c.rope_scaling.freq_factors;
  }
  j["rope_scaling"] = rope;
  return j;
}

Result<ModelConfig> ModelConfigFromJson(const json& j) {
  ModelConfig c;
  STRATA_RETURN_IF_ERROR(ReadEnum(j, "arch", kArchNames, &c.arch));
  STRATA_RETURN_IF_ERROR(ReadEnum(j, "norm", kNormNames, &c.norm));
  STRATA_RETURN_IF_ERROR(ReadEnum(j, "activation", kActivationNames, &c.activation));
  for (const auto& [key, field] : kIntFields) STRATA_RETURN_IF_ERROR(ReadInt(j, key, &(c.*field)));
  for (const auto& [key, field] : kBoolFields) {
    const std::optional<bool> v = JsonBool(j, key);
    if (!v) return Missing(key);
    c.*field = *v;
  }
  // Stores written before Qwen2 support: the o projection's bias went with q/k/v's; no q/k norm.
  c.attention_output_bias = JsonBool(j, kOutputBiasKey).value_or(c.attention_bias);
  c.qk_norm = JsonBool(j, kQkNormKey).value_or(false);
  for (const auto& [key, field] : kFloatFields) {
    STRATA_RETURN_IF_ERROR(ReadFloat(j, key, &(c.*field)));
  }
  auto rope = j.find("rope_scaling");
  if (rope == j.end() || !rope->is_object()) return Missing("rope_scaling");
  STRATA_RETURN_IF_ERROR(ReadEnum(*rope, "kind", kRopeNames, &c.rope_scaling.kind));
  STRATA_RETURN_IF_ERROR(ReadInt(*rope, "original_max_position_embeddings",
                                 &c.rope_scaling.original_max_position_embeddings));
  for (const auto& [key, field] : kRopeFloatFields) {
    STRATA_RETURN_IF_ERROR(ReadFloat(*rope, key, &(c.rope_scaling.*field)));
  }
  for (const auto& [key, field] : kRopeYarnFields) {
    if (rope->contains(key))
      STRATA_RETURN_IF_ERROR(ReadFloat(*rope, key, &(c.rope_scaling.*field)));
  }
  c.rope_scaling.truncate = JsonBool(*rope, "truncate").value_or(true);
  if (c.rope_scaling.kind == RopeScalingKind::kFactors) {
    const auto factors = rope->find("freq_factors");
    if (factors == rope->end() || !factors->is_array()) return Missing("rope_scaling.freq_factors");
    for (const json& f : *factors) {
      if (!f.is_number()) return Missing("rope_scaling.freq_factors");
      c.rope_scaling.freq_factors.push_back(f.get<float>());
    }
  }
  if (Status s = c.Validate(); !s.ok()) return Status::Corrupt(s.message());
  return c;
}

json GgufTokenizerToJson(const GgufTokenizerData& t) {
  return {{"model", t.model},
          {"pre", t.pre},
          {"tokens", t.tokens},
          {"token_types", t.token_types},
          {"merges", t.merges},
          {"bos_token_id", t.bos_token_id},
          {"eos_token_id", t.eos_token_id},
          {"eot_token_id", t.eot_token_id},
          {"pad_token_id", t.pad_token_id},
          {"add_bos", t.add_bos ? json(*t.add_bos) : json(nullptr)},
          {"scores", t.scores},
          {"add_space_prefix", t.add_space_prefix}};
}

Result<GgufTokenizerData> GgufTokenizerFromJson(const json& j) {
  GgufTokenizerData t;
  t.model = JsonString(j, "model").value_or("");
  t.pre = JsonString(j, "pre").value_or("");
  if (!ReadArray(j, "tokens", &t.tokens)) return Missing("tokens");
  if (!ReadArray(j, "token_types", &t.token_types)) return Missing("token_types");
  if (!ReadArray(j, "merges", &t.merges)) return Missing("merges");
  for (auto [key, field] : {std::pair{"bos_token_id", &t.bos_token_id},
                            {"eos_token_id", &t.eos_token_id},
                            {"eot_token_id", &t.eot_token_id},
                            {"pad_token_id", &t.pad_token_id}}) {
    STRATA_RETURN_IF_ERROR(ReadInt(j, key, field));
  }
  // null: the GGUF file had no add_bos_token (the tokenizer's default applies).
  if (auto add_bos = j.find("add_bos"); add_bos == j.end() || !add_bos->is_null()) {
    const std::optional<bool> value = JsonBool(j, "add_bos");
    if (!value) return Missing("add_bos");
    t.add_bos = *value;
  }
  // Stores written before SentencePiece support carry byte-level BPE vocabularies only.
  if (auto scores = j.find("scores"); scores != j.end()) {
    if (!scores->is_array()) return Missing("scores");
    for (const json& v : *scores) {
      if (!v.is_number()) return Missing("scores");
      t.scores.push_back(v.get<float>());
    }
  }
  t.add_space_prefix = JsonBool(j, "add_space_prefix").value_or(true);
  return t;
}

Result<std::unique_ptr<Store>> Store::Open(const std::string& dir) {
  const std::string file = (fs::path(dir) / kStoreManifestName).string();
  STRATA_ASSIGN_OR_RETURN(json manifest, ReadJsonFile(file));
  std::error_code ec;
  const std::string data = (fs::path(dir) / kStoreDataName).string();
  const uintmax_t data_bytes = fs::file_size(data, ec);
  if (ec) {
    return Status::NotFound(data + ": missing (" + ec.message() + "); convert the model again");
  }
  std::unique_ptr<Store> store(new Store());
  store->dir_ = dir;
  STRATA_RETURN_IF_ERROR(store->ParseManifest(manifest, file, data_bytes));
  return store;
}

Status Store::ParseManifest(const json& m, const std::string& file, uint64_t data_bytes) {
  auto corrupt = [&](const Status& s) {
    return Status(s.code(), file + ": " + s.message() + "; convert the model again");
  };
  if (JsonString(m, "format") != kStoreFormat) return corrupt(Missing("format"));
  if (JsonInt(m, "version") != kStoreVersion) {
    return Status::Unsupported(file + ": store version " +
                               std::to_string(JsonInt(m, "version").value_or(-1)) +
                               " is not the version this strata reads (" +
                               std::to_string(kStoreVersion) + "); convert the model again");
  }
  auto config = m.find("config");
  if (config == m.end()) return corrupt(Missing("config"));
  Result<ModelConfig> c = ModelConfigFromJson(*config);
  if (!c.ok()) return corrupt(c.status().WithContext("config"));
  config_ = *c;
  source_ = JsonString(m, "source").value_or("");
  chat_template_ = JsonString(m, "chat_template").value_or("");
  auto tokenizer = m.find("tokenizer");
  if (tokenizer == m.end() || !tokenizer->is_object()) return corrupt(Missing("tokenizer"));
  if (JsonString(*tokenizer, "json")) {
    tokenizer_json_path_ = (fs::path(dir_) / kStoreTokenizerName).string();
  }
  if (auto gguf = tokenizer->find("gguf"); gguf != tokenizer->end()) {
    Result<GgufTokenizerData> t = GgufTokenizerFromJson(*gguf);
    if (!t.ok()) return corrupt(t.status().WithContext("tokenizer"));
    gguf_tokenizer_ = std::move(*t);
  }
  auto tensors = m.find("tensors");
  if (tensors == m.end() || !tensors->is_array()) return corrupt(Missing("tensors"));
  std::vector<std::pair<std::string, std::string>> aliases;
  for (const json& entry : *tensors) {
    const std::string name = JsonString(entry, "name").value_or("");
    if (name.empty()) return corrupt(Missing("name"));
    if (std::optional<std::string> target = JsonString(entry, "same_as")) {
      aliases.emplace_back(name, *target);
      continue;
    }
    Result<StoreTensor> t = ReadTensor(entry, data_bytes);
    if (!t.ok()) return corrupt(t.status().WithContext("tensor '" + name + "'"));
    if (!index_.emplace(name, tensors_.size()).second) {
      return corrupt(Status::Corrupt("tensor '" + name + "' appears twice"));
    }
    tensors_.push_back(std::move(*t));
  }
  for (const auto& [name, target] : aliases) {
    auto it = index_.find(target);
    if (it == index_.end() || !index_.emplace(name, it->second).second) {
      return corrupt(
          Status::Corrupt("tensor '" + name + "' is a copy of unknown '" + target + "'"));
    }
  }
  return Status::Ok();
}

std::string Store::data_path() const { return (fs::path(dir_) / kStoreDataName).string(); }

const StoreTensor* Store::Find(std::string_view name) const {
  auto it = index_.find(name);
  return it == index_.end() ? nullptr : &tensors_[it->second];
}

bool IsStoreDirectory(const std::string& path) {
  std::error_code ec;
  return fs::is_regular_file(fs::path(path) / kStoreManifestName, ec);
}

std::vector<WeightSlot> WeightSlots(const ModelConfig& c, ModelWeights* w) {
  const int64_t h = c.hidden_size, q = int64_t{c.num_heads} * c.head_dim,
                kv = int64_t{c.num_kv_heads} * c.head_dim, f = c.intermediate_size;
  const bool norm_bias = c.norm == NormKind::kLayerNorm, ab = c.attention_bias, mb = c.mlp_bias;
  std::vector<WeightSlot> s;
  auto add = [&](bool present, std::string name, TensorView* v, std::vector<int64_t> shape) {
    if (present) s.push_back({std::move(name), v, std::move(shape)});
  };
  add(true, "token_embedding", &w->token_embedding, {c.vocab_size, h});
  add(!c.use_rope, "position_embedding", &w->position_embedding,
      {int64_t{c.max_position_embeddings} + c.position_offset, h});
  for (int i = 0; i < c.num_layers; ++i) {
    LayerWeights& l = w->layers[static_cast<size_t>(i)];
    const std::string p = "layers." + std::to_string(i) + ".";
    add(true, p + "attn_norm", &l.attn_norm, {h});
    add(norm_bias, p + "attn_norm_bias", &l.attn_norm_bias, {h});
    add(true, p + "wq", &l.wq, {q, h});
    add(true, p + "wk", &l.wk, {kv, h});
    add(true, p + "wv", &l.wv, {kv, h});
    add(true, p + "wo", &l.wo, {h, q});
    add(ab, p + "bq", &l.bq, {q});
    add(ab, p + "bk", &l.bk, {kv});
    add(ab, p + "bv", &l.bv, {kv});
    add(c.attention_output_bias, p + "bo", &l.bo, {h});
    add(c.qk_norm, p + "q_norm", &l.q_norm, {c.head_dim});
    add(c.qk_norm, p + "k_norm", &l.k_norm, {c.head_dim});
    add(true, p + "mlp_norm", &l.mlp_norm, {h});
    add(norm_bias, p + "mlp_norm_bias", &l.mlp_norm_bias, {h});
    add(c.gated_mlp, p + "w_gate", &l.w_gate, {f, h});
    add(c.gated_mlp && mb, p + "b_gate", &l.b_gate, {f});
    add(true, p + "w_up", &l.w_up, {f, h});
    add(true, p + "w_down", &l.w_down, {h, f});
    add(mb, p + "b_up", &l.b_up, {f});
    add(mb, p + "b_down", &l.b_down, {h});
  }
  add(true, "final_norm", &w->final_norm, {h});
  add(norm_bias, "final_norm_bias", &w->final_norm_bias, {h});
  add(true, "lm_head", &w->lm_head, {c.vocab_size, h});
  return s;
}

Result<std::unique_ptr<Model>> LoadStore(const std::string& dir) {
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<Store> store, Store::Open(dir));
  STRATA_ASSIGN_OR_RETURN(std::unique_ptr<MappedFile> data, MappedFile::Open(store->data_path()));
  const auto corrupt = [&](const std::string& what) {
    return Status::Corrupt(dir + ": " + what + "; convert the model again with strata convert");
  };
  // Checksums first, in parallel: nothing is handed out from a damaged store.
  const std::vector<StoreTensor>& tensors = store->tensors();
  std::vector<char> bad(tensors.size(), 0);
#pragma omp parallel for schedule(dynamic)
  for (size_t i = 0; i < tensors.size(); ++i) {
    const StoreTensor& t = tensors[i];
    bad[i] =
        Checksum64(data->data() + t.data.offset, t.data.bytes) != t.data.checksum ||
        (t.encoding == StoreEncoding::kQ4 &&
         Checksum64(data->data() + t.q4_params.offset, t.q4_params.bytes) != t.q4_params.checksum);
  }
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (bad[i]) return corrupt("tensor '" + tensors[i].name + "' fails its checksum");
  }
  int group = 0;  // a model's 4-bit matrices share one group size (Model::q4_group)
  for (const StoreTensor& t : tensors) {
    if (t.encoding != StoreEncoding::kQ4) continue;
    if (group != 0 && t.q4_group != group) {
      return corrupt("tensor '" + t.name + "' has 4-bit groups of " + std::to_string(t.q4_group) +
                     ", the others of " + std::to_string(group));
    }
    group = t.q4_group;
  }

  ModelBuilder b(dir);
  b.config() = store->config();
  b.set_tokenizer_json_path(store->tokenizer_json_path());
  b.gguf_tokenizer() = store->gguf_tokenizer();
  b.set_chat_template(store->chat_template());
  b.weights().layers.resize(static_cast<size_t>(store->config().num_layers));
  const std::vector<WeightSlot> slots = WeightSlots(b.config(), &b.weights());
  std::map<const StoreTensor*, TensorView> loaded;  // a tensor shared by two names loads once
  for (const WeightSlot& slot : slots) {
    const StoreTensor* t = store->Find(slot.name);
    if (t == nullptr) return corrupt("tensor '" + slot.name + "' is missing");
    if (t->shape != slot.shape) return corrupt("tensor '" + slot.name + "' has the wrong shape");
    auto [it, fresh] = loaded.try_emplace(t);
    if (fresh && t->encoding == StoreEncoding::kRaw) {
      it->second = TensorView{t->dtype, t->shape, data->data() + t->data.offset};
    } else if (fresh) {
      // Kept as stored: nothing is expanded at load (a 70B model's planes are 39 GB, its fp32
      // expansion 280 GB).
      const Q4Planes* planes = b.AddQ4Planes(
          {data->data() + t->data.offset,
           reinterpret_cast<const uint16_t*>(data->data() + t->q4_params.offset), t->q4_group});
      it->second = TensorView{DType::kQ4, t->shape, planes};
    }
    *slot.view = it->second;
  }
  for (const StoreTensor& t : tensors) {
    if (!loaded.contains(&t)) return corrupt("tensor '" + t.name + "' is not part of this model");
  }
  b.AddStoreData(std::move(data));
  return b.Finish();
}

}  // namespace strata
