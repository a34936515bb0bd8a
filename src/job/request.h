// Requests and completions of a batch job, and their JSONL forms. Parsing never throws: a line
// that cannot run becomes a RequestError that names the problem, written back as an error line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "src/core/status.h"

namespace strata {

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

struct Request {
  std::string custom_id;
  std::string prompt;
  SamplingParams sampling;
  uint64_t line_number = 0;  // 1-based line in the input file
};

// Why a line could not run. `custom_id` is empty when the line did not yield one.
struct RequestError {
  std::string custom_id;
  uint64_t line_number = 0;
  std::string code;     // stable machine-readable code, e.g. "invalid_json", "prompt_too_long"
  std::string message;  // for people: what is wrong and what to do
};

enum class FinishReason { kStop, kLength };
const char* FinishReasonName(FinishReason r);  // "stop" / "length"

struct Completion {
  std::string custom_id;
  std::string text;
  int prompt_tokens = 0;
  int completion_tokens = 0;
  FinishReason finish_reason = FinishReason::kLength;
};

// Parses one input line (without its newline). Returns the Request or the error for that line.
// `line_number` is 1-based and is copied into either result.
struct ParsedLine {
  std::optional<Request> request;
  std::optional<RequestError> error;
};
ParsedLine ParseRequestLine(std::string_view line, uint64_t line_number);

// One JSON object per line, without the trailing newline.
std::string FormatCompletionLine(const Completion& c);
std::string FormatErrorLine(const RequestError& e);

}  // namespace strata
