// The OpenAI Batch API input line:
//   {"custom_id": "...", "method": "POST", "url": "/v1/completions" | "/v1/chat/completions",
//    "body": {...}}
// Internal to src/job: ParseRequestLine calls it for object lines that have "body", "url" or
// "method". Never throws.
//
// Decisions a user can see:
//   - "method" may be left out; when present it must be "POST".
//   - /v1/completions bodies take "prompt" as a string or an array of exactly one string.
//   - /v1/chat/completions bodies take "messages": objects with "role" (system, user, assistant,
//     tool; developer reads as system) and "content" (a string, or an array of {"type": "text",
//     "text": ...} parts joined by "\n"). The prompt is rendered later with the model's chat
//     template (chat_template.h). "max_completion_tokens" wins over "max_tokens".
//   - Sampling fields are read from the body as in the plain format; "model", "stream", "user"
//     and other unknown fields are ignored.
//   - Fields that ask for something strata does not produce are refused (unsupported_field)
//     rather than silently dropped: n or best_of other than 1, echo, logprobs, top_logprobs,
//     suffix, tools, functions, and a response_format other than text.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>

#include "src/job/request.h"

namespace strata {

// REQUIRES: `obj` is a JSON object.
ParsedLine ParseOpenAiRequest(const nlohmann::json& obj, uint64_t line_number);

}  // namespace strata
