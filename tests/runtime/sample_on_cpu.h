// For tests of BlockSequences: token number `step` of sequences [first, first + count) from
// logits[count, vocab], taken as the engine takes it: drawn (and forced tokens scored) by the CPU
// backend's SampleTokens and ScoreTokens over the first decodable(vocab) ids, then Take.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "src/backend/cpu/cpu_backend.h"
#include "src/runtime/executor_sequences.h"

namespace strata {

inline void SampleOnCpu(BlockSequences& sequences, int first, int count, const float* logits,
                        int vocab, int step) {
  auto backend = MakeCpuBackend();
  const uint64_t bytes = static_cast<uint64_t>(count) * vocab * sizeof(float);
  std::unique_ptr<DeviceArena> arena = std::move(backend->AllocateDeviceArena(bytes)).value();
  const DeviceSpan span = arena->Span(0, bytes, SpanType::kF32);
  auto stream = backend->MakeStream();
  stream->CopyToDevice(span, {reinterpret_cast<const uint8_t*>(logits), bytes});
  std::vector<SamplingSpec> specs;
  std::vector<int32_t> forced;
  sequences.Draws(first, count, step, specs, forced);
  for (int32_t& t : forced) t = std::max(t, 0);
  std::vector<int32_t> sampled(static_cast<size_t>(count));
  std::vector<double> logprobs(static_cast<size_t>(count));
  backend->SampleTokens(*stream, span, vocab, sequences.decodable(vocab), specs, sampled);
  backend->ScoreTokens(*stream, span, vocab, forced, logprobs);
  stream->Synchronize();
  sequences.Take(first, count, step, sampled.data(), logprobs.data());
}

}  // namespace strata
