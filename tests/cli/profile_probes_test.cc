#include "src/cli/profile/probes.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>

namespace strata::profile {
namespace {

// The disk probe moves bytes through strata's own disk tier and leaves nothing behind.
TEST(ProfileProbesTest, DiskThroughTheDiskTier) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("strata-probe-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  Result<DiskRates> rates = MeasureDisk(dir.string(), int64_t{64} << 20);
  ASSERT_TRUE(rates.ok()) << rates.status().ToString();
  EXPECT_GT(rates->read_gbps, 0);
  EXPECT_GT(rates->write_gbps, 0);
  EXPECT_GT(rates->page_write_gbps, 0);
  EXPECT_GE(rates->write_wait_bytes, 0);  // 0 where the disk does not queue writes behind reads
  EXPECT_TRUE(rates->file_env == "io_uring" || rates->file_env == "pread") << rates->file_env;
  EXPECT_TRUE(std::filesystem::is_empty(dir));
  std::filesystem::remove_all(dir);
}

TEST(ProfileProbesTest, DiskErrorsNameTheDirectory) {
  Result<DiskRates> missing = MeasureDisk("/nonexistent/strata-probe", int64_t{64} << 20);
  ASSERT_FALSE(missing.ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/strata-probe"), std::string::npos)
      << missing.status().message();
  Result<DiskRates> tiny = MeasureDisk(std::filesystem::temp_directory_path().string(), 4096);
  ASSERT_FALSE(tiny.ok());
  EXPECT_NE(tiny.status().message().find("needs a 32 MiB scratch file"), std::string::npos)
      << tiny.status().message();
}

}  // namespace
}  // namespace strata::profile
