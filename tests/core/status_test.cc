#include "src/core/status.h"

#include <gtest/gtest.h>

namespace strata {
namespace {

Result<int> Half(int x) {
  if (x % 2 != 0) return Status::InvalidArgument(std::to_string(x) + " is odd");
  return x / 2;
}

Result<int> Quarter(int x) {
  STRATA_ASSIGN_OR_RETURN(int h, Half(x));
  return Half(h);
}

TEST(StatusTest, OkAndErrors) {
  EXPECT_TRUE(Status::Ok().ok());
  Status s = Status::NotFound("model.gguf");
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.ToString(), "not found: model.gguf");
  EXPECT_EQ(s.WithContext("loading").message(), "loading: model.gguf");
}

TEST(StatusTest, ResultPropagates) {
  EXPECT_EQ(Quarter(8).value(), 2);
  Result<int> r = Quarter(6);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), "3 is odd");
}

}  // namespace
}  // namespace strata
