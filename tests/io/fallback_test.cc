// The pread fallback: forced by option and by STRATA_IO, and taken on its own when io_uring is
// refused (a seccomp filter answering EPERM, as container profiles do) or when buffer
// registration runs into RLIMIT_MEMLOCK. The refusals are staged in forked children.
#include <gtest/gtest.h>
#include <linux/capability.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "src/io/file_env.h"

namespace strata {
namespace {

// Makes io_uring_setup fail with EPERM in this process, as a container seccomp profile does.
void RefuseIoUringSetup() {
  sock_filter filter[] = {
      BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(seccomp_data, nr)),
      BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_io_uring_setup, 0, 1),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
      BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
  };
  sock_fprog program{static_cast<unsigned short>(std::size(filter)), filter};
  if (::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
      ::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &program) != 0) {
    std::_Exit(3);
  }
}

// Makes this process subject to a 64 KiB RLIMIT_MEMLOCK for io_uring buffers: drops
// CAP_IPC_LOCK (which exempts root from the limit), then lowers the limit.
void ShrinkMemlock() {
  __user_cap_header_struct header{_LINUX_CAPABILITY_VERSION_3, 0};
  __user_cap_data_struct data[2] = {};
  if (::syscall(SYS_capget, &header, data) != 0) std::_Exit(3);
  data[CAP_IPC_LOCK / 32].effective &= ~(1u << (CAP_IPC_LOCK % 32));
  if (::syscall(SYS_capset, &header, data) != 0) std::_Exit(3);
  const rlimit limit{64 << 10, 64 << 10};
  if (::setrlimit(RLIMIT_MEMLOCK, &limit) != 0) std::_Exit(3);
}

// Opens an env of `kind` registering a 16 MiB buffer; exits 0 when its name is `expected`, 1
// when it is another, 2 when creation failed.
void OpenAndExit(FileEnvKind kind, const char* expected) {
  Result<AlignedBuffer> buffer = AlignedBuffer::Allocate(16 << 20);
  if (!buffer.ok()) std::_Exit(3);
  FileEnvOptions options;
  options.kind = kind;
  options.registered_buffers = {buffer->span()};
  Result<std::unique_ptr<FileEnv>> env = NewFileEnv(options);
  if (!env.ok()) {
    std::fprintf(stderr, "%s\n", env.status().ToString().c_str());
    std::_Exit(2);
  }
  std::_Exit((*env)->name() == expected ? 0 : 1);
}

TEST(FallbackTest, PreadIsForcedByOptionAndByEnvironment) {
  FileEnvOptions options;
  options.kind = FileEnvKind::kPread;
  Result<std::unique_ptr<FileEnv>> forced = NewFileEnv(options);
  ASSERT_TRUE(forced.ok());
  EXPECT_EQ((*forced)->name(), "pread");

  ::setenv("STRATA_IO", "pread", 1);
  Result<std::unique_ptr<FileEnv>> by_env = NewFileEnv();
  ::setenv("STRATA_IO", "sideways", 1);
  Result<std::unique_ptr<FileEnv>> bad = NewFileEnv();
  ::unsetenv("STRATA_IO");
  ASSERT_TRUE(by_env.ok());
  EXPECT_EQ((*by_env)->name(), "pread");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("use pread or uring"), std::string::npos);
}

TEST(FallbackTest, AutoPrefersIoUring) {
  Result<std::unique_ptr<FileEnv>> env = NewFileEnv();
  ASSERT_TRUE(env.ok());
  EXPECT_EQ((*env)->name(), "io_uring") << "io_uring should work on this machine";
}

TEST(FallbackDeathTest, RefusedIoUringFallsBackToPreadWithOneWarning) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        RefuseIoUringSetup();
        OpenAndExit(FileEnvKind::kAuto, "pread");
      },
      ::testing::ExitedWithCode(0),
      "strata warn: io_uring unavailable \\(io_uring_queue_init failed: Operation not "
      "permitted.*\\); using the pread thread pool");
  EXPECT_EXIT(
      {
        RefuseIoUringSetup();
        OpenAndExit(FileEnvKind::kUring, "io_uring");
      },
      ::testing::ExitedWithCode(2), "unsupported: .*STRATA_IO=pread");
}

TEST(FallbackDeathTest, RegistrationBeyondMemlockFallsBackToPread) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  EXPECT_EXIT(
      {
        ShrinkMemlock();
        OpenAndExit(FileEnvKind::kAuto, "pread");
      },
      ::testing::ExitedWithCode(0), "io_uring unavailable \\(io_uring cannot register");
  EXPECT_EXIT(
      {
        ShrinkMemlock();
        OpenAndExit(FileEnvKind::kUring, "io_uring");
      },
      ::testing::ExitedWithCode(2), "resource exhausted: .*RLIMIT_MEMLOCK is 65536 bytes");
}

}  // namespace
}  // namespace strata
