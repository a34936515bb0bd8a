// A device backend that does not run a 4-bit cache format at the model's head size
// (Backend::SupportsKvQ4; the CUDA backend runs keys by channel at head_dim 64, 80, 96, 128 and
// 256) is refused when the engine places the plan: TryGenerate returns its Unsupported status,
// naming the head size, before a device arena is allocated; the same model without the 4-bit
// cache runs.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "src/model/model.h"
#include "src/runtime/model_tokenizer.h"
#include "src/runtime/offload_generator.h"
#include "tests/backend/forwarding_backend.h"

namespace strata {
namespace {

// The CPU backend, but for the 4-bit cache ops at `refused_head_dim`, and counting its arenas.
class HeadDimRefusingBackend final : public ForwardingBackend {
 public:
  explicit HeadDimRefusingBackend(int refused_head_dim) : refused_(refused_head_dim) {}

  Status SupportsKvQ4(const KvQ4Format&, int head_dim) const override {
    if (head_dim == refused_) {
      return Status::Unsupported("no 4-bit cache at head_dim " + std::to_string(head_dim));
    }
    return Status::Ok();
  }
  Result<std::unique_ptr<DeviceArena>> AllocateDeviceArena(uint64_t bytes) override {
    ++arenas;
    return ForwardingBackend::AllocateDeviceArena(bytes);
  }

  int arenas = 0;

 private:
  int refused_;
};

Result<std::vector<GenerationResult>> Generate(bool compress_cache, HeadDimRefusingBackend& device) {
  const std::string path = std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa";
  std::unique_ptr<Model> model = LoadModel(path).value();
  std::unique_ptr<Tokenizer> tokenizer = LoadTokenizerForModel(*model).value();
  auto cpu = MakeCpuBackend();
  OffloadOptions o;
  o.plan.gpu_batch_size = 2;
  o.plan.compress_cache = compress_cache;
  OffloadGenerator engine(*model, device, *cpu, *tokenizer, {}, o);
  std::vector<GenerationRequest> requests(2);
  for (GenerationRequest& r : requests) {
    r.prompt = {1, 2, 3};
    r.max_new_tokens = 2;
  }
  return engine.TryGenerate(requests);
}

TEST(KvQ4SupportTest, APlanTheDeviceCannotRunIsRefusedWhenPlaced) {
  const int head_dim = LoadModel(std::string(STRATA_SOURCE_DIR) + "/tests/data/fixtures/llama-gqa")
                           .value()
                           ->config()
                           .head_dim;
  HeadDimRefusingBackend refusing(head_dim);
  const Result<std::vector<GenerationResult>> q4 = Generate(true, refusing);
  ASSERT_FALSE(q4.ok());
  EXPECT_EQ(q4.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(q4.status().message().find("head_dim " + std::to_string(head_dim)), std::string::npos)
      << q4.status().message();
  EXPECT_EQ(refusing.arenas, 0);

  const Result<std::vector<GenerationResult>> fp32 = Generate(false, refusing);
  ASSERT_TRUE(fp32.ok()) << fp32.status().message();
  EXPECT_EQ(refusing.arenas, 1);

  HeadDimRefusingBackend other(head_dim * 2);
  EXPECT_TRUE(Generate(true, other).ok());
}

}  // namespace
}  // namespace strata
