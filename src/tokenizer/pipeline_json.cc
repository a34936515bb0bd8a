#include "src/tokenizer/pipeline_json.h"

#include <string>
#include <utility>

#include "src/core/log.h"
#include "src/tokenizer/json_fields.h"

namespace strata {
namespace {

using nlohmann::json;

Result<std::string> TypeOf(const json& section, const std::string& where) {
  if (!section.is_object()) return JsonError(where, "expected an object");
  const json* type = JsonMember(section, "type");
  if (type == nullptr || !type->is_string()) return JsonError(where, "missing string \"type\"");
  return type->get<std::string>();
}

Result<SplitBehavior> ParseBehavior(const json& split, const std::string& where) {
  STRATA_ASSIGN_OR_RETURN(std::string name, JsonString(split, "behavior", "", where));
  if (name == "Removed") return SplitBehavior::kRemoved;
  if (name == "Isolated") return SplitBehavior::kIsolated;
  if (name == "MergedWithPrevious") return SplitBehavior::kMergedWithPrevious;
  if (name == "MergedWithNext") return SplitBehavior::kMergedWithNext;
  if (name == "Contiguous") return SplitBehavior::kContiguous;
  return JsonError(where + ".behavior", "unknown split behavior '" + name + "'");
}

Status ParseSplit(const json& split, const std::string& where, PreTokenizer* out) {
  const json* pattern = JsonMember(split, "pattern");
  if (pattern == nullptr) return JsonError(where, "missing \"pattern\"");
  const json* regex = JsonMember(*pattern, "Regex");
  const json* literal = JsonMember(*pattern, "String");
  const json* text = regex != nullptr ? regex : literal;
  if (text == nullptr || !text->is_string()) {
    return JsonError(where + ".pattern", "expected {\"Regex\": \"...\"} or {\"String\": \"...\"}");
  }
  auto compiled = Regex::Compile(text->get<std::string>(), /*literal=*/regex == nullptr);
  if (!compiled.ok()) return compiled.status().WithContext(where + ".pattern");
  STRATA_ASSIGN_OR_RETURN(SplitBehavior behavior, ParseBehavior(split, where));
  STRATA_ASSIGN_OR_RETURN(bool invert, JsonBool(split, "invert", false, where));
  out->AddSplit(std::move(compiled).value(), behavior, invert);
  return Status::Ok();
}

Status ParseStep(const json& step, const std::string& where, PreTokenizer* out,
                 bool* has_byte_level) {
  STRATA_ASSIGN_OR_RETURN(std::string type, TypeOf(step, where));
  if (type == "Sequence") {
    const json* steps = JsonMember(step, "pretokenizers");
    if (steps == nullptr || !steps->is_array()) {
      return JsonError(where, "Sequence needs a \"pretokenizers\" array");
    }
    for (size_t i = 0; i < steps->size(); ++i) {
      STRATA_RETURN_IF_ERROR(ParseStep(
          (*steps)[i], where + ".pretokenizers[" + std::to_string(i) + "]", out, has_byte_level));
    }
    return Status::Ok();
  }
  if (type == "ByteLevel") {
    // tokenizers' ByteLevel::default() has both flags on.
    STRATA_ASSIGN_OR_RETURN(bool add_prefix_space, JsonBool(step, "add_prefix_space", true, where));
    STRATA_ASSIGN_OR_RETURN(bool use_regex, JsonBool(step, "use_regex", true, where));
    *has_byte_level = true;
    return out->AddByteLevel(add_prefix_space, use_regex);
  }
  if (type == "Split") return ParseSplit(step, where, out);
  if (type == "Digits") {
    STRATA_ASSIGN_OR_RETURN(bool individual, JsonBool(step, "individual_digits", false, where));
    return out->AddDigits(individual);
  }
  return Status::Unsupported(where + ": pre-tokenizer '" + type +
                             "' is not supported (strata reads ByteLevel, Split, Digits and "
                             "Sequence)");
}

}  // namespace

Status CheckNormalizer(const json& normalizer) {
  if (normalizer.is_null()) return Status::Ok();
  STRATA_ASSIGN_OR_RETURN(std::string type, TypeOf(normalizer, "normalizer"));
  bool only_nfc = type == "NFC";
  if (type == "Sequence") {
    const json* steps = JsonMember(normalizer, "normalizers");
    if (steps == nullptr || !steps->is_array()) {
      return JsonError("normalizer", "Sequence needs a \"normalizers\" array");
    }
    only_nfc = true;
    for (const json& step : *steps) {
      const json* step_type = JsonMember(step, "type");
      only_nfc &= step_type != nullptr && *step_type == "NFC";
    }
    if (steps->empty()) return Status::Ok();
  }
  if (!only_nfc) {
    return Status::Unsupported("normalizer '" + type +
                               "' is not supported (strata reads byte-level BPE tokenizers "
                               "without a normalizer, or with NFC)");
  }
  LogWarn(
      "tokenizer: the NFC normalizer is not applied; text that is not already in NFC may "
      "tokenize differently from Hugging Face tokenizers");
  return Status::Ok();
}

Status ParsePreTokenizer(const json& pre_tokenizer, PreTokenizer* out) {
  bool has_byte_level = false;
  if (!pre_tokenizer.is_null()) {
    STRATA_RETURN_IF_ERROR(ParseStep(pre_tokenizer, "pre_tokenizer", out, &has_byte_level));
  }
  if (!has_byte_level) {
    return Status::Unsupported(
        "pre_tokenizer has no ByteLevel step; strata reads byte-level BPE tokenizers only");
  }
  return Status::Ok();
}

Status CheckDecoder(const json& decoder) {
  const Status unsupported = Status::Unsupported(
      "decoder must be ByteLevel (strata reads byte-level BPE tokenizers only)");
  if (decoder.is_null()) return unsupported;
  STRATA_ASSIGN_OR_RETURN(std::string type, TypeOf(decoder, "decoder"));
  if (type == "ByteLevel") return Status::Ok();
  if (type != "Sequence") return unsupported;
  const json* steps = JsonMember(decoder, "decoders");
  if (steps == nullptr || !steps->is_array() || steps->empty()) return unsupported;
  for (const json& step : *steps) {
    const json* step_type = JsonMember(step, "type");
    if (step_type == nullptr || *step_type != "ByteLevel") return unsupported;
  }
  return Status::Ok();
}

}  // namespace strata
