#include "src/backend/cpu/cpu_probes.h"

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <functional>
#include <random>
#include <thread>
#include <vector>

#include "kernels/cpu/attention.h"
#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/weight_q4.h"
#include "kernels/kv_q4_format.h"

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

namespace {

// GEMMs of 2 rows against 4096 x 4096 weight matrices taken in turn from 512 MiB of them, so that
// no matrix is still in the caches (as the executor's decode GEMMs go through every layer's
// weights before they come back to the first).
class WeightStream {
 public:
  static constexpr int kRows = 2, kN = 4096, kK = 4096;
  static constexpr size_t kMatrix = size_t(kN) * kK;
  static constexpr size_t kMatrices = (size_t{512} << 20) / (kMatrix * sizeof(float));

  WeightStream()
      : a_(RandomFloats(size_t(kRows) * kK)),
        w_(kMatrix * kMatrices, 0.01f),
        c_(size_t(kRows) * kN) {}
  void Next() {
    const float* b = w_.data() + (next_++ % kMatrices) * kMatrix;
    kernels::cpu::GemmNT(kRows, kN, kK, a_.data(), b, c_.data(), kN, false);
  }

 private:
  std::vector<float> a_, w_, c_;
  size_t next_ = 0;
};

}  // namespace

double GemmWeightStreamGbps() {
  WeightStream stream;
  const double s = TimePerCall([&] { stream.Next(); }, 1.0);
  return WeightStream::kMatrix * sizeof(float) / s / 1e9;
}

double MemcpyBesideGemmGbps() {
  WeightStream stream;
  std::atomic<bool> stop{false};
  std::thread gemm([&] {
    while (!stop.load(std::memory_order_relaxed)) stream.Next();
  });
  const double gbps = MemcpyGbps();
  stop = true;
  gemm.join();
  return gbps;
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

double DecodeAttentionQ4Gbps(int sink, int window) {
  const kernels::cpu::DecodeAttentionQ4Shape s{.batch = 8,
                                               .num_heads = 32,
                                               .num_kv_heads = 8,
                                               .head_dim = 128,
                                               .max_len = 2048,
                                               .cache_len = 2048,
                                               .scale = 0.088f,
                                               .keys_by_channel = true};
  const size_t tokens = size_t(s.batch) * s.num_kv_heads * s.max_len;
  std::vector<uint8_t> k_codes(tokens * s.head_dim / 2), v_codes(k_codes.size());
  std::mt19937 rng(7);
  for (uint8_t& b : k_codes) b = static_cast<uint8_t>(rng());
  v_codes = k_codes;
  std::vector<uint16_t> k_params(tokens * kernels::Q4ChannelParamHalves(s.head_dim));
  std::vector<uint16_t> v_params(tokens * kernels::Q4ParamHalves(s.head_dim));
  for (std::vector<uint16_t>* p : {&k_params, &v_params}) {
    for (size_t i = 0; i < p->size(); ++i) (*p)[i] = (i % 2) ? 0xB800 : 0x2C00;
  }
  const std::vector<float> exact_k = RandomFloats(static_cast<size_t>(kernels::cpu::ExactRowsFloats(
      s.batch, s.num_kv_heads, s.head_dim, sink, window)));
  const std::vector<float> exact_v = exact_k;
  const kernels::cpu::Q4ExactRows exact{sink, window, exact_k.data(),
                                        exact_v.data()};
  const std::vector<float> q = RandomFloats(size_t(s.batch) * s.num_heads * s.head_dim);
  std::vector<float> out(q.size());
  const std::vector<int> start(s.batch, 0);
  const double t = TimePerCall(
      [&] {
        kernels::cpu::DecodeAttentionQ4(s, q.data(), {k_codes.data(), k_params.data()},
                                        {v_codes.data(), v_params.data()}, start.data(),
                                        out.data(), kernels::cpu::Q4Isa::kAuto, &exact);
      },
      1.0);
  // Codes are bytes, params fp16; the exact rows are not counted (a fixed few per sequence).
  const double bytes = static_cast<double>(k_codes.size() + v_codes.size()) +
                       2.0 * static_cast<double>(k_params.size() + v_params.size());
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
  std::vector<uint16_t> params(
      kernels::cpu::WeightQ4ParamHalves(rows, cols, kernels::cpu::kWeightQ4Group), 0x2C00);
  std::vector<float> out(size_t(rows) * cols);
  const double t = TimePerCall(
      [&] {
        kernels::cpu::ExpandWeightQ4(codes.data(), params.data(), rows, cols,
                                     kernels::cpu::kWeightQ4Group, out.data());
      },
      1.0);
  return 2.0 * rows * cols / t / 1e9;
}

int64_t LastLevelCacheBytes() {
  int best_level = 0;
  int64_t bytes = 0;
  for (int index = 0;; ++index) {
    const std::string dir = "/sys/devices/system/cpu/cpu0/cache/index" + std::to_string(index);
    std::ifstream level_file(dir + "/level"), type_file(dir + "/type"), size_file(dir + "/size");
    int level = 0;
    std::string type, size;
    if (!(level_file >> level) || !(type_file >> type) || !(size_file >> size)) break;
    if (type == "Instruction" || level <= best_level || size.empty()) continue;
    const int64_t unit = size.back() == 'K' ? 1 << 10 : size.back() == 'M' ? 1 << 20 : 1;
    best_level = level;
    bytes = std::strtoll(size.c_str(), nullptr, 10) * unit;
  }
  return bytes;
}

}  // namespace strata::profile
