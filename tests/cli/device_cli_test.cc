// --device, --activations and --gpu-memory through the binary. `--device cuda` where no GPU is
// usable (no driver, no device, or a build without the CUDA backend) ends run, bench, perplexity
// and profile with exit 2 and a message that names the flag, the reason and --device cpu, before
// a model loads or an output is written; where `nvidia-smi -L` lists a GPU the same commands
// compute on it and succeed. --activations sets the device's storage type. --gpu-memory takes
// sizes with units, is the capacity `plan` searches for (as its older spelling --gpu-mem-gib),
// and a device tier below what a run needs ends it with exit 2 naming --gpu-memory.
#include <cstdlib>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

using Json = nlohmann::json;

const std::string kModel = kFixtureModel + "llama-gqa";

// Whether the machine has an NVIDIA GPU, asked of the driver's own tool rather than of strata.
bool GpuListed() { return std::system("nvidia-smi -L >/dev/null 2>&1") == 0; }

class DeviceCliTest : public CliTest {
 protected:
  // The GPU capacity `strata plan ARGS --json` planned for; -1 when it fails.
  int64_t PlannedGpuCapacity(const std::string& args) {
    const CliResult r = RunKeepingStdout(
        "plan --model opt-30b --hardware h100-80g --prompt-len 512 --gen-len 32 --json " + args,
        "plan.json");
    if (r.exit_code != 0) {
      ADD_FAILURE() << args << ": exit " << r.exit_code << "\n" << r.stderr_text;
      return -1;
    }
    return Json::parse(ReadFile(Path("plan.json")))["memory"]["GPU"]["capacity_bytes"].get<int64_t>();
  }

  // Checks a command given --device cuda: on the GPU where one is listed, else refused.
  void ExpectCudaRunsOrIsRefused(const std::string& args, const std::string& output) {
    SCOPED_TRACE(args);
    const CliResult r = RunStrata(args + " --device cuda");
    if (GpuListed()) {
      EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
      return;
    }
    EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--device cuda: "), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--device cpu"), std::string::npos) << r.stderr_text;
    EXPECT_EQ(r.stderr_text.find("Aborted"), std::string::npos) << r.stderr_text;
    if (!output.empty()) {
      EXPECT_FALSE(std::filesystem::exists(output)) << output;
    }
  }
};

TEST_F(DeviceCliTest, CudaWithoutAUsableGpuExitsTwoBeforeAnythingRuns) {
  Write("in.jsonl", "{\"custom_id\": \"a\", \"prompt\": \"hello\", \"max_tokens\": 2}\n");
  Write("text.txt", std::string(400, 'a') + " the end\n");
  ExpectCudaRunsOrIsRefused("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl"),
                            Path("out.jsonl"));
  ExpectCudaRunsOrIsRefused(
      "bench --model " + kModel + " --prompt-len 4 --gen-len 2 --hardware h100-80g", "");
  ExpectCudaRunsOrIsRefused("perplexity --model " + kModel + " --input " + Path("text.txt") +
                                " --window 32 --prompt 8",
                            "");
  ExpectCudaRunsOrIsRefused("profile --out " + Path("hw.yaml") + " --offload-dir " + Path(""),
                            Path("hw.yaml"));
}

TEST_F(DeviceCliTest, AnUnknownDeviceIsRefused) {
  Write("in.jsonl", "{\"prompt\": \"hello\"}\n");
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                " --output " + Path("out.jsonl") + " --device tpu");
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--device"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("auto,cuda,cpu"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(Path("out.jsonl")));
}

// --activations sets the device's storage type: on the CPU, fp16 and bf16 stand in for a GPU's,
// so a text's perplexity moves by rounding alone (the 400-byte text here: well within 1%); an
// unknown type is refused.
TEST_F(DeviceCliTest, ActivationsSetTheDevicesStorageType) {
  Write("text.txt", "In the beginning the quick brown fox jumped over the lazy dog, and the dog "
                    "slept on while seven bright stars watched the quiet field until morning.\n");
  auto perplexity = [&](const std::string& activations) {
    const CliResult r = RunKeepingStdout("perplexity --model " + kModel + " --input " +
                                             Path("text.txt") + " --window 32 --prompt 8 " +
                                             "--device cpu --activations " + activations,
                                         "perplexity.txt");
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("device cpu, " + activations + " activations"),
              std::string::npos)
        << r.stderr_text;
    const std::string out = ReadFile(Path("perplexity.txt"));
    const size_t at = out.find("perplexity ");
    return at == std::string::npos ? -1.0 : std::stod(out.substr(at + 11));
  };
  const double fp32 = perplexity("fp32");
  ASSERT_GT(fp32, 1.0);
  for (const char* half : {"fp16", "bf16"}) {
    const double p = perplexity(half);
    EXPECT_NE(p, fp32) << half << " activations were not rounded";
    EXPECT_NEAR(p, fp32, 0.01 * fp32) << half;
  }
  const CliResult bad = RunStrata("perplexity --model " + kModel + " --input " +
                                  Path("text.txt") + " --activations fp8");
  EXPECT_EQ(bad.exit_code, 2) << bad.stderr_text;
  EXPECT_NE(bad.stderr_text.find("--activations"), std::string::npos) << bad.stderr_text;
}

TEST_F(DeviceCliTest, GpuMemoryIsTheCapacityPlanSearchesFor) {
  const int64_t profile = PlannedGpuCapacity("");
  EXPECT_EQ(PlannedGpuCapacity("--gpu-memory 16GiB"), int64_t{16} << 30);
  EXPECT_EQ(PlannedGpuCapacity("--gpu-memory 16GB"), int64_t{16'000'000'000});
  EXPECT_EQ(PlannedGpuCapacity("--gpu-memory 12gib"), int64_t{12} << 30);
  EXPECT_EQ(PlannedGpuCapacity("--gpu-mem-gib 16"), int64_t{16} << 30);
  EXPECT_NE(profile, int64_t{16} << 30);
  const CliResult bad = RunStrata(
      "plan --model opt-30b --hardware h100-80g --prompt-len 512 --gen-len 32 --gpu-memory 16XB");
  EXPECT_EQ(bad.exit_code, 2) << bad.stderr_text;
  EXPECT_NE(bad.stderr_text.find("--gpu-memory"), std::string::npos) << bad.stderr_text;
}

TEST_F(DeviceCliTest, ADeviceTierBelowTheRunsNeedExitsTwoNamingGpuMemory) {
  Write("in.jsonl", "{\"custom_id\": \"a\", \"prompt\": \"hello\", \"max_tokens\": 2}\n");
  const CliResult r =
      RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
                Path("out.jsonl") + " --device cpu --gpu-memory 4KiB");
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--gpu-memory"), std::string::npos) << r.stderr_text;
}

}  // namespace
}  // namespace strata
