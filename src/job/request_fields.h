// Field checks shared by the plain and the OpenAI batch line formats. Internal to src/job: every
// check reads a parsed JSON object and returns the Problem with the first bad field, never throws.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "src/job/request.h"

namespace strata::request_fields {

using Json = nlohmann::json;

// A field that makes a line unusable: a stable code (request.h lists them) and a message.
struct Problem {
  const char* code;
  std::string message;
};

// `"field"`, for messages.
std::string Quoted(std::string_view field);

// "a string", "an array", or the number or literal itself, for "got ..." in messages.
std::string Describe(const Json& v);

// Reads "custom_id": a non-empty string of at most kMaxCustomIdBytes without NUL.
std::optional<Problem> CheckCustomId(const Json& obj, std::string* id);

// Checks a prompt string found in field `name`: non-empty, without NUL.
std::optional<Problem> CheckPromptText(const Json& v, std::string_view name, std::string* prompt);

// Reads the optional sampling fields of SamplingParams from `obj`; a missing or null field keeps
// its default. `max_tokens_names` lists the fields that may hold max_tokens, first found wins
// (chat requests also accept "max_completion_tokens").
std::optional<Problem> CheckSampling(const Json& obj, SamplingParams* p,
                                     std::initializer_list<const char*> max_tokens_names = {
                                         "max_tokens"});

}  // namespace strata::request_fields
