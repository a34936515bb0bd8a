// Readers for the text-pipeline sections of a tokenizer.json: normalizer, pre_tokenizer and
// decoder. Each accepts what strata implements exactly and refuses the rest with Unsupported.
#pragma once

#include <nlohmann/json.hpp>

#include "src/core/status.h"
#include "src/tokenizer/pretokenizer.h"

namespace strata {

// null/absent passes; NFC (alone or in a Sequence of NFCs) passes with a warning, unapplied.
Status CheckNormalizer(const nlohmann::json& normalizer);

// Appends the steps of `pre_tokenizer` (ByteLevel, Split, Digits, Sequence) to `out`. Gives
// Unsupported unless a ByteLevel step is present, since only byte-level vocabularies are read.
Status ParsePreTokenizer(const nlohmann::json& pre_tokenizer, PreTokenizer* out);

// Passes for a ByteLevel decoder, alone or in a Sequence of ByteLevels.
Status CheckDecoder(const nlohmann::json& decoder);

}  // namespace strata
