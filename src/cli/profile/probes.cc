#include "src/cli/profile/probes.h"

#include <fcntl.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/weight_q4.h"

namespace strata::profile {
namespace {

using Clock = std::chrono::steady_clock;

// Runs `work` once to warm up, then repeatedly for about `seconds`; returns the mean seconds per
// call.
double TimePerCall(const std::function<void()>& work, double seconds) {
  work();
  int calls = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    work();
    ++calls;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return elapsed / calls;
}

std::vector<float> RandomFloats(size_t n) {
  std::vector<float> v(n);
  std::mt19937 rng(7);
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  for (float& x : v) x = dist(rng);
  return v;
}

struct FreeDeleter {
  void operator()(void* p) const { std::free(p); }
};

}  // namespace

double HostReadGbps() {
  const size_t n = size_t{128} << 20;  // 512 MiB of int32
  std::vector<int32_t> data(n, 1);
  int64_t sink = 0;
  const double s = TimePerCall(
      [&] {
        int64_t sum = 0;
#pragma omp parallel for reduction(+ : sum) schedule(static)
        for (size_t i = 0; i < n; ++i) sum += data[i];
        sink += sum;
      },
      1.0);
  return sink == 0 ? 0 : n * sizeof(int32_t) / s / 1e9;
}

double MemcpyGbps() {
  const size_t bytes = size_t{256} << 20;
  std::vector<char> a(bytes, 1), b(bytes, 0);
  const double s = TimePerCall([&] { std::memcpy(b.data(), a.data(), bytes); }, 0.5);
  return bytes / s / 1e9;
}

double GemmTflops(int rows) {
  const int n = 4096, k = 4096;
  const std::vector<float> a = RandomFloats(size_t(rows) * k), w = RandomFloats(size_t(n) * k);
  std::vector<float> c(size_t(rows) * n);
  const double s = TimePerCall(
      [&] { kernels::cpu::GemmNT(rows, n, k, a.data(), w.data(), c.data(), n, false); }, 1.0);
  return 2.0 * rows * n * k / s / 1e12;
}

double DecodeAttentionGbps() {
  const kernels::cpu::AttentionShape s{.batch = 8,
                                       .new_tokens = 1,
                                       .num_heads = 32,
                                       .num_kv_heads = 8,
                                       .head_dim = 128,
                                       .max_len = 2048,
                                       .cache_len = 2048,
                                       .scale = 0.088f};
  const size_t cache = size_t(s.batch) * s.num_kv_heads * s.max_len * s.head_dim;
  const std::vector<float> k = RandomFloats(cache), v = RandomFloats(cache);
  const std::vector<float> q = RandomFloats(size_t(s.batch) * s.num_heads * s.head_dim);
  std::vector<float> out(q.size());
  const std::vector<int> start(s.batch, 0);
  const double t = TimePerCall(
      [&] {
        kernels::cpu::CausalAttention(s, q.data(), k.data(), v.data(), start.data(), out.data());
      },
      1.0);
  return 2.0 * cache * sizeof(float) / t / 1e9;
}

double DecodeAttentionQ4Gbps() {
  const kernels::cpu::DecodeAttentionQ4Shape s{.batch = 8,
                                               .num_heads = 32,
                                               .num_kv_heads = 8,
                                               .head_dim = 128,
                                               .max_len = 2048,
                                               .cache_len = 2048,
                                               .scale = 0.088f};
  const size_t tokens = size_t(s.batch) * s.num_kv_heads * s.max_len;
  std::vector<uint8_t> k_codes(tokens * s.head_dim / 2), v_codes(k_codes.size());
  std::mt19937 rng(7);
  for (uint8_t& b : k_codes) b = static_cast<uint8_t>(rng());
  v_codes = k_codes;
  const size_t params = tokens * (s.head_dim / 64) * 2;
  std::vector<uint16_t> k_params(params), v_params(params);
  for (size_t i = 0; i < params; ++i) k_params[i] = v_params[i] = (i % 2) ? 0xB800 : 0x2C00;
  const std::vector<float> q = RandomFloats(size_t(s.batch) * s.num_heads * s.head_dim);
  std::vector<float> out(q.size());
  const std::vector<int> start(s.batch, 0);
  const double t = TimePerCall(
      [&] {
        kernels::cpu::DecodeAttentionQ4(s, q.data(), {k_codes.data(), k_params.data()},
                                        {v_codes.data(), v_params.data()}, start.data(),
                                        out.data());
      },
      1.0);
  const double bytes = 2.0 * (k_codes.size() + params * sizeof(uint16_t));
  return bytes / t / 1e9;
}

double PrefillAttentionTflops() {
  const kernels::cpu::AttentionShape s{.batch = 1,
                                       .new_tokens = 512,
                                       .num_heads = 32,
                                       .num_kv_heads = 8,
                                       .head_dim = 128,
                                       .max_len = 512,
                                       .cache_len = 512,
                                       .scale = 0.088f};
  const size_t cache = size_t(s.num_kv_heads) * s.max_len * s.head_dim;
  const std::vector<float> k = RandomFloats(cache), v = RandomFloats(cache);
  const std::vector<float> q = RandomFloats(size_t(s.new_tokens) * s.num_heads * s.head_dim);
  std::vector<float> out(q.size());
  const std::vector<int> start(1, 0);
  const double t = TimePerCall(
      [&] {
        kernels::cpu::CausalAttention(s, q.data(), k.data(), v.data(), start.data(), out.data());
      },
      1.0);
  return 4.0 * s.new_tokens * s.new_tokens * s.num_heads * s.head_dim / t / 1e12;
}

double ExpandQ4Gbps() {
  const long rows = 4096, cols = 4096;
  std::vector<uint8_t> codes(kernels::cpu::WeightQ4CodeBytes(rows, cols), 0x5A);
  std::vector<uint16_t> params(kernels::cpu::WeightQ4ParamHalves(rows, cols), 0x2C00);
  std::vector<float> out(size_t(rows) * cols);
  const double t = TimePerCall(
      [&] { kernels::cpu::ExpandWeightQ4(codes.data(), params.data(), rows, cols, out.data()); },
      1.0);
  return 2.0 * rows * cols / t / 1e9;
}

Result<DiskRates> MeasureDisk(const std::string& dir, int64_t max_bytes) {
  constexpr size_t kRequest = size_t{4} << 20;
  const std::string path = dir + "/strata-profile-" + std::to_string(getpid()) + ".tmp";
  DiskRates rates;
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0 && errno == EINVAL) {  // tmpfs and some overlay filesystems refuse O_DIRECT
    rates.direct = false;
    fd = open(path.c_str(), O_RDWR | O_CREAT | O_TRUNC, 0600);
  }
  if (fd < 0) {
    return Status::IoError("cannot create a scratch file in '" + dir +
                           "': " + std::strerror(errno));
  }
  void* raw = nullptr;
  if (posix_memalign(&raw, 4096, kRequest) != 0) {
    close(fd);
    unlink(path.c_str());
    return Status::ResourceExhausted("cannot allocate an aligned I/O buffer");
  }
  std::unique_ptr<void, FreeDeleter> buffer(raw);
  std::memset(raw, 0x5A, kRequest);
  Status status;
  int64_t written = 0;
  auto start = Clock::now();
  while (written + int64_t(kRequest) <= max_bytes &&
         std::chrono::duration<double>(Clock::now() - start).count() < 2.0) {
    if (pwrite(fd, raw, kRequest, written) != ssize_t(kRequest)) {
      status = Status::IoError("writing '" + path + "': " + std::strerror(errno));
      break;
    }
    written += kRequest;
  }
  if (status.ok() && fdatasync(fd) != 0) status = Status::IoError(std::strerror(errno));
  rates.write_gbps = written / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
  if (!rates.direct) posix_fadvise(fd, 0, 0, POSIX_FADV_DONTNEED);  // read from the disk
  int64_t read = 0;
  start = Clock::now();
  while (status.ok() && read < written &&
         std::chrono::duration<double>(Clock::now() - start).count() < 2.0) {
    if (pread(fd, raw, kRequest, read) != ssize_t(kRequest)) {
      status = Status::IoError("reading '" + path + "': " + std::strerror(errno));
      break;
    }
    read += kRequest;
  }
  rates.read_gbps = read / std::chrono::duration<double>(Clock::now() - start).count() / 1e9;
  close(fd);
  unlink(path.c_str());
  if (!status.ok()) return status;
  if (written == 0) return Status::IoError("no space to measure the disk in '" + dir + "'");
  return rates;
}

int64_t AvailableHostBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  int64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return int64_t{sysconf(_SC_AVPHYS_PAGES)} * sysconf(_SC_PAGE_SIZE);
}

Result<int64_t> FreeDiskBytes(const std::string& dir) {
  struct statvfs fs {};
  if (statvfs(dir.c_str(), &fs) != 0) {
    return Status::IoError("cannot stat '" + dir + "': " + std::strerror(errno));
  }
  return int64_t(fs.f_bavail) * int64_t(fs.f_frsize);
}

int OnlineCores() { return std::max<long>(1, sysconf(_SC_NPROCESSORS_ONLN)); }

}  // namespace strata::profile
