// disk_read_bench: sequential read bandwidth of a large file through the disk tier's FileEnv
// (io_uring, O_DIRECT, registered buffers and file, 1 MiB requests, queue depth 32 by default),
// the way the executor reads: one buffer per slot, one event per buffer, a new request queued as
// soon as a buffer is consumed. Prints GB/s per pass and the fio command to compare with.
//
//   disk_read_bench --dir /tmp --size-mib 1024 --passes 5
#include <sys/mman.h>
#include <sys/resource.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <vector>

#include "src/io/file_env.h"

namespace strata {
namespace {

struct BenchOptions {
  std::string dir = "/tmp";
  std::string file;  // default: <dir>/strata-disk-read-bench.bin
  uint64_t size_mib = 1024;
  size_t block_kib = 1024;
  int depth = 32;
  int passes = 5;
  std::string env = "uring";  // uring | pread
  bool keep = false;
  bool small_pages = false;
};

// The slot memory: an AlignedBuffer (huge pages where the kernel gives them), or with
// --small-pages an anonymous map held to 4 KiB pages, as fio's malloc'ed buffers are. The
// difference matters on virtio disks: a 1 MiB request over 4 KiB pages needs 256 segments, more
// than a queue's max_segments (254 here), and the block layer splits it in two.
class SlotMemory {
 public:
  SlotMemory(size_t bytes, bool small_pages) : bytes_(bytes), small_pages_(small_pages) {
    if (!small_pages_) {
      Result<AlignedBuffer> b = AlignedBuffer::Allocate(bytes);
      if (b.ok()) buffer_ = std::move(*b);
      data_ = buffer_.data();
      return;
    }
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return;
    ::madvise(p, bytes, MADV_NOHUGEPAGE);
    data_ = static_cast<uint8_t*>(p);
  }
  ~SlotMemory() {
    if (small_pages_ && data_ != nullptr) ::munmap(data_, bytes_);
  }
  uint8_t* data() const { return data_; }

 private:
  size_t bytes_;
  bool small_pages_;
  AlignedBuffer buffer_;
  uint8_t* data_ = nullptr;
};

double Seconds(std::chrono::steady_clock::time_point since) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - since).count();
}

// CPU seconds this process has used (all threads, user and system).
double CpuSeconds() {
  rusage u{};
  ::getrusage(RUSAGE_SELF, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec) * 1e-6;
}

// Moves `bytes` of `file` from/to the slots, `depth` requests in flight. Returns seconds.
Result<double> Stream(FileEnv* env, DiskFile* file, IoOp op, uint64_t bytes, size_t block,
                      std::vector<uint8_t*>& slots) {
  std::vector<IoEvent> events(slots.size());
  const auto start = std::chrono::steady_clock::now();
  size_t k = 0;
  for (uint64_t at = 0; at < bytes; at += block, ++k) {
    const size_t slot = k % slots.size();
    STRATA_RETURN_IF_ERROR(events[slot].Wait());  // the buffer is free again
    IoRequest r{op, file, at, static_cast<size_t>(std::min<uint64_t>(block, bytes - at)),
                slots[slot]};
    env->Submit({&r, 1}, &events[slot]);
  }
  for (IoEvent& e : events) STRATA_RETURN_IF_ERROR(e.Wait());
  return Seconds(start);
}

int Run(const BenchOptions& o) {
  const size_t block = o.block_kib << 10;
  const uint64_t bytes = o.size_mib << 20;
  const std::string path = o.file.empty() ? o.dir + "/strata-disk-read-bench.bin" : o.file;
  const size_t ring_bytes = block * static_cast<size_t>(o.depth);
  SlotMemory ring(ring_bytes, o.small_pages);
  if (ring.data() == nullptr) return std::fprintf(stderr, "cannot map %zu bytes\n", ring_bytes), 1;
  std::vector<uint8_t*> slots;
  for (int i = 0; i < o.depth; ++i) slots.push_back(ring.data() + block * static_cast<size_t>(i));
  for (size_t i = 0; i < ring_bytes; ++i) ring.data()[i] = static_cast<uint8_t>(i * 131 + 7);

  FileEnvOptions options;
  options.kind = o.env == "pread" ? FileEnvKind::kPread : FileEnvKind::kUring;
  options.queue_depth = o.depth;
  options.read_queue_depth = o.depth;
  options.max_request_bytes = block;
  options.registered_buffers = {{ring.data(), ring_bytes}};
  Result<std::unique_ptr<FileEnv>> env = NewFileEnv(options);
  if (!env.ok()) return std::fprintf(stderr, "%s\n", env.status().ToString().c_str()), 1;

  std::error_code ec;
  const uint64_t have = std::filesystem::file_size(path, ec);
  if (!o.file.empty() && (ec || have < bytes)) {
    return std::fprintf(stderr, "%s is missing or smaller than --size-mib\n", path.c_str()), 1;
  }
  if (o.file.empty() && (ec || have != bytes)) {
    std::filesystem::remove(path, ec);
    Result<std::unique_ptr<DiskFile>> out = (*env)->Open(path, {FileMode::kCreate});
    if (!out.ok()) return std::fprintf(stderr, "%s\n", out.status().ToString().c_str()), 1;
    Result<double> s = Stream(env->get(), out->get(), IoOp::kWrite, bytes, block, slots);
    const Status synced = s.ok() ? (*env)->Sync(out->get()) : s.status();
    if (!synced.ok()) return std::fprintf(stderr, "%s\n", synced.ToString().c_str()), 1;
    std::printf("wrote %s: %.2f GB/s\n", path.c_str(), static_cast<double>(bytes) / *s / 1e9);
  }
  Result<std::unique_ptr<DiskFile>> in = (*env)->Open(path, {FileMode::kRead});
  if (!in.ok()) return std::fprintf(stderr, "%s\n", in.status().ToString().c_str()), 1;
  std::printf("env %s, direct %d, %llu MiB, %zu KiB requests, depth %d, %s pages\n",
              (*env)->name().c_str(), (*in)->direct(), static_cast<unsigned long long>(o.size_mib),
              o.block_kib, o.depth, o.small_pages ? "4 KiB" : "huge");
  std::vector<double> gbps;
  for (int p = 0; p < o.passes; ++p) {
    const double cpu = CpuSeconds();
    Result<double> s = Stream(env->get(), in->get(), IoOp::kRead, bytes, block, slots);
    if (!s.ok()) return std::fprintf(stderr, "%s\n", s.status().ToString().c_str()), 1;
    gbps.push_back(static_cast<double>(bytes) / *s / 1e9);
    std::printf("pass %d: %.2f GB/s, %.3f CPU s per GB\n", p + 1, gbps.back(),
                (CpuSeconds() - cpu) / (static_cast<double>(bytes) / 1e9));
  }
  std::sort(gbps.begin(), gbps.end());
  std::printf("read: median %.2f GB/s, best %.2f GB/s\n", gbps[gbps.size() / 2], gbps.back());
  std::printf(
      "compare: fio --name=r --filename=%s --rw=read --bs=%zuk --direct=1 "
      "--ioengine=io_uring --fixedbufs --registerfiles --iodepth=%d --size=%llum\n",
      path.c_str(), o.block_kib, o.depth, static_cast<unsigned long long>(o.size_mib));
  in->reset();
  if (!o.keep && o.file.empty()) std::filesystem::remove(path, ec);
  return 0;
}

}  // namespace
}  // namespace strata

int main(int argc, char** argv) {
  strata::BenchOptions o;
  CLI::App app{"Sequential read bandwidth through strata's FileEnv"};
  app.add_option("--dir", o.dir, "Directory for the test file")->capture_default_str();
  app.add_option("--file", o.file, "Read this existing file instead (size must be --size-mib)");
  app.add_option("--size-mib", o.size_mib, "File size, MiB")->capture_default_str();
  app.add_option("--block-kib", o.block_kib, "Request size, KiB (a multiple of 4)")
      ->capture_default_str();
  app.add_option("--depth", o.depth, "Requests in flight")->capture_default_str();
  app.add_option("--passes", o.passes, "Read passes")->capture_default_str();
  app.add_option("--env", o.env, "uring or pread")->capture_default_str();
  app.add_flag("--keep", o.keep, "Keep the test file (e.g. for fio)");
  app.add_flag("--small-pages", o.small_pages, "Slots on 4 KiB pages (as fio's buffers)");
  CLI11_PARSE(app, argc, argv);
  return strata::Run(o);
}
