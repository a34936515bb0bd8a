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

// The name a new thread has after calling NameThisThread(name).
std::string NameInNewThread(const std::string& name) {
  std::string seen;
  std::thread([&] {
    NameThisThread(name);
    seen = NameOfThisThread();
  }).join();
  return seen;
}

TEST(ThreadNameTest, NamesTheCallingThreadOnly) {
  const std::string before = NameOfThisThread();
  EXPECT_EQ(NameInNewThread("strata-store"), "strata-store");
  EXPECT_EQ(NameOfThisThread(), before);
}

TEST(ThreadNameTest, KeepsTheFirstFifteenCharacters) {
  EXPECT_EQ(NameInNewThread("strata-io-write-ring"), "strata-io-write");
}

}  // namespace
}  // namespace strata
