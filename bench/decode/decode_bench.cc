// CPU decode throughput of the engine (OffloadGenerator on the CPU backend, everything on the
// device tier: weights, KV cache and hidden states in host memory, one micro-batch) on a real
// model, next to its memory-bandwidth bound, both measured here.
//
//   build/bench/decode/decode_bench [--model PATH] [--batch 1,32] [--steps 32] [--prompt-len 16]
//
// A decode step reads every weight once (the tied LM head included), so at batch B the bound is
// B * read_bandwidth / weight_bytes tokens/s. The bandwidth is measured in this program
// (bench/cpu/memory_bandwidth.h, a 1 GiB buffer read by all threads). Each batch runs one block;
// placing it and bringing the weights home happen before the clock starts, and the decode time
// is the executor's (ExecutorMetrics: the block's wall time less its prefill).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "bench/cpu/memory_bandwidth.h"
#include "policy/plan.h"
#include "src/backend/backend.h"
#include "src/backend/cpu/cpu_backend.h"
#include "src/model/model.h"
#include "src/runtime/generation.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"

namespace {

std::vector<int> ParseList(const std::string& s) {
  std::vector<int> out;
  size_t pos = 0;
  while (pos < s.size()) {
    const size_t comma = s.find(',', pos);
    out.push_back(std::atoi(s.substr(pos, comma - pos).c_str()));
    if (comma == std::string::npos) break;
    pos = comma + 1;
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const char* home = std::getenv("HOME");
  std::string model_path = std::string(home ? home : ".") +
                           "/.cache/strata/models/SmolLM2-135M-Instruct.Q4_1.gguf";
  std::vector<int> batches = {1, 32};
  int steps = 32;
  int prompt_len = 16;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--model") model_path = argv[i + 1];
    else if (flag == "--batch") batches = ParseList(argv[i + 1]);
    else if (flag == "--steps") steps = std::atoi(argv[i + 1]);
    else if (flag == "--prompt-len") prompt_len = std::atoi(argv[i + 1]);
  }
  auto model = strata::LoadModel(model_path);
  if (!model.ok()) {
    std::fprintf(stderr, "%s\n", model.status().ToString().c_str());
    return 2;
  }
  auto tokenizer = strata::LoadTokenizerForModel(**model);
  if (!tokenizer.ok()) {
    std::fprintf(stderr, "%s\n", tokenizer.status().ToString().c_str());
    return 2;
  }
  const double bw =
      strata::bench::MeasureReadBandwidth(1l << 30, omp_get_max_threads(), 5).wall_gbps;
  const double weight_gb = (*model)->weight_bytes() / 1e9;
  std::printf("model %s\nthreads %d, weights read per decode step %.3f GB, read bandwidth %.2f GB/s\n",
              model_path.c_str(), omp_get_max_threads(), weight_gb, bw);
  std::printf("%6s %12s %14s %12s %8s\n", "batch", "decode tok/s", "bound tok/s", "step ms", "ratio");

  auto backend = strata::MakeCpuBackend();
  auto cpu_backend = strata::MakeCpuBackend();
  for (int batch : batches) {
    // The prefill predicts the first token; `steps` decode steps follow.
    std::vector<strata::GenerationRequest> block(batch);
    for (int b = 0; b < batch; ++b) {
      for (int t = 0; t < prompt_len; ++t) block[b].prompt.push_back(100 + (b * 7 + t * 13) % 1000);
      block[b].max_new_tokens = steps + 1;
      block[b].sampling.temperature = 0.0f;
      block[b].ignore_eos = true;
    }
    strata::Result<strata::Plan> plan =
        strata::PlanFromFlexGenPercent({100, 0, 100, 0, 100, 0}, batch, 1);
    if (!plan.ok()) {
      std::fprintf(stderr, "%s\n", plan.status().ToString().c_str());
      return 2;
    }
    strata::OffloadOptions options;
    options.plan = *plan;
    strata::OffloadGenerator generator(**model, *backend, *cpu_backend, **tokenizer, {}, options);
    if (auto schedule = generator.ScheduleFor(batch, prompt_len, steps + 1); !schedule.ok()) {
      std::fprintf(stderr, "%s\n", schedule.status().ToString().c_str());
      return 2;
    }
    if (auto out = generator.TryGenerate(block); !out.ok()) {
      std::fprintf(stderr, "%s\n", out.status().ToString().c_str());
      return 2;
    }
    const strata::ExecutorMetrics& m = generator.metrics();
    const double decode_s = m.wall_s - m.prefill_s;
    const double tok_s = batch * steps / decode_s;
    const double bound = batch * bw / weight_gb;
    std::printf("%6d %12.1f %14.1f %12.2f %8.3f\n", batch, tok_s, bound, decode_s / steps * 1e3,
                tok_s / bound);
  }
  return 0;
}
