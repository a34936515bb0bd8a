#include "src/backend/cuda/cuda_resources.h"

#include <utility>

#include "src/backend/cuda/cuda_check.h"

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

CublasHandle::CublasHandle(cudaStream_t stream, size_t workspace_bytes)
    : workspace_(workspace_bytes) {
  STRATA_CUBLAS_CHECK(cublasCreate(&handle_));
  SetStream(stream);
}

void CublasHandle::SetStream(cudaStream_t stream) {
  stream_ = stream;
  STRATA_CUBLAS_CHECK(cublasSetStream(handle_, stream_));
  STRATA_CUBLAS_CHECK(cublasSetWorkspace(handle_, workspace_.get(), workspace_.bytes()));
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
