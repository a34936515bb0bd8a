#include "src/backend/cuda/cuda_memory.h"

#include "src/backend/cuda/cuda_check.h"
#include "src/core/check.h"

namespace strata {
namespace {

constexpr char kCudaBackend[] = "cuda";

// cuda_status.h's numbers are the runtime's.
static_assert(cuda_error::kSuccess == cudaSuccess);
static_assert(cuda_error::kMemoryAllocation == cudaErrorMemoryAllocation);
static_assert(cuda_error::kInitializationError == cudaErrorInitializationError);
static_assert(cuda_error::kStubLibrary == cudaErrorStubLibrary);
static_assert(cuda_error::kInsufficientDriver == cudaErrorInsufficientDriver);
static_assert(cuda_error::kCallRequiresNewerDriver == cudaErrorCallRequiresNewerDriver);
static_assert(cuda_error::kDevicesUnavailable == cudaErrorDevicesUnavailable);
static_assert(cuda_error::kNoDevice == cudaErrorNoDevice);
static_assert(cuda_error::kSystemDriverMismatch == cudaErrorSystemDriverMismatch);
static_assert(cuda_error::kCompatNotSupportedOnDevice == cudaErrorCompatNotSupportedOnDevice);

class CudaDeviceArena final : public DeviceArena {
 public:
  CudaDeviceArena(void* base, uint64_t bytes) : DeviceArena(bytes, kCudaBackend), base_(base) {}
  ~CudaDeviceArena() override {
    if (base_ != nullptr) cudaFree(base_);
  }

  static void* Address(const DeviceSpan& span) {
    const auto& arena = static_cast<const CudaDeviceArena&>(ArenaOf(span, kCudaBackend));
    return static_cast<uint8_t*>(arena.base_) + OffsetOf(span);
  }

 private:
  void* base_;
};

class CudaBackendEvent final : public Event {
 public:
  bool Query() const override {
    const cudaError_t e = cudaEventQuery(event_.get());
    if (e == cudaErrorNotReady) return false;
    STRATA_CUDA_CHECK(e);
    return true;
  }
  void HostWait() const override { event_.Synchronize(); }
  const CudaEvent& event() const { return event_; }

 private:
  CudaEvent event_{false};
};

class CudaBackendStream final : public Stream {
 public:
  void CopyToDevice(DeviceSpan dst, std::span<const uint8_t> src) override {
    STRATA_CHECK(dst.bytes() == src.size());
    STRATA_CUDA_CHECK(cudaMemcpyAsync(CudaDeviceArena::Address(dst), src.data(), src.size(),
                                      cudaMemcpyHostToDevice, stream_.get()));
  }
  void CopyToHost(std::span<uint8_t> dst, DeviceSpan src) override {
    STRATA_CHECK(dst.size() == src.bytes());
    STRATA_CUDA_CHECK(cudaMemcpyAsync(dst.data(), CudaDeviceArena::Address(src), dst.size(),
                                      cudaMemcpyDeviceToHost, stream_.get()));
  }
  void CopyOnDevice(DeviceSpan dst, DeviceSpan src) override {
    STRATA_CHECK(dst.bytes() == src.bytes() && !dst.Overlaps(src));
    STRATA_CUDA_CHECK(cudaMemcpyAsync(CudaDeviceArena::Address(dst),
                                      CudaDeviceArena::Address(src), dst.bytes(),
                                      cudaMemcpyDeviceToDevice, stream_.get()));
  }
  void Fill(DeviceSpan dst, uint8_t byte) override {
    STRATA_CUDA_CHECK(
        cudaMemsetAsync(CudaDeviceArena::Address(dst), byte, dst.bytes(), stream_.get()));
  }
  void Record(Event& event) override {
    static_cast<CudaBackendEvent&>(event).event().Record(stream_.get());
  }
  void Wait(const Event& event) override {
    static_cast<const CudaBackendEvent&>(event).event().Wait(stream_.get());
  }
  void Synchronize() override { stream_.Synchronize(); }

  cudaStream_t stream() const { return stream_.get(); }

 private:
  CudaStream stream_{true};
};

class CudaPinnedHost final : public PinnedHost {
 public:
  explicit CudaPinnedHost(void* base) : base_(base) {}
  ~CudaPinnedHost() override {
    if (base_ != nullptr) cudaHostUnregister(base_);
  }

 private:
  void* base_;
};

}  // namespace

Status CudaErrorStatus(CudaOperation operation, cudaError_t error, uint64_t bytes) {
  cudaGetLastError();  // clear it: the run stops with a message, not an abort
  CudaFailure f;
  f.operation = operation;
  f.error = static_cast<int>(error);
  f.error_name = cudaGetErrorName(error);
  f.bytes = bytes;
  if (operation == CudaOperation::kAllocateDeviceTier ||
      operation == CudaOperation::kAllocateScratch) {
    size_t free_bytes = 0, total_bytes = 0;
    if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
      f.free_bytes = free_bytes;
      f.total_bytes = total_bytes;
    }
    cudaGetLastError();
  }
  if (cudaDriverGetVersion(&f.driver_version) != cudaSuccess) f.driver_version = 0;
  if (cudaRuntimeGetVersion(&f.runtime_version) != cudaSuccess) f.runtime_version = 0;
  cudaGetLastError();
  return CudaFailureStatus(f);
}

Result<std::unique_ptr<DeviceArena>> AllocateCudaDeviceArena(uint64_t bytes) {
  void* base = nullptr;
  if (bytes > 0) {
    const cudaError_t e = cudaMalloc(&base, bytes);
    if (e != cudaSuccess) return CudaErrorStatus(CudaOperation::kAllocateDeviceTier, e, bytes);
  }
  return std::unique_ptr<DeviceArena>(std::make_unique<CudaDeviceArena>(base, bytes));
}

Result<DeviceBuffer> AllocateCudaScratch(uint64_t bytes) {
  DeviceBuffer scratch;
  const cudaError_t e = DeviceBuffer::TryAllocate(bytes, &scratch);
  if (e != cudaSuccess) return CudaErrorStatus(CudaOperation::kAllocateScratch, e, bytes);
  return scratch;
}

std::unique_ptr<Stream> MakeCudaBackendStream() { return std::make_unique<CudaBackendStream>(); }

std::unique_ptr<Event> MakeCudaEvent() { return std::make_unique<CudaBackendEvent>(); }

void* CudaAddress(const DeviceSpan& span) { return CudaDeviceArena::Address(span); }

cudaStream_t CudaStreamOf(Stream& stream) {
  return static_cast<CudaBackendStream&>(stream).stream();
}

Result<std::unique_ptr<PinnedHost>> PinCudaHostMemory(std::span<uint8_t> memory) {
  if (memory.empty()) return std::unique_ptr<PinnedHost>(new CudaPinnedHost(nullptr));
  const cudaError_t e = cudaHostRegister(memory.data(), memory.size(), cudaHostRegisterDefault);
  if (e != cudaSuccess) return CudaErrorStatus(CudaOperation::kPinHostMemory, e, memory.size());
  return std::unique_ptr<PinnedHost>(new CudaPinnedHost(memory.data()));
}

}  // namespace strata
