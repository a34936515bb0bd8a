// Logging to stderr. Thread-safe: each call writes one whole line.
#pragma once

#include <string>

namespace strata {

enum class LogLevel { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };

// Messages below `level` are dropped. Default kInfo; STRATA_LOG=debug|info|warn|error overrides.
void SetLogLevel(LogLevel level);
void Log(LogLevel level, const std::string& message);
inline void LogInfo(const std::string& m) { Log(LogLevel::kInfo, m); }
inline void LogWarn(const std::string& m) { Log(LogLevel::kWarn, m); }
inline void LogDebug(const std::string& m) { Log(LogLevel::kDebug, m); }

}  // namespace strata
