// Tokenizer::FromJsonFile: a byte-level BPE tokenizer from a Hugging Face tokenizer.json and the
// tokenizer_config.json beside it. nlohmann::json is used through its non-throwing API only.
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "src/core/log.h"
#include "src/tokenizer/bpe_tokenizer.h"
#include "src/tokenizer/json_fields.h"
#include "src/tokenizer/pipeline_json.h"
#include "src/tokenizer/tokenizer.h"

namespace strata {
namespace {

using nlohmann::json;

Result<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::NotFound("cannot open " + path);
  std::ostringstream text;
  text << in.rdbuf();
  json parsed = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded()) return Status::Corrupt(path + " is not valid JSON");
  if (!parsed.is_object()) return Status::Corrupt(path + " does not hold a JSON object");
  return parsed;
}

Status ParseMerges(const json& merges, BpeTokenizerSpec* spec) {
  if (!merges.is_array()) return JsonError("model.merges", "expected an array");
  spec->merges.reserve(merges.size());
  for (size_t i = 0; i < merges.size(); ++i) {
    const json& merge = merges[i];
    const std::string where = "model.merges[" + std::to_string(i) + "]";
    if (merge.is_string()) {
      // As tokenizers: exactly two parts separated by one space.
      const std::string& text = merge.get_ref<const std::string&>();
      const size_t space = text.find(' ');
      if (space == std::string::npos || text.find(' ', space + 1) != std::string::npos) {
        return JsonError(where, "expected \"left right\"");
      }
      spec->merges.emplace_back(text.substr(0, space), text.substr(space + 1));
    } else if (merge.is_array() && merge.size() == 2 && merge[0].is_string() &&
               merge[1].is_string()) {
      spec->merges.emplace_back(merge[0].get<std::string>(), merge[1].get<std::string>());
    } else {
      return JsonError(where, "expected \"left right\" or [\"left\", \"right\"]");
    }
  }
  return Status::Ok();
}

Status ParseModel(const json& model, BpeTokenizerSpec* spec) {
  if (!model.is_object()) return JsonError("model", "missing or not an object");
  STRATA_ASSIGN_OR_RETURN(std::string type, JsonString(model, "type", "BPE", "model"));
  if (type != "BPE") {
    return Status::Unsupported("model type '" + type +
                               "' is not supported; strata reads byte-level BPE tokenizers only");
  }
  const json* vocab = JsonMember(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return JsonError("model.vocab", "expected an object");
  }
  spec->vocab.reserve(vocab->size());
  for (auto it = vocab->begin(); it != vocab->end(); ++it) {
    if (!it.value().is_number_unsigned() || it.value().get<uint64_t>() > INT32_MAX) {
      return JsonError("model.vocab[\"" + it.key() + "\"]", "expected a non-negative id");
    }
    spec->vocab.emplace_back(it.key(), static_cast<int32_t>(it.value().get<uint64_t>()));
  }
  const json* merges = JsonMember(model, "merges");
  if (merges == nullptr) return JsonError("model", "missing \"merges\"");
  STRATA_RETURN_IF_ERROR(ParseMerges(*merges, spec));

  for (const char* affix : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    STRATA_ASSIGN_OR_RETURN(std::string value, JsonString(model, affix, "", "model"));
    if (!value.empty()) {
      return Status::Unsupported(std::string("model.") + affix + " is not supported");
    }
  }
  const json* dropout = JsonMember(model, "dropout");
  if (dropout != nullptr && !dropout->is_null() &&
      !(dropout->is_number() && dropout->get<double>() == 0.0)) {
    return Status::Unsupported("model.dropout (BPE dropout) is not supported");
  }
  STRATA_ASSIGN_OR_RETURN(spec->model_options.ignore_merges,
                          JsonBool(model, "ignore_merges", false, "model"));
  STRATA_ASSIGN_OR_RETURN(spec->model_options.fuse_unk,
                          JsonBool(model, "fuse_unk", false, "model"));
  STRATA_ASSIGN_OR_RETURN(std::string unk, JsonString(model, "unk_token", "", "model"));
  if (!unk.empty()) {
    const json* unk_id = JsonMember(*vocab, unk.c_str());
    if (unk_id == nullptr) {
      return JsonError("model.unk_token", "'" + unk + "' is not in the vocabulary");
    }
    spec->model_options.unk_id = static_cast<int32_t>(unk_id->get<uint64_t>());
  }
  return Status::Ok();
}

Status ParseAddedTokens(const json& root, BpeTokenizerSpec* spec) {
  const json* added = JsonMember(root, "added_tokens");
  if (added == nullptr || added->is_null()) return Status::Ok();
  if (!added->is_array()) return JsonError("added_tokens", "expected an array");
  for (size_t i = 0; i < added->size(); ++i) {
    const json& entry = (*added)[i];
    const std::string where = "added_tokens[" + std::to_string(i) + "]";
    if (!entry.is_object()) return JsonError(where, "expected an object");
    AddedToken token;
    STRATA_ASSIGN_OR_RETURN(token.id, JsonId(entry, "id", where));
    const json* content = JsonMember(entry, "content");
    if (content == nullptr || !content->is_string() ||
        content->get_ref<const std::string&>().empty()) {
      return JsonError(where + ".content", "expected a non-empty string");
    }
    token.content = content->get<std::string>();
    STRATA_ASSIGN_OR_RETURN(token.special, JsonBool(entry, "special", false, where));
    STRATA_ASSIGN_OR_RETURN(token.lstrip, JsonBool(entry, "lstrip", false, where));
    STRATA_ASSIGN_OR_RETURN(token.rstrip, JsonBool(entry, "rstrip", false, where));
    STRATA_ASSIGN_OR_RETURN(token.single_word, JsonBool(entry, "single_word", false, where));
    STRATA_ASSIGN_OR_RETURN(token.normalized, JsonBool(entry, "normalized", !token.special, where));
    spec->added_tokens.push_back(std::move(token));
  }
  return Status::Ok();
}

// The ids TemplateProcessing's "single" template puts before $A (in `prefix`); appended ones are
// only counted, since Encode prepends at most a BOS.
struct SingleTemplate {
  std::vector<int32_t> prefix;
  size_t appended = 0;
};

Status ParseTemplate(const json& processor, const std::string& where, SingleTemplate* out) {
  const json* single = JsonMember(processor, "single");
  const json* specials = JsonMember(processor, "special_tokens");
  if (single == nullptr || !single->is_array()) return JsonError(where, "missing \"single\" array");
  bool seen_sequence = false;
  for (const json& piece : *single) {
    if (JsonMember(piece, "Sequence") != nullptr) {
      seen_sequence = true;
      continue;
    }
    const json* special = JsonMember(piece, "SpecialToken");
    STRATA_ASSIGN_OR_RETURN(std::string name,
                            JsonString(special ? *special : piece, "id", "", where + ".single"));
    const json* entry = specials == nullptr ? nullptr : JsonMember(*specials, name.c_str());
    const json* ids = entry == nullptr ? nullptr : JsonMember(*entry, "ids");
    if (special == nullptr || ids == nullptr || !ids->is_array()) {
      return JsonError(where, "template piece '" + name + "' has no entry in special_tokens");
    }
    for (const json& id : *ids) {
      if (!id.is_number_unsigned()) return JsonError(where, "special token ids must be integers");
      if (seen_sequence) {
        ++out->appended;
      } else {
        out->prefix.push_back(static_cast<int32_t>(id.get<uint64_t>()));
      }
    }
  }
  return Status::Ok();
}

Status ParsePostProcessor(const json& processor, const std::string& where, SingleTemplate* out) {
  if (processor.is_null()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(std::string type, JsonString(processor, "type", "", where));
  if (type == "ByteLevel") return Status::Ok();
  if (type == "TemplateProcessing") return ParseTemplate(processor, where, out);
  if (type == "Sequence") {
    const json* steps = JsonMember(processor, "processors");
    if (steps == nullptr || !steps->is_array()) return JsonError(where, "missing \"processors\"");
    for (size_t i = 0; i < steps->size(); ++i) {
      STRATA_RETURN_IF_ERROR(
          ParsePostProcessor((*steps)[i], where + ".processors[" + std::to_string(i) + "]", out));
    }
    return Status::Ok();
  }
  return Status::Unsupported(where + ": post-processor '" + type +
                             "' is not supported (strata reads ByteLevel, TemplateProcessing "
                             "and Sequence)");
}

int32_t FindTokenId(const BpeTokenizerSpec& spec, const std::string& text) {
  for (const AddedToken& token : spec.added_tokens) {
    if (token.content == text) return token.id;
  }
  for (const auto& [spelling, id] : spec.vocab) {
    if (spelling == text) return id;
  }
  return -1;
}

// A special token of tokenizer_config.json by name: a string, {"content": ...} or absent.
Result<int32_t> ConfigTokenId(const json& config, const char* key, const BpeTokenizerSpec& spec) {
  const json* value = JsonMember(config, key);
  if (value == nullptr || value->is_null()) return -1;
  const json* content = value->is_object() ? JsonMember(*value, "content") : value;
  if (content == nullptr || !content->is_string()) {
    return JsonError(std::string("tokenizer_config.json: ") + key,
                     "expected a string or {content}");
  }
  const int32_t id = FindTokenId(spec, content->get<std::string>());
  if (id < 0) {
    LogWarn(std::string("tokenizer: ") + key + " '" + content->get<std::string>() +
            "' is not in the vocabulary");
  }
  return id;
}

// Sets BOS/EOS as transformers 5 does when a tokenizer.json exists: its post_processor alone
// decides whether a token is prepended (transformers drops tokenizer_config.json's
// add_bos_token then); tokenizer_config.json names the BOS and EOS tokens.
Status ApplyBosEos(const json& root, const std::string& config_path, BpeTokenizerSpec* spec) {
  SingleTemplate single;
  const json* processor = JsonMember(root, "post_processor");
  if (processor != nullptr) {
    STRATA_RETURN_IF_ERROR(ParsePostProcessor(*processor, "post_processor", &single));
  }
  if (single.prefix.size() > 1) {
    return Status::Unsupported("post_processor prepends " + std::to_string(single.prefix.size()) +
                               " tokens; strata prepends at most one (BOS)");
  }
  if (single.appended > 0) {
    LogWarn("tokenizer: the post_processor appends " + std::to_string(single.appended) +
            " special token(s) to every sequence; strata's Encode does not");
  }
  if (!single.prefix.empty()) {
    spec->bos_id = single.prefix[0];
    spec->add_bos = true;
  }
  std::error_code error;
  if (!std::filesystem::exists(config_path, error)) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(json config, ReadJsonFile(config_path));
  STRATA_ASSIGN_OR_RETURN(int32_t bos, ConfigTokenId(config, "bos_token", *spec));
  STRATA_ASSIGN_OR_RETURN(spec->eos_id, ConfigTokenId(config, "eos_token", *spec));
  if (spec->bos_id < 0) spec->bos_id = bos;
  const json* add_bos = JsonMember(config, "add_bos_token");
  if (add_bos != nullptr && add_bos->is_boolean() && add_bos->get<bool>() != spec->add_bos) {
    LogInfo(std::string("tokenizer: tokenizer_config.json sets add_bos_token but tokenizer.json's "
                        "post_processor decides, as in transformers: BOS is ") +
            (spec->add_bos ? "prepended" : "not prepended"));
  }
  return Status::Ok();
}

Result<std::unique_ptr<Tokenizer>> Parse(const std::string& path) {
  STRATA_ASSIGN_OR_RETURN(json root, ReadJsonFile(path));
  BpeTokenizerSpec spec;
  const json* model = JsonMember(root, "model");
  if (model == nullptr) return JsonError("model", "missing");
  STRATA_RETURN_IF_ERROR(ParseModel(*model, &spec));
  STRATA_RETURN_IF_ERROR(ParseAddedTokens(root, &spec));
  const json null_value;
  const auto section = [&](const char* key) -> const json& {
    const json* value = JsonMember(root, key);
    return value == nullptr ? null_value : *value;
  };
  STRATA_RETURN_IF_ERROR(CheckNormalizer(section("normalizer")));
  STRATA_RETURN_IF_ERROR(ParsePreTokenizer(section("pre_tokenizer"), &spec.pre_tokenizer));
  STRATA_RETURN_IF_ERROR(CheckDecoder(section("decoder")));
  const std::string config_path =
      (std::filesystem::path(path).parent_path() / "tokenizer_config.json").string();
  STRATA_RETURN_IF_ERROR(ApplyBosEos(root, config_path, &spec));
  return BpeTokenizer::Create(std::move(spec));
}

}  // namespace

Result<std::unique_ptr<Tokenizer>> Tokenizer::FromJsonFile(const std::string& path) {
  auto tokenizer = Parse(path);
  if (!tokenizer.ok()) return tokenizer.status().WithContext(path);
  return tokenizer;
}

}  // namespace strata
