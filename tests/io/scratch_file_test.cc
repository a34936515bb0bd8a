// Scratch files in the offload directory: unlinked from the start, preallocated, and clear
// errors for a missing, unwritable or full directory.
#include "src/io/scratch_file.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "src/io/fault_env.h"
#include "src/io/pread_env.h"
#include "tests/io/io_test_util.h"

namespace strata {
namespace {

namespace fs = std::filesystem;
using io_testing::FillPattern;
using io_testing::FirstMismatch;
using io_testing::FreshDir;

bool IsEmpty(const fs::path& dir) {
  return fs::directory_iterator(dir) == fs::directory_iterator();
}

TEST(ScratchFileTest, IsUnlinkedPreallocatedAndUsable) {
  const fs::path dir = FreshDir();
  Result<std::unique_ptr<FileEnv>> env = NewFileEnv();
  ASSERT_TRUE(env.ok());
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(env->get(), dir, 100000);
  ASSERT_TRUE(scratch.ok()) << scratch.status().ToString();
  EXPECT_TRUE(IsEmpty(dir)) << "the scratch file must have no name from the start";
  EXPECT_EQ((*scratch)->size_bytes(), AlignUp(100000));
  Result<uint64_t> size = (*env)->Size((*scratch)->file());
  ASSERT_TRUE(size.ok());
  EXPECT_EQ(*size, AlignUp(100000));

  Result<AlignedBuffer> out = AlignedBuffer::Allocate(8192), in = AlignedBuffer::Allocate(8192);
  ASSERT_TRUE(out.ok() && in.ok());
  FillPattern(out->data(), 8192, 9);
  IoEvent stored, loaded;
  IoRequest w{IoOp::kWrite, (*scratch)->file(), 4096 * 10, 8192, out->data()};
  (*env)->Submit({&w, 1}, &stored);
  ASSERT_TRUE(stored.Wait().ok());
  IoRequest r{IoOp::kRead, (*scratch)->file(), 4096 * 10, 8192, in->data()};
  (*env)->Submit({&r, 1}, &loaded);
  ASSERT_TRUE(loaded.Wait().ok());
  EXPECT_EQ(FirstMismatch(in->data(), 8192, 9), 8192u);
}

TEST(ScratchFileTest, MissingDirectorySaysWhatToDo) {
  std::unique_ptr<FileEnv> env = NewPreadEnv({});
  const std::string dir = (FreshDir() / "not-there").string();
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(env.get(), dir, 4096);
  ASSERT_FALSE(scratch.ok());
  EXPECT_EQ(scratch.status().code(), StatusCode::kNotFound);
  EXPECT_NE(scratch.status().message().find("offload directory " + dir + " does not exist"),
            std::string::npos)
      << scratch.status().message();
  EXPECT_NE(scratch.status().message().find("mkdir -p"), std::string::npos);
}

TEST(ScratchFileTest, AFileIsNotADirectory) {
  std::unique_ptr<FileEnv> env = NewPreadEnv({});
  const fs::path file = FreshDir() / "plain";
  std::ofstream(file) << "x";
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(env.get(), file, 4096);
  ASSERT_FALSE(scratch.ok());
  EXPECT_EQ(scratch.status().code(), StatusCode::kIoError);
  EXPECT_NE(scratch.status().message().find(file.string()), std::string::npos);
  EXPECT_NE(scratch.status().message().find("Not a directory"), std::string::npos);
}

TEST(ScratchFileTest, ReadOnlyDirectorySaysWhatToDo) {
  std::unique_ptr<FileEnv> env = NewPreadEnv({});
  fs::path dir = FreshDir();
  fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
  if (::access(dir.c_str(), W_OK) == 0) {
    // Root ignores permission bits; sysfs refuses new files even to root.
    std::cout << "running as root: " << dir << " stays writable, using /sys/kernel instead\n";
    fs::permissions(dir, fs::perms::owner_all);
    dir = "/sys/kernel";
  }
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(env.get(), dir, 4096);
  ASSERT_FALSE(scratch.ok());
  EXPECT_EQ(scratch.status().code(), StatusCode::kIoError);
  const std::string& m = scratch.status().message();
  EXPECT_NE(m.find("offload directory " + dir.string()), std::string::npos) << m;
  EXPECT_NE(m.find("Permission denied"), std::string::npos) << m;
  EXPECT_NE(m.find("pass --offload-dir a writable directory"), std::string::npos) << m;
  if (dir != "/sys/kernel") fs::permissions(dir, fs::perms::owner_all);
}

TEST(ScratchFileTest, FullDiskAtCreationNamesDirectoryAndBytesAndLeavesNothing) {
  const fs::path dir = FreshDir();
  FaultInjectingEnv env(NewPreadEnv({}));
  env.AddRule({IoFault::kNoSpace, ".strata-scratch-", 0, UINT64_MAX, -1});
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(&env, dir, 1 << 30);
  ASSERT_FALSE(scratch.ok());
  EXPECT_EQ(scratch.status().code(), StatusCode::kResourceExhausted);
  const std::string& m = scratch.status().message();
  EXPECT_NE(m.find("offload directory " + dir.string() + " has no room for 1073741824 bytes"),
            std::string::npos)
      << m;
  EXPECT_TRUE(IsEmpty(dir));
}

TEST(ScratchFileTest, FullDiskOnWriteIsResourceExhausted) {
  FaultInjectingEnv env(NewPreadEnv({}));
  Result<std::unique_ptr<ScratchFile>> scratch = ScratchFile::Create(&env, FreshDir(), 1 << 20);
  ASSERT_TRUE(scratch.ok());
  env.AddRule({IoFault::kNoSpace, ".strata-scratch-", 0, UINT64_MAX, -1});
  Result<AlignedBuffer> buf = AlignedBuffer::Allocate(1 << 20);
  ASSERT_TRUE(buf.ok());
  IoEvent e;
  IoRequest w{IoOp::kWrite, (*scratch)->file(), 0, 1 << 20, buf->data()};
  env.Submit({&w, 1}, &e);
  EXPECT_EQ(e.Wait().code(), StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace strata
