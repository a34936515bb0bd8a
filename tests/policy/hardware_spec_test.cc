#include "policy/hardware_spec.h"

#include <gtest/gtest.h>

#include <cmath>

#include "policy/model_spec.h"

namespace strata {
namespace {

std::string T4FlexGenText() {
  HardwareSpec spec =
      LoadHardwareSpecYaml(STRATA_SOURCE_DIR "/configs/hardware/t4-flexgen.yaml").value();
  return HardwareSpecToYaml(spec);
}

std::string Error(const std::string& text) {
  Result<HardwareSpec> r = ParseHardwareSpecYaml(text, "hw.yaml");
  EXPECT_FALSE(r.ok());
  return r.status().message();
}

std::string Replace(std::string text, const std::string& from, const std::string& to) {
  text.replace(text.find(from), from.size(), to);
  return text;
}

TEST(HardwareSpecTest, EveryProfileLoads) {
  const std::vector<std::string> names = ListConfigPresets("hardware");
  for (const char* name : {"t4-flexgen", "t4", "a10", "l4", "a100-80g", "h100-80g"}) {
    EXPECT_NE(std::find(names.begin(), names.end(), name), names.end()) << name;
    Result<HardwareSpec> spec = LoadHardwareSpecYaml(ResolveConfigFile("hardware", name).value());
    ASSERT_TRUE(spec.ok()) << spec.status().ToString();
    EXPECT_EQ(spec->name, name);
  }
}

TEST(HardwareSpecTest, FlexGenConstants) {
  Result<HardwareSpec> hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
  ASSERT_TRUE(hw.ok()) << hw.status().ToString();
  EXPECT_DOUBLE_EQ(hw->h2d_gbps, 12.89);
  EXPECT_DOUBLE_EQ(hw->disk_read_gbps, 0.473);
  EXPECT_DOUBLE_EQ(hw->gpu_prefill_tflops, 21.24);
  EXPECT_DOUBLE_EQ(hw->gpu_decode_tflops, 4.3);
  EXPECT_DOUBLE_EQ(hw->cpu_attention_gbps, 12.3);
  EXPECT_EQ(HardwareSpecToYaml(*hw), T4FlexGenText());
}

TEST(HardwareSpecTest, BadProfilesSayWhichKeyAndFile) {
  const std::string good = T4FlexGenText();
  EXPECT_NE(Error(Replace(good, "d2h_gbps: 0.97\n", "")).find("hw.yaml: missing key 'd2h_gbps'"),
            std::string::npos);
  EXPECT_NE(Error(Replace(good, "cpu_capacity_bytes: 214748364800", "cpu_capacity_bytes: -5"))
                .find("hw.yaml: key 'cpu_capacity_bytes' must be at least 0, got -5"),
            std::string::npos);
  EXPECT_NE(Error(Replace(good, "gpu_capacity_bytes: 15318646784", "gpu_capacity_bytes: 0"))
                .find("hw.yaml: gpu_capacity_bytes must be positive, got 0"),
            std::string::npos);
  EXPECT_NE(Error(Replace(good, "h2d_gbps: 12.89", "h2d_gbps: -1"))
                .find("'h2d_gbps' must be non-negative"),
            std::string::npos);
  EXPECT_NE(Error(Replace(good, "disk_read_gbps: 0.473", "disk_read_gbps: fast"))
                .find("'disk_read_gbps' must be a number, got 'fast'"),
            std::string::npos);
  EXPECT_NE(Error(Replace(good, "h2d_gbps: 12.89", "h2d_gbps: [1, 2]"))
                .find("'h2d_gbps' must be a single value"),
            std::string::npos);
  EXPECT_NE(Error(good + "pcie_gen: 4\n").find("unknown key 'pcie_gen'"), std::string::npos);
  EXPECT_NE(Error("just a string").find("hw.yaml: the document must be a map"), std::string::npos);
  EXPECT_NE(Error("").find("must be a map"), std::string::npos);
  Result<HardwareSpec> none = LoadHardwareSpecYaml("/nonexistent/hw.yaml");
  EXPECT_EQ(none.status().code(), StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("/nonexistent/hw.yaml"), std::string::npos);
}

TEST(HardwareSpecTest, EmulatedFlagsRoundTrip) {
  Result<HardwareSpec> hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
  ASSERT_TRUE(hw.ok());
  EXPECT_FALSE(hw->gpu_emulated);
  hw->gpu_emulated = hw->h2d_emulated = true;
  Result<HardwareSpec> back = ParseHardwareSpecYaml(HardwareSpecToYaml(*hw), "<test>");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->gpu_emulated);
  EXPECT_TRUE(back->h2d_emulated);
  EXPECT_FALSE(back->d2h_emulated);
}

// disk_page_write_gbps, d2d_gbps and copy_beside_gemm_gbps: absent from FlexGen's profile (0),
// written back when set, and a present one must be a positive number.
TEST(HardwareSpecTest, OptionalRatesArePositive) {
  const auto rate_of = [](const std::string& key, HardwareSpec& hw) -> double& {
    return key == "d2d_gbps"                ? hw.d2d_gbps
           : key == "copy_beside_gemm_gbps" ? hw.copy_beside_gemm_gbps
                                            : hw.disk_page_write_gbps;
  };
  for (const std::string key : {"disk_page_write_gbps", "d2d_gbps", "copy_beside_gemm_gbps"}) {
    Result<HardwareSpec> hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
    ASSERT_TRUE(hw.ok());
    double& rate = rate_of(key, *hw);
    EXPECT_EQ(rate, 0) << key;
    EXPECT_EQ(T4FlexGenText().find(key), std::string::npos);
    rate = 0.021;
    const std::string with = HardwareSpecToYaml(*hw);
    Result<HardwareSpec> back = ParseHardwareSpecYaml(with, "<test>");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_DOUBLE_EQ(rate_of(key, *back), 0.021) << key;
    EXPECT_NE(
        Error(Replace(with, key + ": 0.021", key + ": 0")).find("'" + key + "' must be positive"),
        std::string::npos);
    EXPECT_NE(Error(Replace(with, key + ": 0.021", key + ": slow"))
                  .find("'" + key + "' must be a number, got 'slow'"),
              std::string::npos);
  }
}

TEST(HardwareSpecTest, LastLevelCacheIsOptionalAndPositive) {
  Result<HardwareSpec> hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(hw->gpu_cache_bytes, 0);  // absent: FlexGen's profile is unchanged
  EXPECT_EQ(T4FlexGenText().find("gpu_cache_bytes"), std::string::npos);
  hw->gpu_cache_bytes = 33554432;
  const std::string with = HardwareSpecToYaml(*hw);
  Result<HardwareSpec> back = ParseHardwareSpecYaml(with, "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->gpu_cache_bytes, 33554432);
  EXPECT_NE(Error(Replace(with, "gpu_cache_bytes: 33554432", "gpu_cache_bytes: 0"))
                .find("gpu_cache_bytes"),
            std::string::npos);
  EXPECT_NE(Error(Replace(with, "gpu_cache_bytes: 33554432", "gpu_cache_bytes: 32M"))
                .find("gpu_cache_bytes"),
            std::string::npos);
}

TEST(HardwareSpecTest, WriteWaitIsOptionalAndNonNegative) {
  Result<HardwareSpec> hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
  ASSERT_TRUE(hw.ok());
  EXPECT_EQ(hw->disk_write_wait_bytes, 0);  // absent: FlexGen's profile is unchanged
  EXPECT_EQ(T4FlexGenText().find("disk_write_wait_bytes"), std::string::npos);
  hw->disk_write_wait_bytes = 4855553;
  const std::string with = HardwareSpecToYaml(*hw);
  Result<HardwareSpec> back = ParseHardwareSpecYaml(with, "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->disk_write_wait_bytes, 4855553);
  // A disk that does not queue writes behind reads measures 0, which is a valid profile.
  Result<HardwareSpec> zero = ParseHardwareSpecYaml(
      Replace(with, "disk_write_wait_bytes: 4855553", "disk_write_wait_bytes: 0"), "<test>");
  ASSERT_TRUE(zero.ok()) << zero.status().ToString();
  EXPECT_EQ(zero->disk_write_wait_bytes, 0);
  EXPECT_NE(Error(Replace(with, "disk_write_wait_bytes: 4855553", "disk_write_wait_bytes: -1"))
                .find("disk_write_wait_bytes"),
            std::string::npos);
  EXPECT_NE(Error(Replace(with, "disk_write_wait_bytes: 4855553", "disk_write_wait_bytes: 5M"))
                .find("disk_write_wait_bytes"),
            std::string::npos);
}

// The GEMM rate curve: absent from FlexGen's profile, read in any order and kept sorted by rows,
// written back as one flow map.
TEST(HardwareSpecTest, GemmRateCurveIsSortedAndRoundTrips) {
  Result<HardwareSpec> plain = ParseHardwareSpecYaml(T4FlexGenText(), "<test>");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->gpu_gemm_tflops_by_rows.empty());
  EXPECT_EQ(T4FlexGenText().find("gpu_gemm_tflops_by_rows"), std::string::npos);

  Result<HardwareSpec> hw = ParseHardwareSpecYaml(
      T4FlexGenText() + "gpu_gemm_tflops_by_rows: {512: 441.5, 1: 0.9, 16: 14.2}\n", "<test>");
  ASSERT_TRUE(hw.ok()) << hw.status().ToString();
  const std::vector<GemmRate>& curve = hw->gpu_gemm_tflops_by_rows;
  ASSERT_EQ(curve.size(), 3u);
  EXPECT_EQ(curve[0].rows, 1);
  EXPECT_DOUBLE_EQ(curve[0].tflops, 0.9);
  EXPECT_EQ(curve[1].rows, 16);
  EXPECT_DOUBLE_EQ(curve[1].tflops, 14.2);
  EXPECT_EQ(curve[2].rows, 512);
  EXPECT_DOUBLE_EQ(curve[2].tflops, 441.5);

  const std::string with = HardwareSpecToYaml(*hw);
  EXPECT_NE(with.find("\ngpu_gemm_tflops_by_rows: {1: 0.9, 16: 14.2, 512: 441.5}\n"),
            std::string::npos)
      << with;
  Result<HardwareSpec> back = ParseHardwareSpecYaml(with, "<test>");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->gpu_gemm_tflops_by_rows.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(back->gpu_gemm_tflops_by_rows[i].rows, curve[i].rows);
    EXPECT_EQ(back->gpu_gemm_tflops_by_rows[i].tflops, curve[i].tflops);
  }
  EXPECT_EQ(HardwareSpecToYaml(*back), with);

  // A block map reads the same; an empty one is no curve.
  Result<HardwareSpec> block = ParseHardwareSpecYaml(
      T4FlexGenText() + "gpu_gemm_tflops_by_rows:\n  16: 14.2\n  1: 0.9\n", "<test>");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  ASSERT_EQ(block->gpu_gemm_tflops_by_rows.size(), 2u);
  EXPECT_EQ(block->gpu_gemm_tflops_by_rows[0].rows, 1);
  EXPECT_EQ(block->gpu_gemm_tflops_by_rows[1].rows, 16);
  Result<HardwareSpec> empty =
      ParseHardwareSpecYaml(T4FlexGenText() + "gpu_gemm_tflops_by_rows: {}\n", "<test>");
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->gpu_gemm_tflops_by_rows.empty());
  EXPECT_EQ(HardwareSpecToYaml(*empty), T4FlexGenText());
}

TEST(HardwareSpecTest, BadGemmRateCurvesSayWhichKeyAndFile) {
  const auto curve_error = [](const std::string& value) {
    return Error(T4FlexGenText() + "gpu_gemm_tflops_by_rows: " + value + "\n");
  };
  const std::string key = "hw.yaml: key 'gpu_gemm_tflops_by_rows' ";
  EXPECT_NE(curve_error("[1, 2]").find(key + "must be a map"), std::string::npos);
  EXPECT_NE(curve_error("14.2").find(key + "must be a map"), std::string::npos);
  for (const std::string rows : {"0", "-16", "1.5", "many", "[16]"}) {
    EXPECT_NE(
        curve_error("{" + rows + ": 14.2}").find(key + "must map whole numbers of at least 1"),
        std::string::npos)
        << rows;
  }
  EXPECT_NE(curve_error("{16: 0}").find(key + "must map 16 to a positive number, got '0'"),
            std::string::npos);
  EXPECT_NE(curve_error("{16: -2}").find(key + "must map 16 to a positive number, got '-2'"),
            std::string::npos);
  EXPECT_NE(curve_error("{16: fast}").find(key + "must map 16 to a positive number, got 'fast'"),
            std::string::npos);
  EXPECT_NE(curve_error("{16: }").find(key + "must map 16 to a positive number"),
            std::string::npos);
  EXPECT_NE(curve_error("{16: 14.2, 1: 0.9, 16: 15}").find(key + "maps 16 twice"),
            std::string::npos);
  EXPECT_NE(curve_error("{16: 14.2, 016: 15}").find(key + "maps 16 twice"), std::string::npos);
}

TEST(HardwareSpecTest, ValidateChecksTheGemmRateCurve) {
  HardwareSpec hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>").value();
  hw.gpu_gemm_tflops_by_rows = {{1, 0.9}, {16, 14.2}};
  EXPECT_TRUE(hw.Validate().ok()) << hw.Validate().ToString();
  const auto message = [&](std::vector<GemmRate> curve) {
    hw.gpu_gemm_tflops_by_rows = std::move(curve);
    const Status status = hw.Validate();
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    return status.message();
  };
  EXPECT_NE(message({{16, 14.2}, {1, 0.9}}).find("gpu_gemm_tflops_by_rows"), std::string::npos);
  EXPECT_NE(message({{16, 14.2}, {16, 15}}).find("strictly ascending order, got 16 after 16"),
            std::string::npos);
  EXPECT_NE(message({{0, 0.9}}).find("gpu_gemm_tflops_by_rows must have positive rows, got 0"),
            std::string::npos);
  EXPECT_NE(message({{1, 0.9}, {16, 0}}).find("gpu_gemm_tflops_by_rows must have positive rates"),
            std::string::npos);
  EXPECT_NE(message({{1, -1}}).find("gpu_gemm_tflops_by_rows"), std::string::npos);
}

// Linear in log(rows) between points, proportional to rows below the first, flat above the last;
// the phase's scalar rate without a curve.
TEST(HardwareSpecTest, GemmTflopsAtReadsTheCurve) {
  HardwareSpec hw = ParseHardwareSpecYaml(T4FlexGenText(), "<test>").value();
  EXPECT_EQ(hw.GemmTflopsAt(1, /*prefill=*/true), 21.24);
  EXPECT_EQ(hw.GemmTflopsAt(4096, /*prefill=*/true), 21.24);
  EXPECT_EQ(hw.GemmTflopsAt(1, /*prefill=*/false), 4.3);
  EXPECT_EQ(hw.GemmTflopsAt(4096, /*prefill=*/false), 4.3);

  hw.gpu_gemm_tflops_by_rows = {{16, 10}, {256, 50}};
  for (bool prefill : {true, false}) {  // the curve serves both phases
    EXPECT_EQ(hw.GemmTflopsAt(16, prefill), 10);
    EXPECT_EQ(hw.GemmTflopsAt(256, prefill), 50);
    EXPECT_NEAR(hw.GemmTflopsAt(64, prefill), 30, 1e-12);  // 10 + 40 * log(4) / log(16)
    EXPECT_NEAR(hw.GemmTflopsAt(32, prefill), 20, 1e-12);
    EXPECT_NEAR(hw.GemmTflopsAt(4, prefill), 2.5, 1e-12);  // 10 * 4 / 16
    EXPECT_NEAR(hw.GemmTflopsAt(1, prefill), 0.625, 1e-12);
    EXPECT_EQ(hw.GemmTflopsAt(257, prefill), 50);
    EXPECT_EQ(hw.GemmTflopsAt(1e6, prefill), 50);
  }

  // Three points: each segment interpolates between its own ends.
  hw.gpu_gemm_tflops_by_rows = {{1, 0.9}, {16, 14.2}, {512, 441.5}};
  EXPECT_EQ(hw.GemmTflopsAt(16, false), 14.2);
  EXPECT_NEAR(hw.GemmTflopsAt(4, false), (0.9 + 14.2) / 2, 1e-12);
  EXPECT_NEAR(hw.GemmTflopsAt(std::sqrt(16.0 * 512), false), (14.2 + 441.5) / 2, 1e-9);
  EXPECT_NEAR(hw.GemmTflopsAt(0.5, false), 0.45, 1e-12);
  EXPECT_EQ(hw.GemmTflopsAt(512, false), 441.5);
}

}  // namespace
}  // namespace strata
