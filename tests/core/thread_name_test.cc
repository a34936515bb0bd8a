#include "src/core/thread_name.h"

#include <gtest/gtest.h>
#include <pthread.h>

#include <string>
#include <thread>

namespace strata {
namespace {

std::string NameOfThisThread() {
  char name[16] = {};
  EXPECT_EQ(pthread_getname_np(pthread_self(), name, sizeof(name)), 0);
  return name;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOfThisThread();
  std::string seen;
  std::thread([&] {
    NameThisThread("strata-store");
    seen = NameOfThisThread();
  }).join();
  EXPECT_EQ(seen, "strata-store");
  EXPECT_EQ(NameOfThisThread(), before);
}

TEST(ThreadNameTest, KeepsTheFirstFifteenCharacters) {
  std::string seen;
  std::thread([&] {
    NameThisThread("strata-io-write-ring");
    seen = NameOfThisThread();
  }).join();
  EXPECT_EQ(seen, "strata-io-write");
}

}  // namespace
}  // namespace strata
