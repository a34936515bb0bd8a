#include "src/backend/cuda/cuda_resources.h"

#include <string>
#include <utility>

#include "src/backend/cuda/cuda_check.h"
#include "src/core/check.h"

namespace strata {

CudaStream::CudaStream(bool non_blocking) {
  STRATA_CUDA_CHECK(cudaStreamCreateWithFlags(
      &stream_, non_blocking ? cudaStreamNonBlocking : cudaStreamDefault));
}

CudaStream::~CudaStream() {
  if (stream_ != nullptr) cudaStreamDestroy(stream_);
}

CudaStream::CudaStream(CudaStream&& other) noexcept : stream_(std::exchange(other.stream_, nullptr)) {}

CudaStream& CudaStream::operator=(CudaStream&& other) noexcept {
  if (this != &other) {
    if (stream_ != nullptr) cudaStreamDestroy(stream_);
    stream_ = std::exchange(other.stream_, nullptr);
  }
  return *this;
}

void CudaStream::Synchronize() const { STRATA_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

CudaEvent::CudaEvent(bool timing) {
  STRATA_CUDA_CHECK(cudaEventCreateWithFlags(&event_, timing ? cudaEventDefault : cudaEventDisableTiming));
}

CudaEvent::~CudaEvent() {
  if (event_ != nullptr) cudaEventDestroy(event_);
}

CudaEvent::CudaEvent(CudaEvent&& other) noexcept : event_(std::exchange(other.event_, nullptr)) {}

CudaEvent& CudaEvent::operator=(CudaEvent&& other) noexcept {
  if (this != &other) {
    if (event_ != nullptr) cudaEventDestroy(event_);
    event_ = std::exchange(other.event_, nullptr);
  }
  return *this;
}

void CudaEvent::Record(cudaStream_t stream) const { STRATA_CUDA_CHECK(cudaEventRecord(event_, stream)); }

void CudaEvent::Wait(cudaStream_t stream) const {
  STRATA_CUDA_CHECK(cudaStreamWaitEvent(stream, event_, 0));
}

void CudaEvent::Synchronize() const { STRATA_CUDA_CHECK(cudaEventSynchronize(event_)); }

float CudaEvent::ElapsedMsSince(const CudaEvent& start) const {
  float ms = 0.0f;
  STRATA_CUDA_CHECK(cudaEventElapsedTime(&ms, start.event_, event_));
  return ms;
}

DeviceBuffer::DeviceBuffer(size_t bytes) { Reserve(bytes); }

DeviceBuffer::~DeviceBuffer() {
  if (data_ != nullptr) cudaFree(data_);
}

DeviceBuffer::DeviceBuffer(DeviceBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceBuffer& DeviceBuffer::operator=(DeviceBuffer&& other) noexcept {
  if (this != &other) {
    if (data_ != nullptr) cudaFree(data_);
    data_ = std::exchange(other.data_, nullptr);
    bytes_ = std::exchange(other.bytes_, 0);
  }
  return *this;
}

void DeviceBuffer::Reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  if (data_ != nullptr) STRATA_CUDA_CHECK(cudaFree(data_));
  data_ = nullptr;
  bytes_ = 0;
  STRATA_CUDA_CHECK(cudaMalloc(&data_, bytes));
  bytes_ = bytes;
}

void ScratchBuffer::Bind(void* data, size_t bytes) {
  grown_ = DeviceBuffer();
  bound_ = true;
  bound_data_ = data;
  bound_bytes_ = bytes;
}

void* ScratchBuffer::Get(size_t bytes) {
  if (!bound_) {
    grown_.Reserve(bytes);
    return grown_.get();
  }
  if (bytes > bound_bytes_) {
    const std::string message = std::string("the CUDA backend's scratch buffer ") + name_ +
                                " holds " + std::to_string(bound_bytes_) +
                                " bytes but an op needs " + std::to_string(bytes) +
                                ": the OpLimits given to ReserveScratch are smaller than the "
                                "run's ops";
    STRATA_CHECK_MSG(bytes <= bound_bytes_, message.c_str());
  }
  return bytes > 0 ? bound_data_ : nullptr;
}

void ScratchBuffer::Release() {
  grown_ = DeviceBuffer();
  bound_ = false;
  bound_data_ = nullptr;
  bound_bytes_ = 0;
}

cudaError_t DeviceBuffer::TryAllocate(size_t bytes, DeviceBuffer* out) {
  *out = DeviceBuffer();
  if (bytes == 0) return cudaSuccess;
  void* data = nullptr;
  const cudaError_t e = cudaMalloc(&data, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();  // the caller reports it
    return e;
  }
  out->data_ = data;
  out->bytes_ = bytes;
  return cudaSuccess;
}

CublasHandle::CublasHandle(cudaStream_t stream, size_t workspace_bytes)
    : workspace_(workspace_bytes) {
  STRATA_CUBLAS_CHECK(cublasCreate(&handle_));
  SetStream(stream);
}

void CublasHandle::SetStream(cudaStream_t stream) {
  SetStream(stream, workspace_.get(), workspace_.bytes());
}

void CublasHandle::SetStream(cudaStream_t stream, void* workspace, size_t workspace_bytes) {
  stream_ = stream;
  STRATA_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  // None given (a handle made without one, not yet used): cuBLAS's own pool until one is.
  if (workspace != nullptr) {
    STRATA_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace, workspace_bytes));
  }
}

CublasHandle::~CublasHandle() {
  if (handle_ != nullptr) cublasDestroy(handle_);
}

CublasHandle::CublasHandle(CublasHandle&& other) noexcept
    : handle_(std::exchange(other.handle_, nullptr)),
      stream_(std::exchange(other.stream_, nullptr)),
      workspace_(std::move(other.workspace_)) {}

CublasHandle& CublasHandle::operator=(CublasHandle&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) cublasDestroy(handle_);
    handle_ = std::exchange(other.handle_, nullptr);
    stream_ = std::exchange(other.stream_, nullptr);
    workspace_ = std::move(other.workspace_);
  }
  return *this;
}

}  // namespace strata
