// ProgressReporter: tells a person where a job stands while it runs. On a terminal it redraws one
// status line (a bar with requests done, tokens/s and ETA) about twice a second; otherwise (a
// Slurm or cron log) it writes one self-contained, timestamped log line every `interval_s`:
//
//   strata info: 2025-01-31T04:05:06 progress 120/~400 requests (30.0%), 2 failed;
//   512 generated tok/s, 1830 total tok/s; elapsed 0:12:34, ETA 0:38:10
//
// "~" marks an estimated total (the input has not been read to its end yet). A resumed job counts
// the lines an earlier run wrote into the requests done and the total, and says how many:
//
//   strata info: 2025-01-31T04:05:06 progress 260/~400 requests (65.0%, 200 already done),
//   0 failed; 512 generated tok/s, 1830 total tok/s; elapsed 0:01:00, ETA 0:02:20
//
// Rates, the ETA and "failed" are this run's own.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace strata {

struct ProgressCounts {
  uint64_t done = 0;              // result lines written by this run (completions and errors)
  uint64_t failed = 0;            // of which error lines
  uint64_t already_done = 0;      // result lines the output held when this run started
  uint64_t expected = 0;          // result lines the output is expected to hold at the end,
                                  // already_done included
  bool expected_exact = false;    // `expected` is known, not estimated
  uint64_t prompt_tokens = 0;     // of the completions written by this run
  uint64_t generated_tokens = 0;  // of the completions written by this run
};

enum class ProgressStyle { kBar, kLog, kOff };

// The log line and the terminal bar for `c` after `elapsed_s` seconds, without timestamp or
// newline; exposed for tests.
std::string FormatProgressLine(const ProgressCounts& c, double elapsed_s);
std::string FormatProgressBar(const ProgressCounts& c, double elapsed_s);

// Thread-safe. Reports from a thread of its own, so a log line also appears while a long block
// runs; the elapsed time starts at construction.
class ProgressReporter {
 public:
  // kBar redraws every 0.5 s and ignores `interval_s`; kLog writes every `interval_s` (> 0)
  // seconds; kOff reports nothing.
  ProgressReporter(ProgressStyle style, double interval_s);
  // Stops the thread after a last report (a bar ends with a newline).
  ~ProgressReporter();
  ProgressReporter(const ProgressReporter&) = delete;
  ProgressReporter& operator=(const ProgressReporter&) = delete;

  void Update(const ProgressCounts& counts);

 private:
  void Loop();
  void Report(bool final);

  const ProgressStyle style_;
  const std::chrono::duration<double> interval_;
  const std::chrono::steady_clock::time_point start_;
  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  ProgressCounts counts_;  // guarded by mu_
  std::thread thread_;
};

}  // namespace strata
