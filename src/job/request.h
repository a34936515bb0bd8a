// Requests and completions of a batch job, and their JSONL forms. Parsing never throws: a line
// that cannot run becomes a RequestError that names the problem, written back as an error line.
//
// Two line formats are read, decided per line: a plain line (below), and an OpenAI Batch API line
// (an object with "body", "url" or "method"; see openai_request.h). A result line is written in
// the format of its input line.
//
// Error codes (RequestError::code) produced by this module; they are stable, tests and users
// match on them:
//   empty_line         the line is empty or holds only spaces, tabs and "\r"
//   invalid_json       the line is not JSON (including a raw NUL byte in it)
//   invalid_utf8       the line holds bytes that are not UTF-8; custom_id is kept when readable
//   not_an_object      the line is JSON but not an object
//   invalid_custom_id  custom_id missing, not a string, empty, over kMaxCustomIdBytes or has NUL
//   missing_prompt     no "prompt" field
//   empty_prompt       "prompt" is ""
//   invalid_max_tokens max_tokens not an integer in [1, kMaxTokensLimit]
//   invalid_field      any other field has the wrong type or range; the message names the field
//   line_too_long      the line exceeds the reader's limit (see LineTooLongError)
//   unsupported_url    an OpenAI line whose "url" is not /v1/completions or /v1/chat/completions
//   invalid_body       an OpenAI line whose "body" is missing or not an object
//   invalid_messages   a chat body whose "messages" is missing, empty or malformed
//   unsupported_field  a body field strata cannot honour (n > 1, logprobs, echo, tools, ...)
// Other modules add their own (e.g. context_length_exceeded, duplicate_custom_id,
// unsupported_chat_template).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace strata {

inline constexpr size_t kMaxCustomIdBytes = 512;
inline constexpr int kMaxTokensLimit = 1 << 20;  // upper bound for max_tokens
inline constexpr size_t kMaxStopStrings = 4;

// Sampling fields use OpenAI / vLLM names and defaults.
struct SamplingParams {
  int max_tokens = 16;            // tokens to generate, >= 1 (OpenAI completions default 16)
  float temperature = 1.0f;       // 0 means greedy; allowed range [0, 2]
  float top_p = 1.0f;             // (0, 1]
  int top_k = 0;                  // 0 or -1: disabled
  std::optional<uint64_t> seed;   // per-request; results do not depend on batch composition
  std::vector<std::string> stop;  // up to 4 stop strings; the text ends before the first match
  bool ignore_eos = false;        // keep generating past EOS until max_tokens
};

// The format family of a line; its result line is written in the same family.
enum class RequestFormat {
  kPlain,             // {"custom_id", "prompt", ...}
  kOpenAiCompletion,  // OpenAI Batch API line for /v1/completions
  kOpenAiChat,        // OpenAI Batch API line for /v1/chat/completions
};
bool IsOpenAi(RequestFormat f);

// One message of a chat request; `content` is text (text parts of an array joined by "\n").
struct ChatMessage {
  std::string role;  // "system", "user", "assistant" or "tool" ("developer" reads as "system")
  std::string content;
};

struct Request {
  std::string custom_id;
  std::string prompt;  // for kOpenAiChat: empty until the chat template renders `messages`
  SamplingParams sampling;
  uint64_t line_number = 0;  // 1-based line in the input file
  RequestFormat format = RequestFormat::kPlain;
  std::vector<ChatMessage> messages;  // kOpenAiChat only
};

// Why a line could not run. `custom_id` is empty when the line did not yield one.
struct RequestError {
  std::string custom_id;
  uint64_t line_number = 0;
  std::string code;     // stable machine-readable code, e.g. "invalid_json", "prompt_too_long"
  std::string message;  // for people: what is wrong and what to do
  RequestFormat format = RequestFormat::kPlain;  // the family of the error line
};

enum class FinishReason { kStop, kLength };
const char* FinishReasonName(FinishReason r);  // "stop" / "length"

struct Completion {
  std::string custom_id;
  std::string text;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  FinishReason finish_reason = FinishReason::kLength;
  RequestFormat format = RequestFormat::kPlain;
};

// Parses one input line (without its newline). Returns the Request or the error for that line.
// `line_number` is 1-based and is copied into either result. Exactly one of the two is set.
//
// The plain line format is an object with "custom_id" (string) and "prompt" (string), and the
// optional sampling fields of SamplingParams: "max_tokens" (integer), "temperature", "top_p"
// (numbers), "top_k", "seed" (integers), "stop" (string or array of strings), "ignore_eos"
// (bool). Decisions a user can see:
//   - Unknown fields are ignored, so lines written for other runners still run.
//   - An optional field set to null takes its default, as in the OpenAI API.
//   - Integer fields take JSON integers only: 32.0 and 3.2e1 are rejected, not rounded.
//   - A NUL character (\u0000) in custom_id, prompt or stop is rejected: no tokenizer expects it
//     and it is nearly always a sign of broken input.
//   - When the line is an object with a valid custom_id, the error carries that custom_id, also
//     for invalid UTF-8 or a raw NUL elsewhere in the line.
struct ParsedLine {
  std::optional<Request> request;
  std::optional<RequestError> error;
  // False when the line is not a JSON object: its format could not be read, and `error.format`
  // is kPlain; the caller may pick a better family (BlockReader uses the previous line's).
  bool is_object = false;
};
ParsedLine ParseRequestLine(std::string_view line, uint64_t line_number);

// One JSON object per line, without the trailing newline, in the family of `format`.
// Plain completion: {"custom_id", "text", "prompt_tokens", "completion_tokens", "finish_reason"}.
// Plain error: {"custom_id" (null when empty), "line", "error": {"code", "message"}}.
// OpenAI lines: see openai_output.h; `model` names the model in their response bodies.
// Every error line carries its input "line" number and every completion its custom_id: the
// journal (output_writer.h) and `strata merge` key results by them.
// Bytes of `text` or `message` that are not UTF-8 become U+FFFD, so the line is always valid JSON.
std::string FormatCompletionLine(const Completion& c, std::string_view model = "");
std::string FormatErrorLine(const RequestError& e);

// The error for a line that the reader skipped because it exceeded `max_line_bytes`.
RequestError LineTooLongError(uint64_t line_number, size_t max_line_bytes);

}  // namespace strata
