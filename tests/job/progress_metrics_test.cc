// The progress line and bar, and the metrics JSON.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "src/job/job_metrics.h"
#include "src/job/progress.h"

namespace strata {
namespace {

TEST(ProgressTest, LogLineReadsWellInALog) {
  ProgressCounts c;
  c.done = 120;
  c.failed = 2;
  c.expected = 400;
  c.generated_tokens = 6000;
  c.prompt_tokens = 3000;
  EXPECT_EQ(FormatProgressLine(c, 60.0),
            "progress 120/~400 requests (30.0%), 2 failed; 100 generated tok/s, 150 total "
            "tok/s; elapsed 0:01:00, ETA 0:02:20");
  c.expected_exact = true;
  EXPECT_NE(FormatProgressBar(c, 60.0).find("120/400 requests 30% | 100 tok/s | ETA 0:02:20"),
            std::string::npos);
  c.done = 0;
  EXPECT_NE(FormatProgressLine(c, 1.0).find("ETA ?"), std::string::npos);
}

// A resumed job counts what the output already held into the requests done and the total; its
// rates and ETA are this run's.
TEST(ProgressTest, AResumedJobCountsWhatAnEarlierRunWrote) {
  ProgressCounts c;
  c.already_done = 200;
  c.expected = 400;
  EXPECT_EQ(FormatProgressLine(c, 1.0),
            "progress 200/~400 requests (50.0%, 200 already done), 0 failed; 0 generated tok/s, 0 "
            "total tok/s; elapsed 0:00:01, ETA ?");
  c.done = 100;
  c.generated_tokens = 600;
  EXPECT_EQ(FormatProgressLine(c, 60.0),
            "progress 300/~400 requests (75.0%, 200 already done), 0 failed; 10 generated tok/s, "
            "10 total tok/s; elapsed 0:01:00, ETA 0:01:00");
  EXPECT_NE(FormatProgressBar(c, 60.0).find("300/~400 requests 75% | 10 tok/s | ETA 0:01:00"),
            std::string::npos);
}

TEST(MetricsTest, PaddingWasteAndNullExecutorFields) {
  JobMetrics m;
  m.padding.AddBlock({4, 2}, {3, 1});  // prompt slots 2x4, decode slots 2x3
  EXPECT_DOUBLE_EQ(m.padding.prompt_waste(), 1.0 - 6.0 / 8.0);
  EXPECT_DOUBLE_EQ(m.padding.decode_waste(), 1.0 - 4.0 / 6.0);
  m.prompt_tokens = 100;
  m.generated_tokens = 50;
  m.generation_s = 10;
  m.error_codes["invalid_json"] = 3;
  m.peak_bytes.cpu = 1234;
  const nlohmann::json j = nlohmann::json::parse(MetricsJson(m));
  EXPECT_EQ(j["tokens"]["total"], 150);
  EXPECT_DOUBLE_EQ(j["throughput"]["total_tokens_per_s"].get<double>(), 15.0);
  EXPECT_EQ(j["requests"]["by_error_code"]["invalid_json"], 3);
  EXPECT_EQ(j["padding"]["prompt_slots"], 8);
  EXPECT_TRUE(j["memory"]["peak_bytes"]["gpu"].is_null());
  EXPECT_EQ(j["memory"]["peak_bytes"]["cpu"], 1234);
  EXPECT_TRUE(j["links"]["bytes"]["cpu_to_gpu"].is_null());
  EXPECT_GT(PeakRssBytes(), 0u);
}

}  // namespace
}  // namespace strata
