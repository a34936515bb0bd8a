// Runs the strata binary from a test and captures its exit code and stderr.
#pragma once

#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <thread>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace strata {

struct CliResult {
  int exit_code = -1;
  std::string stderr_text;
};

// Runs `STRATA_BINARY args` through the shell; stderr is captured, stdout discarded. Kernels run
// on one thread (OMP_NUM_THREADS=1): the test machines are small and shared.
inline CliResult RunStrata(const std::string& args, const std::string& env = "") {
  const std::string err_path = std::filesystem::temp_directory_path() /
                               ("strata_cli_err_" + std::to_string(::getpid()));
  const std::string cmd = "OMP_NUM_THREADS=1 " + env + " " + STRATA_BINARY + " " + args +
                          " >/dev/null 2>" + err_path;
  const int status = std::system(cmd.c_str());
  CliResult r;
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  std::ifstream in(err_path);
  r.stderr_text.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  std::filesystem::remove(err_path);
  return r;
}

// Starts `STRATA_BINARY args...` without a shell, on one kernel thread, with stdout discarded and
// stderr appended to `stderr_path`; returns its pid.
inline pid_t StartStrata(const std::vector<std::string>& args, const std::string& stderr_path) {
  const pid_t pid = ::fork();
  if (pid != 0) return pid;
  ::setenv("OMP_NUM_THREADS", "1", 1);
  const int out = ::open("/dev/null", O_WRONLY);
  const int err = ::open(stderr_path.c_str(), O_WRONLY | O_CREAT | O_APPEND, 0644);
  ::dup2(out, 1);
  ::dup2(err, 2);
  std::vector<char*> argv{const_cast<char*>(STRATA_BINARY)};
  for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  ::execv(STRATA_BINARY, argv.data());
  ::_exit(127);
}

// Waits for `pid`; returns its exit code, or 128 + the signal that killed it.
inline int WaitStrata(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// The lines of a text file, sorted: for comparing outputs whose block order may differ.
inline std::vector<std::string> SortedLines(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1) {
    lines.push_back(text.substr(start, nl - start));
  }
  if (start < text.size()) lines.push_back(text.substr(start));
  std::sort(lines.begin(), lines.end());
  return lines;
}

inline std::vector<nlohmann::json> ReadJsonLines(const std::string& path) {
  std::ifstream in(path);
  std::vector<nlohmann::json> lines;
  for (std::string line; std::getline(in, line);) lines.push_back(nlohmann::json::parse(line));
  return lines;
}

// A fresh scratch directory per test.
class CliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    // The pid keeps two builds running the same test at once (side by side checkouts, CI
    // jobs) out of each other's way.
    std::string name = std::string("strata_cli_") + info->test_suite_name() + "_" + info->name() +
                       "_" + std::to_string(::getpid());
    std::replace(name.begin(), name.end(), '/', '_');
    dir_ = std::filesystem::temp_directory_path() / name;
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string Path(const std::string& name) const { return (dir_ / name).string(); }
  // RunStrata, with stdout kept in Path(stdout_name) (and stderr in Path("stderr.txt")).
  CliResult RunKeepingStdout(const std::string& args, const std::string& stdout_name,
                             const std::string& env = "") const {
    const std::string cmd = "OMP_NUM_THREADS=1 " + env + " " + STRATA_BINARY + " " + args +
                            " >" + Path(stdout_name) + " 2>" + Path("stderr.txt");
    const int status = std::system(cmd.c_str());
    return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, ReadFile(Path("stderr.txt"))};
  }
  void Write(const std::string& name, const std::string& text) const {
    std::ofstream(Path(name), std::ios::binary) << text;
  }

  std::filesystem::path dir_;
};

// Waits until `path` is not empty; false when `pid` exits first.
inline bool WaitForOutput(const std::string& path, pid_t pid) {
  std::error_code ec;
  while (std::filesystem::file_size(path, ec) == 0 || ec) {
    siginfo_t info{};
    if (::waitid(P_PID, pid, &info, WEXITED | WNOHANG | WNOWAIT) == 0 && info.si_pid != 0) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  return true;
}

// The default model in the cache ($STRATA_CACHE, else ~/.cache/strata); empty when missing.
inline std::string DefaultModelPath() {
  const char* cache = std::getenv("STRATA_CACHE");
  const char* xdg = std::getenv("XDG_CACHE_HOME");
  const std::string dir = cache && *cache ? cache
                          : xdg && *xdg   ? std::string(xdg) + "/strata"
                                          : std::string(std::getenv("HOME")) + "/.cache/strata";
  const std::string path = dir + "/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  return std::filesystem::exists(path) ? path : "";
}

inline const std::string kFixtureModel = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/";

}  // namespace strata
