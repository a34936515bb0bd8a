#include "src/job/progress.h"

#include <cstdio>
#include <ctime>

#include "src/core/log.h"

namespace strata {
namespace {

constexpr double kBarRefreshS = 0.5;
constexpr int kBarWidth = 24;

std::string Clock(double seconds) {
  const long s = seconds < 0 ? 0 : static_cast<long>(seconds + 0.5);
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%ld:%02ld:%02ld", s / 3600, s / 60 % 60, s % 60);
  return buf;
}

std::string Fixed(double v, int digits) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

// Result lines in the output: this run's and an earlier run's.
uint64_t Done(const ProgressCounts& c) { return c.already_done + c.done; }

double Fraction(const ProgressCounts& c) {
  if (c.expected == 0) return c.expected_exact ? 1.0 : 0.0;
  return Done(c) >= c.expected ? 1.0 : static_cast<double>(Done(c)) / c.expected;
}

// Remaining time extrapolated from this run's pace so far; "?" before its first result.
std::string Eta(const ProgressCounts& c, double elapsed_s) {
  if (c.done == 0) return "?";
  const double left = c.expected > Done(c) ? static_cast<double>(c.expected - Done(c)) : 0.0;
  return Clock(elapsed_s * left / static_cast<double>(c.done));
}

std::string Total(const ProgressCounts& c) {
  std::string total = c.expected_exact ? "" : "~";
  return total + std::to_string(c.expected);
}

double Rate(uint64_t n, double s) { return s > 0 ? static_cast<double>(n) / s : 0.0; }

std::string Timestamp() {
  const std::time_t now = std::time(nullptr);
  std::tm tm;
  localtime_r(&now, &tm);
  char buf[32];
  std::strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
  return buf;
}

}  // namespace

std::string FormatProgressLine(const ProgressCounts& c, double elapsed_s) {
  return "progress " + std::to_string(Done(c)) + "/" + Total(c) + " requests (" +
         Fixed(100.0 * Fraction(c), 1) + "%" +
         (c.already_done ? ", " + std::to_string(c.already_done) + " already done" : "") + "), " +
         std::to_string(c.failed) + " failed; " +
         Fixed(Rate(c.generated_tokens, elapsed_s), 0) + " generated tok/s, " +
         Fixed(Rate(c.prompt_tokens + c.generated_tokens, elapsed_s), 0) +
         " total tok/s; elapsed " + Clock(elapsed_s) + ", ETA " + Eta(c, elapsed_s);
}

std::string FormatProgressBar(const ProgressCounts& c, double elapsed_s) {
  const int filled = static_cast<int>(Fraction(c) * kBarWidth);
  return std::string("[") + std::string(filled, '#') + std::string(kBarWidth - filled, '-') + "] " +
         std::to_string(Done(c)) + "/" + Total(c) + " requests " +
         Fixed(100.0 * Fraction(c), 0) + "% | " + Fixed(Rate(c.generated_tokens, elapsed_s), 0) +
         " tok/s | ETA " + Eta(c, elapsed_s) + (c.failed ? " | " + std::to_string(c.failed) +
                                                    " failed" : "");
}

ProgressReporter::ProgressReporter(ProgressStyle style, double interval_s)
    : style_(style),
      interval_(style == ProgressStyle::kBar ? kBarRefreshS : interval_s),
      start_(std::chrono::steady_clock::now()) {
  if (style_ != ProgressStyle::kOff) thread_ = std::thread([this] { Loop(); });
}

ProgressReporter::~ProgressReporter() {
  if (!thread_.joinable()) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

void ProgressReporter::Update(const ProgressCounts& counts) {
  std::lock_guard<std::mutex> lock(mu_);
  counts_ = counts;
}

void ProgressReporter::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!wake_.wait_for(lock, interval_, [this] { return stopping_; })) {
    lock.unlock();
    Report(/*final=*/false);
    lock.lock();
  }
  lock.unlock();
  Report(/*final=*/true);
}

void ProgressReporter::Report(bool final) {
  ProgressCounts c;
  {
    std::lock_guard<std::mutex> lock(mu_);
    c = counts_;
  }
  const double elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  if (style_ == ProgressStyle::kLog) {
    LogInfo(Timestamp() + " " + FormatProgressLine(c, elapsed));
    return;
  }
  // "\r" returns to the start of the line and "\x1b[K" clears what a longer line left.
  const std::string line =
      std::string("\r") + FormatProgressBar(c, elapsed) + "\x1b[K" + (final ? "\n" : "");
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace strata
