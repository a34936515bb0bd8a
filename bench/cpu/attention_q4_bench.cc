// Throughput of the CPU decode attention on the 4-bit KV cache (kernels/cpu/attention_q4.h), in
// GB/s of compressed cache read (codes + params of K and V for every attended token), per core and
// with all cores, next to the machine's memory read bandwidth measured in the same run.
//
//   attention_q4_bench [--min-mib N] [--cached-mib N] [--reps N] [--threads N]
//                      [--channel-only 1] [--rounds N] [--channel-head-dim N]
//
// Each configuration holds at least --min-mib MiB of compressed cache (default 512, far above the
// last-level cache) spread over sequences x KV heads, so the numbers are DRAM-bound, not L3-bound.
// Every figure is the best of --reps runs. Besides wall-clock GB/s, the one-thread column gives
// GB/s per CPU-second of the process: on a shared machine the load average (printed) steals wall
// time, and that column is what one core does while it runs. A shared machine's memory read
// bandwidth also moves from one minute to the next, so each all-cores cell is set against an
// all-cores read measured just before it ("mem read", "% mem") as well as against the run's
// first one ("% start"). The kernel's own ceiling on the machine is set beside that: all cores
// over a copy of the configuration small enough (--cached-mib, default 8) to stay in the last-level
// cache ("in cache"); "% cache" is the DRAM rate against it, near 100 where the kernel, not the
// memory, is the limit. A last table sets keys by channel (the default cache: kv_q4_channel.h,
// with its exact first token and window) against per-token keys with the same exact rows, the two
// run alternately --rounds times (default 1) with the median ratio last (of wall time, and of the
// process's CPU time, steadier on a loaded machine), at head_dim 64 unless
// --channel-head-dim says otherwise; --channel-only 1 prints that table alone.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "bench/cpu/memory_bandwidth.h"
#include "kernels/cpu/attention_q4.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/kv_q4_exact.h"
#include "kernels/cpu/threads.h"
#include "kernels/kv_q4_format.h"

namespace strata::bench {
namespace {

namespace k = kernels::cpu;

constexpr int kKvHeads = 4;

// The 1-minute load average: other processes on the machine depress every number here.
std::string LoadAverage() {
  std::ifstream in("/proc/loadavg");
  std::string one;
  in >> one;
  return one.empty() ? "unknown" : one;
}

std::string CpuName() {
  std::ifstream in("/proc/cpuinfo");
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("model name", 0) == 0) return line.substr(line.find(':') + 2);
  }
  return "unknown";
}

// The default cache's exact tokens per sequence: its first and a window of a key group.
constexpr int kSink = 1, kWindow = kernels::kQ4ChannelGroup;

// One layer's compressed K and V for `batch` sequences of `context` tokens, random contents;
// with `exact`, also the exact rows of kSink + kWindow tokens, and with `by_channel` keys by
// channel (key params Q4ChannelParamHalves per slot).
struct Cache {
  int batch, head_dim, context;
  bool by_channel;
  std::vector<uint8_t> k_codes, v_codes;
  std::vector<uint16_t> k_params, v_params;
  std::vector<float> exact_k, exact_v;

  Cache(int b, int d, int ctx, bool exact = false, bool channel = false)
      : batch(b), head_dim(d), context(ctx), by_channel(channel) {
    const size_t rows = static_cast<size_t>(b) * kKvHeads * ctx;
    k_codes.resize(rows * kernels::Q4CodeBytes(d));
    v_codes.resize(k_codes.size());
    k_params.resize(rows *
                    (channel ? kernels::Q4ChannelParamHalves(d) : kernels::Q4ParamHalves(d)));
    v_params.resize(rows * kernels::Q4ParamHalves(d));
    if (exact) {
      exact_k.assign(static_cast<size_t>(k::ExactRowsFloats(b, kKvHeads, d, kSink, kWindow)), 0.1f);
      exact_v.assign(exact_k.size(), 0.2f);
    }
    uint64_t state = 0x9E3779B97F4A7C15ull;
    auto next = [&state] {
      state ^= state << 13, state ^= state >> 7, state ^= state << 17;
      return state;
    };
    for (auto* codes : {&k_codes, &v_codes}) {
      for (uint8_t& c : *codes) c = static_cast<uint8_t>(next());
    }
    for (auto* params : {&k_params, &v_params}) {
      for (size_t i = 0; i < params->size(); i += 2) {
        (*params)[i] = k::FloatToHalfBits(0.02f + 0.06f * (next() % 1000) / 1000.0f);
        (*params)[i + 1] = k::FloatToHalfBits(-0.5f + 0.3f * (next() % 1000) / 1000.0f);
      }
    }
  }
  double bytes() const {
    return static_cast<double>(k_codes.size() + v_codes.size()) +
           2.0 * (k_params.size() + v_params.size());
  }
};

struct Speed {
  double wall_gbps = 0;  // bytes per wall-clock second: what the run achieved
  double cpu_gbps = 0;   // bytes per CPU-second of the process: what one busy core does
};

// Best-of-`reps` speeds of `passes` decode steps over the whole cache, back to back. On a shared
// machine the wall-clock figure drops with the load; the CPU-time one barely does.
Speed Run(const Cache& c, int group, k::Q4Isa isa, int threads, int reps, int passes = 1) {
  k::SetCpuThreads(threads);
  k::DecodeAttentionQ4Shape s;
  s.batch = c.batch;
  s.num_kv_heads = kKvHeads;
  s.num_heads = kKvHeads * group;
  s.head_dim = c.head_dim;
  s.max_len = c.context;
  s.cache_len = c.context;
  s.scale = 0.125f;
  s.keys_by_channel = c.by_channel;
  const k::Q4ExactRows exact{kSink, kWindow, c.exact_k.data(), c.exact_v.data()};
  std::vector<float> q(static_cast<size_t>(c.batch) * s.num_heads * c.head_dim);
  for (size_t i = 0; i < q.size(); ++i) q[i] = 0.01f * static_cast<float>(i % 97) - 0.4f;
  std::vector<float> out(q.size());
  std::vector<int> start(static_cast<size_t>(c.batch), 0);
  Speed best;
  for (int r = 0; r <= reps; ++r) {  // the first pass warms up threads and pages
    const auto t0 = std::chrono::steady_clock::now();
    const double cpu0 = ProcessCpuSeconds();
    for (int i = 0; i < passes; ++i) {
      k::DecodeAttentionQ4(s, q.data(), {c.k_codes.data(), c.k_params.data()},
                           {c.v_codes.data(), c.v_params.data()}, start.data(), out.data(), isa,
                           c.exact_k.empty() ? nullptr : &exact);
    }
    const double cpu = ProcessCpuSeconds() - cpu0;
    const double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    if (r == 0) continue;
    best.wall_gbps = std::max(best.wall_gbps, passes * c.bytes() / sec / 1e9);
    best.cpu_gbps = std::max(best.cpu_gbps, passes * c.bytes() / cpu / 1e9);
  }
  return best;
}

int Arg(int argc, char** argv, const char* name, int fallback) {
  for (int i = 1; i + 1 < argc; ++i) {
    if (std::strcmp(argv[i], name) == 0) return std::atoi(argv[i + 1]);
  }
  return fallback;
}

// The per-configuration table and the per-path line.
void Tables(long min_bytes, long cached_bytes, int reps, int all, double bw_all,
            k::Q4Isa best_isa) {
  std::printf("%-8s %-4s %-7s %-5s %-9s | %-22s | %-51s\n", "", "", "", "", "", "1 thread GB/s",
              "all cores GB/s");
  std::printf("%-8s %-4s %-7s %-5s %-9s | %-10s %-11s | %-10s %-9s %-6s %-7s %-9s %-7s\n",
              "head_dim", "gqa", "context", "seqs", "cache MiB", "wall", "per CPU-s", "wall",
              "mem read", "% mem", "% start", "in cache", "% cache");
  for (int head_dim : {64, 128}) {
    for (int context : {512, 2048, 8192, 32768}) {
      const double row =
          context * 2.0 * (kernels::Q4CodeBytes(head_dim) + 2 * kernels::Q4ParamHalves(head_dim));
      const int batch = std::max(1, static_cast<int>(min_bytes / (row * kKvHeads) + 1));
      const Cache cache(batch, head_dim, context);
      const Cache cached(std::max(1, static_cast<int>(cached_bytes / (row * kKvHeads))), head_dim,
                         context);
      const int passes = std::max(1, static_cast<int>(min_bytes / cached.bytes()));
      for (int group : {1, 4, 8}) {
        if (head_dim == 128 && group != 1) continue;
        const Speed one = Run(cache, group, best_isa, 1, reps);
        const double beside = MeasureReadBandwidth(1l << 30, all, reps).wall_gbps;
        const Speed many = Run(cache, group, best_isa, all, reps);
        const Speed ceiling = Run(cached, group, best_isa, all, reps, passes);
        std::printf(
            "%-8d %-4d %-7d %-5d %-9.0f | %-10.1f %-11.1f | %-10.1f %-9.1f %-6.0f %-7.0f %-9.1f "
            "%-7.0f\n",
            head_dim, group, context, batch, cache.bytes() / (1 << 20), one.wall_gbps, one.cpu_gbps,
            many.wall_gbps, beside, 100 * many.wall_gbps / beside, 100 * many.wall_gbps / bw_all,
            ceiling.wall_gbps, 100 * many.wall_gbps / ceiling.wall_gbps);
      }
    }
  }

  std::printf("\nper path, head_dim 64, context 2048, 1 thread, GB/s per CPU-second:\n");
  const Cache cache(std::max(1, static_cast<int>(min_bytes / (2048 * 72.0 * kKvHeads) + 1)), 64,
                    2048);
  for (k::Q4Isa isa : {k::Q4Isa::kScalar, k::Q4Isa::kAvx2, k::Q4Isa::kAvx512}) {
    if (!k::Q4IsaAvailable(isa)) continue;
    std::printf("  %-7s", k::Q4IsaName(isa));
    for (int group : {1, 4, 8}) {
      std::printf("  gqa %d: %5.1f", group, Run(cache, group, isa, 1, reps).cpu_gbps);
    }
    std::printf("\n");
  }
}

int Main(int argc, char** argv) {
  const long min_bytes = static_cast<long>(Arg(argc, argv, "--min-mib", 512)) << 20;
  const long cached_bytes = static_cast<long>(Arg(argc, argv, "--cached-mib", 8)) << 20;
  const int reps = Arg(argc, argv, "--reps", 5);
  const int all = Arg(argc, argv, "--threads", omp_get_max_threads());
  const bool channel_only = Arg(argc, argv, "--channel-only", 0) != 0;
  const int channel_d = Arg(argc, argv, "--channel-head-dim", 64);
  const int rounds = std::max(1, Arg(argc, argv, "--rounds", 1));
  const k::Q4Isa best_isa = k::ResolveQ4Isa(k::Q4Isa::kAuto, 64);

  const ReadBandwidth bw1 = MeasureReadBandwidth(1l << 30, 1, reps);
  const double bw_all = MeasureReadBandwidth(1l << 30, all, reps).wall_gbps;
  std::printf("cpu: %s, %d threads; attention path: %s; load average %s\n", CpuName().c_str(), all,
              k::Q4IsaName(best_isa), LoadAverage().c_str());
  std::printf(
      "memory read bandwidth: 1 thread %.1f GB/s (%.1f per CPU-s), %d threads %.1f GB/s\n\n",
      bw1.wall_gbps, bw1.cpu_gbps, all, bw_all);
  if (!channel_only) Tables(min_bytes, cached_bytes, reps, all, bw_all, best_isa);

  std::printf(
      "\nkeys by channel against per-token keys, both with the first token and the last %d "
      "exact, head_dim %d, context 2048, all cores, wall GB/s of 4-bit cache:\n",
      kWindow, channel_d);
  const double token_bytes =
      kernels::Q4CodeBytes(channel_d) * 2.0 +
      2.0 * (kernels::Q4ParamHalves(channel_d) + kernels::Q4ChannelParamHalves(channel_d));
  const int seqs = std::max(1, static_cast<int>(min_bytes / (2048 * token_bytes * kKvHeads) + 1));
  const Cache per_token(seqs, channel_d, 2048, true, false);
  const Cache by_channel(seqs, channel_d, 2048, true, true);
  // Wall time, and CPU time of the process: on a loaded machine the second is the steadier.
  std::vector<double> ratios[3], cpu_ratios[3];
  for (int round = 0; round < rounds; ++round) {
    for (int i = 0; i < 3; ++i) {
      const int group = i == 0 ? 1 : 4 * i;
      const Speed a = Run(per_token, group, best_isa, all, reps);
      const Speed b = Run(by_channel, group, best_isa, all, reps);
      const double bytes = by_channel.bytes() / per_token.bytes();
      ratios[i].push_back(a.wall_gbps / b.wall_gbps * bytes);
      cpu_ratios[i].push_back(a.cpu_gbps / b.cpu_gbps * bytes);
      std::printf(
          "  gqa %d: per token %5.1f, by channel %5.1f (%.2fx the time per token, %.2fx the CPU "
          "time)\n",
          group, a.wall_gbps, b.wall_gbps, ratios[i].back(), cpu_ratios[i].back());
    }
  }
  if (rounds > 1) {
    for (std::vector<double>* all_ratios : {ratios, cpu_ratios}) {
      std::printf("  median of %d rounds (min-max), %s by channel / per token:", rounds,
                  all_ratios == ratios ? "time" : "CPU time");
      for (int i = 0; i < 3; ++i) {
        std::vector<double>& r = all_ratios[i];
        std::sort(r.begin(), r.end());
        std::printf("  gqa %d: %.2fx (%.2f-%.2f)", i == 0 ? 1 : 4 * i, r[r.size() / 2], r.front(),
                    r.back());
      }
      std::printf("\n");
    }
  }
  return 0;
}

}  // namespace
}  // namespace strata::bench

int main(int argc, char** argv) { return strata::bench::Main(argc, argv); }
