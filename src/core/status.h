// Status and Result<T>: the error values of strata. What a user can cause (bad input, a missing
// file, an infeasible plan) travels as a Status with a message that says what is wrong and what to
// do; only src/cli turns it into an exit code.
#pragma once

#include <optional>
#include <string>
#include <utility>
#include <variant>

namespace strata {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,  // the caller or the user gave something malformed
  kNotFound,         // a file, tensor or key that should exist does not
  kCorrupt,          // a file exists but its contents are inconsistent
  kUnsupported,      // valid input that strata does not handle (yet)
  kOutOfRange,       // a value outside what the model or format allows
  kIoError,          // the operating system refused an operation
  kResourceExhausted,  // memory, disk or a tier's capacity ran out
};

// Thread-compatible value type. An ok Status carries no message.
class Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status NotFound(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status Corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status Unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status OutOfRange(std::string m) { return {StatusCode::kOutOfRange, std::move(m)}; }
  static Status IoError(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status ResourceExhausted(std::string m) {
    return {StatusCode::kResourceExhausted, std::move(m)};
  }

  bool ok() const { return code_ == StatusCode::kOk; }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Returns a copy whose message is "context: message"; an ok Status stays ok.
  Status WithContext(const std::string& context) const {
    return ok() ? *this : Status(code_, context + ": " + message_);
  }

  // "ok" or "<code name>: <message>".
  std::string ToString() const;

 private:
  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

const char* StatusCodeName(StatusCode code);

// Either a value or a non-ok Status. REQUIRES: the Status given to the constructor is not ok.
template <typename T>
class Result {
 public:
  Result(T value) : value_(std::move(value)) {}  // NOLINT: implicit by design
  Result(Status status) : status_(std::move(status)) {}  // NOLINT: implicit by design

  bool ok() const { return value_.has_value(); }
  const Status& status() const { return status_; }

  // REQUIRES: ok().
  T& value() & { return *value_; }
  const T& value() const& { return *value_; }
  T&& value() && { return std::move(*value_); }
  T* operator->() { return &*value_; }
  const T* operator->() const { return &*value_; }
  T& operator*() & { return *value_; }
  const T& operator*() const& { return *value_; }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace strata

#define STRATA_CONCAT_INNER(a, b) a##b
#define STRATA_CONCAT(a, b) STRATA_CONCAT_INNER(a, b)

// Returns the Status of `expr` from the enclosing function when it is not ok.
#define STRATA_RETURN_IF_ERROR(expr)                  \
  do {                                                \
    ::strata::Status strata_status_ = (expr);         \
    if (!strata_status_.ok()) return strata_status_;  \
  } while (0)

// Evaluates a Result-returning `expr`; returns its Status on error, else moves the value to lhs.
#define STRATA_ASSIGN_OR_RETURN(lhs, expr) \
  STRATA_ASSIGN_OR_RETURN_IMPL(STRATA_CONCAT(strata_result_, __LINE__), lhs, expr)
#define STRATA_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                 \
  if (!tmp.ok()) return tmp.status();                \
  lhs = std::move(tmp).value()
