// Result lines in the OpenAI Batch API output format. Internal to src/job: FormatCompletionLine
// and FormatErrorLine (request.h) call these for OpenAI-format requests.
//
// Completion:
//   {"id": "batch_req_<h>", "custom_id", "response": {"status_code": 200, "request_id": "req_<h>",
//    "body": {"id": "cmpl-<h>" | "chatcmpl-<h>", "object": "text_completion" | "chat.completion",
//    "model", "choices": [{"index": 0, "text" | "message": {"role": "assistant", "content"},
//    "logprobs": null, "finish_reason"}], "usage": {"prompt_tokens", "completion_tokens",
//    "total_tokens"}}}, "error": null}
// Error:
//   {"id", "custom_id" (null when unknown), "line", "response": {"status_code": 400,
//    "request_id", "body": {"error": {"message", "type": "invalid_request_error", "param": null,
//    "code"}}} (null when the custom_id is unknown), "error": {"code", "message"}}
// <h> is 16 hex digits derived from the custom_id (or the line number), so a rerun writes the
// same bytes; "created" is left out for the same reason. "error" is set on every failed line,
// so checking it alone finds them all; "line" is strata's addition, the 1-based input line.
#pragma once

#include <string>
#include <string_view>

#include "src/job/request.h"

namespace strata {

std::string FormatOpenAiCompletionLine(const Completion& c, std::string_view model);
std::string FormatOpenAiErrorLine(const RequestError& e);

}  // namespace strata
