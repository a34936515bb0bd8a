#include "src/backend/cpu/cpu_memory.h"

#include <sys/mman.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <new>
#include <random>
#include <string>
#include <thread>

#include "src/core/check.h"

namespace strata {
namespace {

constexpr char kCpuBackend[] = "cpu";

// Anonymous memory, page-aligned (disk transfers may land in it), huge pages asked for and every
// page faulted in up front, as the pinned host tier's (src/io/aligned_buffer.h); or host memory
// someone else owns (mapped 0).
class CpuDeviceArena final : public DeviceArena {
 public:
  CpuDeviceArena(uint8_t* base, uint64_t mapped, uint64_t bytes)
      : DeviceArena(bytes, kCpuBackend), base_(base), mapped_(mapped) {}
  ~CpuDeviceArena() override {
    if (mapped_ > 0) ::munmap(base_, mapped_);
  }

  static uint8_t* Address(const DeviceSpan& span) {
    const auto& arena = static_cast<const CpuDeviceArena&>(ArenaOf(span, kCpuBackend));
    return arena.base_ + OffsetOf(span);
  }

 private:
  uint8_t* base_;
  uint64_t mapped_;
};

// Records count up; a stream completes a record by raising `completed` to its number.
class CpuEvent final : public Event {
 public:
  bool Query() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return completed_ >= recorded_;
  }
  void HostWait() const override { WaitFor(Latest()); }

  uint64_t NextRecord() {
    std::lock_guard<std::mutex> lock(mu_);
    return ++recorded_;
  }
  uint64_t Latest() const {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }
  void Complete(uint64_t record) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (record > completed_) completed_ = record;
    }
    cv_.notify_all();
  }
  void WaitFor(uint64_t record) const {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return completed_ >= record; });
  }

 private:
  mutable std::mutex mu_;
  mutable std::condition_variable cv_;
  uint64_t recorded_ = 0;
  uint64_t completed_ = 0;
};

class CpuStream final : public Stream {
 public:
  explicit CpuStream(const CpuStreamOptions& options) : options_(options), rng_(options.seed) {
    if (options_.threaded) worker_ = std::thread([this] { Work(); });
  }
  ~CpuStream() override {
    if (!worker_.joinable()) return;
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }

  void CopyToDevice(DeviceSpan dst, std::span<const uint8_t> src) override {
    STRATA_CHECK(dst.bytes() == src.size());
    uint8_t* to = CpuDeviceArena::Address(dst);
    Run([=] { std::memcpy(to, src.data(), src.size()); });
  }
  void CopyToHost(std::span<uint8_t> dst, DeviceSpan src) override {
    STRATA_CHECK(dst.size() == src.bytes());
    const uint8_t* from = CpuDeviceArena::Address(src);
    Run([=] { std::memcpy(dst.data(), from, dst.size()); });
  }
  void CopyOnDevice(DeviceSpan dst, DeviceSpan src) override {
    STRATA_CHECK(dst.bytes() == src.bytes() && !dst.Overlaps(src));
    uint8_t* to = CpuDeviceArena::Address(dst);
    const uint8_t* from = CpuDeviceArena::Address(src);
    const uint64_t n = dst.bytes();
    Run([=] { std::memcpy(to, from, n); });
  }
  void Fill(DeviceSpan dst, uint8_t byte) override {
    uint8_t* to = CpuDeviceArena::Address(dst);
    const uint64_t n = dst.bytes();
    Run([=] { std::memset(to, byte, n); });
  }

  void Record(Event& event) override {
    auto& e = static_cast<CpuEvent&>(event);
    const uint64_t record = e.NextRecord();
    Run([&e, record] { e.Complete(record); });
  }
  void Wait(const Event& event) override {
    const auto& e = static_cast<const CpuEvent&>(event);
    const uint64_t record = e.Latest();
    Run([&e, record] { e.WaitFor(record); });
  }
  void Synchronize() override {
    if (!worker_.joinable()) return;
    std::unique_lock<std::mutex> lock(mu_);
    idle_cv_.wait(lock, [&] { return queue_.empty() && !busy_; });
  }

  // Runs `work` now (inline) or queues it for the worker (threaded).
  void Run(std::function<void()> work) {
    if (!worker_.joinable()) {
      work();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      queue_.push_back(std::move(work));
    }
    cv_.notify_all();
  }

 private:
  void Work() {
    std::uniform_int_distribution<int> delay(0, options_.max_delay_us);
    for (;;) {
      std::function<void()> work;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
        if (queue_.empty()) return;
        work = std::move(queue_.front());
        queue_.pop_front();
        busy_ = true;
      }
      if (options_.max_delay_us > 0) {
        std::this_thread::sleep_for(std::chrono::microseconds(delay(rng_)));
      }
      work();
      {
        std::lock_guard<std::mutex> lock(mu_);
        busy_ = false;
      }
      idle_cv_.notify_all();
    }
  }

  const CpuStreamOptions options_;
  std::mt19937 rng_;
  std::mutex mu_;
  std::condition_variable cv_, idle_cv_;
  std::deque<std::function<void()>> queue_;
  bool busy_ = false;
  bool stop_ = false;
  std::thread worker_;
};

}  // namespace

Result<std::unique_ptr<DeviceArena>> AllocateCpuDeviceArena(uint64_t bytes) {
  constexpr uint64_t kPage = 4096;
  const uint64_t mapped = (bytes + kPage - 1) / kPage * kPage;
  void* base = nullptr;
  if (mapped > 0) {
    base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
      return Status::ResourceExhausted("cannot map the emulated device tier's " +
                                       std::to_string(bytes) + " bytes of host memory (" +
                                       std::strerror(errno) +
                                       "); give the device tier less (--gpu-memory) or free "
                                       "host memory");
    }
    if (mapped >= (uint64_t{2} << 20)) ::madvise(base, mapped, MADV_HUGEPAGE);
    ::madvise(base, mapped, MADV_POPULATE_WRITE);
  }
  return std::unique_ptr<DeviceArena>(
      std::make_unique<CpuDeviceArena>(static_cast<uint8_t*>(base), mapped, bytes));
}

std::unique_ptr<DeviceArena> CpuArenaOver(std::span<uint8_t> memory) {
  return std::make_unique<CpuDeviceArena>(memory.data(), 0, memory.size());
}

std::unique_ptr<Stream> MakeCpuStream(const CpuStreamOptions& options) {
  return std::make_unique<CpuStream>(options);
}

std::unique_ptr<Event> MakeCpuEvent() { return std::make_unique<CpuEvent>(); }

uint8_t* CpuAddress(const DeviceSpan& span) { return CpuDeviceArena::Address(span); }

float* CpuFloats(const DeviceSpan& span, int64_t n) {
  STRATA_CHECK_MSG(span.type() == SpanType::kF32, "an activation span is not fp32");
  STRATA_CHECK(span.bytes() == static_cast<uint64_t>(n) * sizeof(float));
  return reinterpret_cast<float*>(CpuAddress(span));
}

void RunOnCpuStream(Stream& stream, std::function<void()> work) {
  auto* cpu = dynamic_cast<CpuStream*>(&stream);
  STRATA_CHECK_MSG(cpu != nullptr, "a CPU backend op was given another backend's stream");
  cpu->Run(std::move(work));
}

}  // namespace strata
