#include "src/core/log.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace strata {
namespace {

LogLevel LevelFromEnv() {
  const char* env = std::getenv("STRATA_LOG");
  if (env == nullptr) return LogLevel::kInfo;
  if (std::strcmp(env, "debug") == 0) return LogLevel::kDebug;
  if (std::strcmp(env, "warn") == 0) return LogLevel::kWarn;
  if (std::strcmp(env, "error") == 0) return LogLevel::kError;
  return LogLevel::kInfo;
}

std::atomic<int> g_level{static_cast<int>(LevelFromEnv())};

}  // namespace

void SetLogLevel(LogLevel level) { g_level = static_cast<int>(level); }

void Log(LogLevel level, const std::string& message) {
  if (static_cast<int>(level) < g_level) return;
  static const char* kNames[] = {"debug", "info", "warn", "error"};
  std::string line = std::string("strata ") + kNames[static_cast<int>(level)] + ": " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
}

}  // namespace strata
