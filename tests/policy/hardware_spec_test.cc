#include "policy/hardware_spec.h"

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace strata
