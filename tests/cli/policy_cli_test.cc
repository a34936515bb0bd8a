// The policy through the binary: `strata plan` on model paths, `--policy auto` in `strata run`
// and `strata bench`, and the predicted-next-to-measured lane times of --metrics.
#include <gtest/gtest.h>

#include <chrono>
#include <fstream>

#include "tests/cli/cli_runner.h"

namespace strata {
namespace {

const std::string kModel = kFixtureModel + "llama-gqa";

std::string Req(const std::string& id, const std::string& prompt, int max_tokens) {
  return R"({"custom_id":")" + id + R"(","prompt":")" + prompt + R"(","max_tokens":)" +
         std::to_string(max_tokens) + R"(,"temperature":0})" + "\n";
}

// A small machine with a real GPU tier (not emulated), in the profile format.
std::string Profile(const std::string& name, const std::string& gpu_capacity = "8000000000") {
  return "name: " + name + "\n" + "gpu_capacity_bytes: " + gpu_capacity + "\n" +
         "cpu_capacity_bytes: 16000000000\ndisk_capacity_bytes: 100000000000\n"
         "h2d_gbps: 5\nd2h_gbps: 5\ndisk_read_gbps: 1\ndisk_write_gbps: 1\n"
         "gpu_prefill_tflops: 0.05\ngpu_decode_tflops: 0.02\ngpu_memory_gbps: 10\n"
         "gpu_attention_prefill_tflops: 0.02\ngpu_attention_gbps: 2\ngpu_attention_q4_gbps: 1\n"
         "gpu_dequant_gbps: 2\ncpu_cores: 2\ncpu_memory_gbps: 10\ncpu_attention_gbps: 2\n"
         "cpu_attention_q4_gbps: 1\n";
}

class PolicyCliTest : public CliTest {
 protected:
  // The text `strata <args>` prints; "" (and a failure) when it does not exit 0.
  std::string PlanText(const std::string& args) {
    const CliResult r = RunKeepingStdout(args, "plan.txt");
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return r.exit_code == 0 ? ReadFile(Path("plan.txt")) : "";
  }
};

TEST_F(PolicyCliTest, PlanDescribesAModelDirectoryAsTheRunLoadsIt) {
  const CliResult r = RunKeepingStdout("plan --model " + kModel +
                                           " --hardware t4 --prompt-len 16 --gen-len 8 --json",
                                       "plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json report = nlohmann::json::parse(ReadFile(Path("plan.json")));
  EXPECT_EQ(report["model"], kModel);
  EXPECT_TRUE(report["fits"].get<bool>());
  EXPECT_GT(report["memory"]["GPU"]["weights_bytes"].get<int64_t>() +
                report["memory"]["CPU"]["weights_bytes"].get<int64_t>() +
                report["memory"]["disk"]["weights_bytes"].get<int64_t>(),
            0);
  EXPECT_GT(report["throughput_tokens_per_s"].get<double>(), 0);
}

// A profile that measured writes waiting behind reads: the plan charges the store lane that wait
// for an all-on-disk policy, in the table and the JSON, and not without the key.
TEST_F(PolicyCliTest, PlanShowsDiskWritesWaitingBehindReads) {
  const std::string args = "plan --model " + kModel +
                           " --prompt-len 16 --gen-len 8 --percent 0 0 0 0 0 0 --gpu-batch-size 2"
                           " --num-gpu-batches 2 --hardware ";
  Write("plain.yaml", Profile("plain-box"));
  Write("queued.yaml", Profile("queued-box") + "disk_write_wait_bytes: 8388608\n");
  const auto decode_wait = [&](const std::string& hw) {
    const CliResult r = RunKeepingStdout(args + Path(hw) + " --json", "plan.json");
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return nlohmann::json::parse(
               ReadFile(Path("plan.json")))["time"]["decode"]["layer"]["disk_write_wait_s"]
        .get<double>();
  };
  EXPECT_EQ(decode_wait("plain.yaml"), 0);
  EXPECT_GT(decode_wait("queued.yaml"), 0);
  EXPECT_NE(PlanText(args + Path("queued.yaml")).find("write waits"), std::string::npos);
}

// OPT-30B's layers on the CPU with CPU attention on FlexGen's T4: a layer's attention weights
// load only while its MLP computes, which is shorter, so the weight slots' chain sets the decode
// step; the table and the JSON say so, and without overlap there is no chain.
TEST_F(PolicyCliTest, PlanNamesTheWeightSlotsWhereTheirChainSetsTheStep) {
  const std::string args =
      "plan --model opt-30b --hardware t4-flexgen --prompt-len 512 --gen-len 32 --percent 0 100 0 "
      "100 100 0 --gpu-batch-size 16 --num-gpu-batches 4 --cpu-attention";
  const auto decode = [&](const std::string& more) {
    const CliResult r = RunKeepingStdout(args + more + " --json", "plan.json");
    EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
    return nlohmann::json::parse(ReadFile(Path("plan.json")))["time"]["decode"]["layer"];
  };
  const nlohmann::json overlapped = decode("");
  EXPECT_EQ(overlapped["bottleneck"], "weight slots");
  EXPECT_DOUBLE_EQ(overlapped["slot_chain_s"].get<double>(), overlapped["step_s"].get<double>());
  EXPECT_EQ(decode(" --no-overlap")["slot_chain_s"].get<double>(), 0);
  EXPECT_NE(PlanText(args).find("weight slots"), std::string::npos);
}

// The table and the JSON show the input embedding's and the output layer's steps beside the
// transformer layer's, and the token step they add up to. Llama-2-7B's weights on the CPU of a
// T4: the output layer's weights (its 262 MB head) come in, then it computes (its chain).
TEST_F(PolicyCliTest, PlanShowsTheInputOutputAndTokenSteps) {
  const std::string args =
      "plan --model llama-2-7b --hardware t4 --prompt-len 512 --gen-len 32 --percent 0 100 100 0 "
      "100 0 --gpu-batch-size 8 --num-gpu-batches 2";
  const CliResult r = RunKeepingStdout(args + " --json", "plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json time = nlohmann::json::parse(ReadFile(Path("plan.json")))["time"];
  for (const char* phase : {"prefill", "decode"}) {
    const nlohmann::json& t = time[phase];
    EXPECT_NEAR(t["token_step_s"].get<double>(),
                t["input"]["step_s"].get<double>() + 32 * t["layer"]["step_s"].get<double>() +
                    t["output"]["step_s"].get<double>(),
                1e-12)
        << phase;
    const nlohmann::json& out = t["output"];
    EXPECT_NEAR(out["slot_chain_s"].get<double>(),
                out["h2d_s"].get<double>() + out["gpu_gemm_s"].get<double>(), 1e-12)
        << phase;
    EXPECT_GE(out["step_s"].get<double>(), out["slot_chain_s"].get<double>()) << phase;
  }
  EXPECT_NEAR(time["decode"]["total_s"].get<double>(),
              31 * time["decode"]["token_step_s"].get<double>(), 1e-9);
  const std::string text = PlanText(args);
  for (const char* row : {"input step", "output step", "token step"}) {
    EXPECT_NE(text.find(row), std::string::npos) << row << "\n" << text;
  }
}

// The default model is a Q4_1 GGUF file: with --compress-weight its plan counts its matrices in
// the file's own groups of 32 (5 bits a weight: 16 bytes of codes and an fp16 scale and minimum
// per 32), and says so.
TEST_F(PolicyCliTest, PlanCountsAGgufFilesFourBitBlocksInGroupsOf32) {
  if (DefaultModelPath().empty()) GTEST_SKIP() << "default model not fetched";
  const std::string args = "plan --model " + DefaultModelPath() +
                           " --hardware a10 --prompt-len 64 --gen-len 8 --percent 0 100 0 100 "
                           "100 0 --gpu-batch-size 4 --num-gpu-batches 2 --compress-weight";
  EXPECT_NE(PlanText(args).find("4-bit groups 32 weights along a row (the GGUF file's own Q4 "
                                "blocks)"),
            std::string::npos);
  const CliResult r = RunKeepingStdout(args + " --json", "plan.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json memory = nlohmann::json::parse(ReadFile(Path("plan.json")))["memory"];
  // SmolLM2-135M: hidden 576, MLP 1536, 30 layers, 9 query and 3 KV heads of 64, vocabulary
  // 49152, tied embeddings; norms stay fp32 (the file's type).
  const auto row = [](int64_t cols) { return cols / 2 + cols / 32 * 4; };
  const int64_t layer =
      (576 + 192 + 192 + 576 + 1536 + 1536) * row(576) + 576 * row(1536) + 2 * 576 * 4;
  EXPECT_EQ(memory["CPU"]["weights_bytes"].get<int64_t>(), 49152 * row(576) + 30 * layer + 576 * 4);
}

TEST_F(PolicyCliTest, PlanOnAMissingModelPathSaysSo) {
  const CliResult r = RunStrata("plan --model " + Path("no/such/model.gguf") +
                                " --hardware t4 --prompt-len 16 --gen-len 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("does not exist"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("preset"), std::string::npos) << r.stderr_text;
}

TEST_F(PolicyCliTest, PlanOnADirectoryThatIsNoModelSaysSo) {
  std::filesystem::create_directories(Path("empty"));
  const CliResult r = RunStrata("plan --model " + Path("empty") +
                                " --hardware t4 --prompt-len 16 --gen-len 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("strata plan: "), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find(Path("empty")), std::string::npos) << r.stderr_text;
}

TEST_F(PolicyCliTest, PlanWithoutHardwareUsesTheCachedProfileOrSaysHowToGetOne) {
  const std::string args = "plan --model " + kModel + " --prompt-len 16 --gen-len 8";
  CliResult r = RunStrata(args, "STRATA_CACHE=" + Path("cache"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("strata profile"), std::string::npos) << r.stderr_text;
  std::filesystem::create_directories(Path("cache"));
  Write("cache/hardware.yaml", Profile("cached-box"));
  r = RunKeepingStdout(args + " --json", "plan.json", "STRATA_CACHE=" + Path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(nlohmann::json::parse(ReadFile(Path("plan.json")))["hardware"], "cached-box");
}

TEST_F(PolicyCliTest, PlanRejectsAPromptLongerThanTheModelsContext) {
  const CliResult r = RunStrata("plan --model " + kModel +
                                " --hardware t4 --prompt-len 100000 --gen-len 8");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("context"), std::string::npos) << r.stderr_text;
}

// --cache-keys on a plan given by --percent: the JSON says how keys are stored (channel when not
// given), and the memory plan holds the smoothing statistics (fp32 mean and scale per layer,
// sequence, KV head and channel: 3 layers, 2 KV heads of 16 on the fixture) only for smoothed
// keys, as the runtime allocates them (tests/memory/placement_test.cc holds the layout to the same
// bytes).
TEST_F(PolicyCliTest, PlanTakesCacheKeysAndAccountsTheSmoothingOfSmoothedKeys) {
  const std::string args = "plan --model " + kModel +
                           " --hardware t4 --prompt-len 16 --gen-len 8 --percent 100 0 100 0 "
                           "100 0 --gpu-batch-size 2 --num-gpu-batches 3 --compress-cache --json";
  const auto smoothing_bytes = [](const nlohmann::json& report) {
    int64_t bytes = 0;
    for (const nlohmann::json& b : report["buffers"]) {
      if (b["name"] == "kv_smoothing") {
        EXPECT_EQ(b["tier"], "GPU");
        bytes += b["bytes"].get<int64_t>() * b["count"].get<int64_t>();
      }
    }
    return bytes;
  };
  struct Case {
    std::string flag, keys;
    int64_t smoothing;
  };
  for (const Case& c :
       {Case{"", "channel", 0}, Case{" --cache-keys channel", "channel", 0},
        Case{" --cache-keys smoothed", "smoothed", 2 * 3 * 6 * 2 * 16 * 4},
        Case{" --cache-keys rotated", "rotated", 0}, Case{" --cache-keys plain", "plain", 0}}) {
    SCOPED_TRACE(c.flag);
    const CliResult r = RunKeepingStdout(args + c.flag, "plan.json");
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    const nlohmann::json report = nlohmann::json::parse(ReadFile(Path("plan.json")));
    EXPECT_TRUE(report["plan"]["compress_cache"].get<bool>());
    EXPECT_EQ(report["plan"]["cache_keys"], c.keys);
    EXPECT_EQ(smoothing_bytes(report), c.smoothing);
  }
  const CliResult uncompressed = RunKeepingStdout(
      "plan --model " + kModel +
          " --hardware t4 --prompt-len 16 --gen-len 8 --percent 100 0 100 0 100 0 --json",
      "plain.json");
  ASSERT_EQ(uncompressed.exit_code, 0) << uncompressed.stderr_text;
  EXPECT_TRUE(nlohmann::json::parse(ReadFile(Path("plain.json")))["plan"]["cache_keys"].is_null());
}

TEST_F(PolicyCliTest, PlanRejectsBadCacheKeys) {
  const std::string args = "plan --model " + kModel +
                           " --hardware t4 --prompt-len 16 --gen-len 8 --percent 100 0 100 0 "
                           "100 0";
  CliResult r = RunStrata(args + " --compress-cache --cache-keys hadamard");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("--cache-keys"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("'hadamard'"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("smoothed"), std::string::npos) << r.stderr_text;
  r = RunStrata(args + " --cache-keys rotated");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("add --compress-cache"), std::string::npos) << r.stderr_text;
}

// --cache-sink and --cache-window on a plan given by --percent: the JSON carries them (1 and 32
// when not given) and the memory plan accounts their fp32 rows on the GPU; an explicit 0 is
// taken. Without --compress-cache, negative, or a window too short for channel keys, they are
// errors that say so.
TEST_F(PolicyCliTest, PlanTakesExactTokensAndAccountsTheirRows) {
  const std::string args = "plan --model " + kModel +
                           " --hardware t4 --prompt-len 64 --gen-len 8 --percent 100 0 100 0 "
                           "100 0 --gpu-batch-size 2 --num-gpu-batches 3";
  const auto exact_bytes = [](const nlohmann::json& report) {
    int64_t bytes = 0;
    for (const nlohmann::json& b : report["buffers"]) {
      if (b["name"] == "kv_exact") {
        EXPECT_EQ(b["tier"], "GPU");
        bytes += b["bytes"].get<int64_t>() * b["count"].get<int64_t>();
      }
    }
    return bytes;
  };
  struct Case {
    std::string flags;
    int sink, window;
    std::string flexgen;  // what flexgen_flags says of them
  };
  for (const Case& c : {Case{"", 1, 32, "--compress-cache"},
                        Case{" --cache-keys smoothed --cache-sink 2 --cache-window 16", 2, 16,
                             "--cache-keys smoothed --cache-sink 2 --cache-window 16"},
                        Case{" --cache-keys smoothed --cache-window 0", 1, 0,
                             "--cache-keys smoothed --cache-window 0"}}) {
    SCOPED_TRACE(c.flags);
    const CliResult r = RunKeepingStdout(args + " --compress-cache --json" + c.flags, "exact.json");
    ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
    const nlohmann::json report = nlohmann::json::parse(ReadFile(Path("exact.json")));
    EXPECT_EQ(report["plan"]["cache_sink"], c.sink);
    EXPECT_EQ(report["plan"]["cache_window"], c.window);
    EXPECT_NE(report["plan"]["flexgen_flags"].get<std::string>().find(c.flexgen), std::string::npos)
        << report["plan"]["flexgen_flags"];
    // layers, block, KV heads, rows, head_dim
    EXPECT_EQ(exact_bytes(report), 2 * 3 * 6 * 2 * (c.sink + c.window) * 16 * 4);
  }

  CliResult bad = RunStrata(args + " --cache-window 16");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.stderr_text.find("add --compress-cache"), std::string::npos) << bad.stderr_text;
  bad = RunStrata(args + " --cache-sink 0");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.stderr_text.find("add --compress-cache"), std::string::npos) << bad.stderr_text;
  bad = RunStrata(args + " --compress-cache --cache-sink -1");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.stderr_text.find("must be at least 0"), std::string::npos) << bad.stderr_text;
  bad = RunStrata(args + " --compress-cache --cache-window 16");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.stderr_text.find("--cache-window 32 or more"), std::string::npos)
      << bad.stderr_text;
}

// Without --hardware and without a cached profile, --policy auto keeps everything on the device,
// each block one micro-batch, and says why.
TEST_F(PolicyCliTest, RunWithoutAProfileKeepsEverythingOnTheDevice) {
  Write("in.jsonl", Req("a", "Hello", 4));
  const CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                    " --output " + Path("out.jsonl"),
                                "STRATA_CACHE=" + Path("cache"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("hardware profile: none"), std::string::npos) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("default (no hardware profile to search with), each block one "
                               "micro-batch: --percent 100 0 100 0 100 0 --gpu-batch-size 16 "),
            std::string::npos)
      << r.stderr_text;
}

// A cached profile with a GPU tier smaller than the model makes --policy auto search and offload;
// the run holds to the capacity the plan was searched for, and the tokens are those of the
// default plan, everything on the device.
TEST_F(PolicyCliTest, RunSearchesWithTheCachedProfile) {
  std::string in;
  for (int i = 0; i < 4; ++i) in += Req("r" + std::to_string(i), std::string(i + 2, 'y'), 5);
  Write("in.jsonl", in);
  std::filesystem::create_directories(Path("cache"));
  Write("cache/hardware.yaml", Profile("tiny-gpu", "400000"));
  const CliResult searched = RunStrata(
      "run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
          Path("auto.jsonl") + " --batch-size 4 --offload-dir " + Path("") + " --metrics " +
          Path("m.json"),
      "STRATA_CACHE=" + Path("cache"));
  ASSERT_EQ(searched.exit_code, 0) << searched.stderr_text;
  EXPECT_NE(searched.stderr_text.find("plan searched (profile tiny-gpu"), std::string::npos)
      << searched.stderr_text;
  const CliResult plain = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                                        " --output " + Path("plain.jsonl") + " --batch-size 4",
                                    "STRATA_CACHE=" + Path("nocache"));
  ASSERT_EQ(plain.exit_code, 0) << plain.stderr_text;
  EXPECT_EQ(SortedLines(ReadFile(Path("auto.jsonl"))), SortedLines(ReadFile(Path("plain.jsonl"))));
  const nlohmann::json m = nlohmann::json::parse(ReadFile(Path("m.json")));
  EXPECT_EQ(m["lanes"]["profile"], "tiny-gpu");
  // The GPU tier cannot hold the fixture with its buffers: part of it lives on the CPU.
  EXPECT_GT(m["memory"]["peak_bytes"]["cpu"].get<uint64_t>(), 0u);
  EXPECT_GT(m["memory"]["peak_bytes"]["gpu"].get<uint64_t>(), 0u);
  EXPECT_LE(m["memory"]["peak_bytes"]["gpu"].get<uint64_t>(), 400000u);
}

// --metrics carries, per phase, kind of layer and lane, the prediction next to the measurement.
TEST_F(PolicyCliTest, MetricsPutPredictedNextToMeasuredLaneTimes) {
  std::string in;
  for (int i = 0; i < 4; ++i) in += Req("r" + std::to_string(i), "tell me a story", 6);
  Write("in.jsonl", in);
  Write("hw.yaml", Profile("test-box"));
  const CliResult r = RunStrata(
      "run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
      Path("out.jsonl") + " --batch-size 4 --percent 0 100 0 100 100 0 --gpu-batch-size 2 "
      "--num-gpu-batches 2 --hardware " + Path("hw.yaml") + " --offload-dir " + Path("") +
      " --metrics " + Path("m.json"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("lane busy time, predicted / measured"), std::string::npos)
      << r.stderr_text;
  const nlohmann::json m = nlohmann::json::parse(ReadFile(Path("m.json")));
  ASSERT_EQ(m["lanes"]["profile"], "test-box");
  const nlohmann::json& times = m["lanes"]["times"];
  ASSERT_EQ(times.size(), 2u * 3u * 4u);
  double measured_total = 0;
  for (const nlohmann::json& t : times) {
    const std::string phase = t["phase"], layer = t["layer"], lane = t["lane"];
    EXPECT_TRUE(phase == "prefill" || phase == "decode") << t;
    EXPECT_TRUE(layer == "input" || layer == "transformer" || layer == "output") << t;
    EXPECT_TRUE(lane == "load" || lane == "compute" || lane == "store" || lane == "cpu") << t;
    EXPECT_GE(t["measured_s"].get<double>(), 0) << t;
    measured_total += t["measured_s"].get<double>();
    ASSERT_TRUE(t["predicted_s"].is_number()) << t;
    EXPECT_GE(t["predicted_s"].get<double>(), 0) << t;
    if (layer == "input" && lane == "load") {
      // The embedding lives on the CPU; the rows of the block's tokens come in every token step.
      EXPECT_GT(t["predicted_s"].get<double>(), 0) << t;
      EXPECT_GT(t["measured_s"].get<double>(), 0) << t;
    }
    if (layer == "transformer" && (lane == "compute" || lane == "load")) {
      // Weights and cache on the CPU: every transformer step computes and copies weights in.
      EXPECT_GT(t["predicted_s"].get<double>(), 0) << t;
      EXPECT_GT(t["measured_s"].get<double>(), 0) << t;
    }
  }
  // The lanes' measured busy time is the executor's, split: it cannot exceed the run's time.
  EXPECT_GT(measured_total, 0);
  EXPECT_LT(measured_total, 4 * m["generation_s"].get<double>() + 1e-3);
  // Each phase's wall time, predicted and measured; together they are the executor's time.
  const nlohmann::json& phases = m["lanes"]["phases"];
  ASSERT_EQ(phases.size(), 2u);
  EXPECT_EQ(phases[0]["phase"], "prefill");
  EXPECT_EQ(phases[1]["phase"], "decode");
  double wall = 0;
  for (const nlohmann::json& t : phases) {
    EXPECT_GT(t["predicted_s"].get<double>(), 0) << t;
    EXPECT_GT(t["measured_s"].get<double>(), 0) << t;
    wall += t["measured_s"].get<double>();
  }
  EXPECT_LE(wall, m["generation_s"].get<double>() + 1e-3);
  EXPECT_NE(r.stderr_text.find("wall time, predicted / measured s"), std::string::npos);
}

// A profile's CPU rates hold for the thread count it was measured with (cpu_cores): a run with
// another count says so, a run with the same count does not.
TEST_F(PolicyCliTest, RunWarnsWhenTheProfileWasMeasuredWithOtherThreads) {
  Write("in.jsonl", Req("a", "Hello", 2));
  Write("hw.yaml", Profile("two-threads"));
  const std::string args = "run --model " + kModel + " --input " + Path("in.jsonl") +
                           " --hardware " + Path("hw.yaml") + " --threads ";
  CliResult r = RunStrata(args + "1 --output " + Path("one.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("measured with 2 CPU threads and this run computes with 1"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("strata profile --threads 1"), std::string::npos) << r.stderr_text;
  r = RunStrata(args + "2 --output " + Path("two.jsonl"));
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("CPU threads and this run"), std::string::npos) << r.stderr_text;
}

TEST_F(PolicyCliTest, RunRejectsABadHardwareProfile) {
  Write("in.jsonl", Req("a", "Hello", 2));
  Write("hw.yaml", Profile("bad", "-5"));
  CliResult r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") +
                          " --output " + Path("out.jsonl") + " --hardware " + Path("hw.yaml"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("gpu_capacity_bytes"), std::string::npos) << r.stderr_text;
  std::filesystem::create_directories(Path("cache"));
  Write("cache/hardware.yaml", "name: half\nh2d_gbps: 3\n");
  r = RunStrata("run --model " + kModel + " --input " + Path("in.jsonl") + " --output " +
                    Path("out.jsonl"),
                "STRATA_CACHE=" + Path("cache"));
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.stderr_text.find("strata profile"), std::string::npos) << r.stderr_text;
}

TEST_F(PolicyCliTest, BenchSearchesAndReportsLaneTimes) {
  Write("hw.yaml", Profile("bench-box", "2000000000"));
  const CliResult r = RunKeepingStdout("bench --model " + kModel +
                                           " --prompt-len 8 --gen-len 3 --max-block-size 2 "
                                           "--hardware " + Path("hw.yaml") + " --offload-dir " +
                                           Path(""),
                                       "bench.txt");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string out = ReadFile(Path("bench.txt"));
  EXPECT_NE(out.find("searched (profile bench-box"), std::string::npos) << out;
  EXPECT_NE(out.find("profile bench-box:"), std::string::npos) << out;
  EXPECT_NE(out.find("decode   transformer"), std::string::npos) << out;
}

// MemAvailable from /proc/meminfo, in bytes; 0 when it cannot be read.
int64_t MemAvailableBytes() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key, unit;
  int64_t kib = 0;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return 0;
}

// A preset far larger than this machine's memory, everything in memory: bench refuses it before
// its weights or tiers take a byte (in seconds, where making 350 GB of weights would take an
// hour), with exit code 2 and the figures, instead of being killed by the kernel.
TEST_F(PolicyCliTest, BenchRefusesAPresetThatDoesNotFitHostMemory) {
  if (MemAvailableBytes() > 400'000'000'000) GTEST_SKIP() << "this machine could hold OPT-175B";
  const auto start = std::chrono::steady_clock::now();
  const CliResult r = RunStrata("bench --model opt-175b --prompt-len 8 --gen-len 2 --percent 100 0 "
                                "100 0 100 0 --offload-dir " + Path(""));
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_LT(seconds, 60);
  EXPECT_NE(r.stderr_text.find("host memory: the plan (--percent 100 0 100 0 100 0"),
            std::string::npos)
      << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("which this engine keeps in host memory"), std::string::npos);
  EXPECT_NE(r.stderr_text.find("is available (MemAvailable)"), std::string::npos);
  EXPECT_TRUE(r.stderr_text.find("To fit, move weights") != std::string::npos ||
              r.stderr_text.find("Nothing fits") != std::string::npos)
      << r.stderr_text;
}

// bench checks a hand plan's offload directory before it makes its model (no "synthetic" line,
// no schedule written) and creates a missing one whose parent exists.
TEST_F(PolicyCliTest, BenchChecksTheOffloadDirectoryBeforeMakingItsModel) {
  const std::string args = "bench --model tinyllama-1.1b --num-layers 1 --prompt-len 8 --gen-len 2 "
                           "--percent 0 0 100 0 100 0 --dump-schedule " + Path("schedule.txt") +
                           " --offload-dir ";
  CliResult r = RunStrata(args + Path("no/such"));
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("offload directory " + Path("no/such")), std::string::npos)
      << r.stderr_text;
  EXPECT_EQ(r.stderr_text.find("synthetic"), std::string::npos) << r.stderr_text;
  EXPECT_FALSE(std::filesystem::exists(Path("schedule.txt")));
  r = RunStrata(args + Path("made"));
  EXPECT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("created offload directory " + Path("made")), std::string::npos)
      << r.stderr_text;
  EXPECT_TRUE(std::filesystem::is_directory(Path("made")));
  EXPECT_TRUE(std::filesystem::exists(Path("schedule.txt")));
}

// A 4-bit store's plan compresses the weights whether asked or not, and its memory is the
// source model's under --compress-weight: the store holds exactly those planes.
TEST_F(PolicyCliTest, PlanOfAFourBitStoreCompressesItsWeights) {
  CliResult r = RunStrata("convert --model " + kModel + " --out " + Path("q4") + " --compress-weight");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const std::string plan = " --hardware t4 --prompt-len 16 --gen-len 8 --percent 0 50 100 0 100 0 "
                           "--json";
  r = RunKeepingStdout("plan --model " + Path("q4") + plan, "store.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  r = RunKeepingStdout("plan --model " + kModel + plan + " --compress-weight", "source.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  const nlohmann::json store = nlohmann::json::parse(ReadFile(Path("store.json")));
  const nlohmann::json source = nlohmann::json::parse(ReadFile(Path("source.json")));
  EXPECT_TRUE(store["plan"]["compress_weight"].get<bool>());
  EXPECT_EQ(store["memory"], source["memory"]);
  r = RunKeepingStdout("plan --model " + Path("q4") + " --hardware t4 --prompt-len 16 "
                       "--gen-len 8 --no-compression --json",
                       "searched.json");
  ASSERT_EQ(r.exit_code, 0) << r.stderr_text;
  EXPECT_TRUE(
      nlohmann::json::parse(ReadFile(Path("searched.json")))["plan"]["compress_weight"].get<bool>());
}

}  // namespace
}  // namespace strata
