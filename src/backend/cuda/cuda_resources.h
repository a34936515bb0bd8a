// RAII owners of CUDA resources: a stream, an event, device memory, and a cuBLAS handle bound to
// one stream at a time with its own workspace (cuBLAS wants one handle and workspace per
// concurrent stream).
// Each is move-only; a moved-from object owns nothing. Creation failures abort (cuda_check.h).
// Thread-compatible.
#pragma once

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <cstddef>

#include "src/backend/cuda/cuda_scratch.h"

namespace strata {

class CudaStream {
 public:
  // non_blocking: the stream does not synchronise with the legacy default stream (the usual choice
  // for executor lanes); false gives a stream that does, so that a plain cudaMemcpy by the caller
  // is ordered after the work queued on it.
  explicit CudaStream(bool non_blocking = true);
  ~CudaStream();
  CudaStream(CudaStream&& other) noexcept;
  CudaStream& operator=(CudaStream&& other) noexcept;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  // Blocks the calling thread until all work queued on the stream is done.
  void Synchronize() const;

 private:
  cudaStream_t stream_ = nullptr;
};

class CudaEvent {
 public:
  // timing: false gives a cheaper event for ordering only (cudaEventDisableTiming).
  explicit CudaEvent(bool timing = false);
  ~CudaEvent();
  CudaEvent(CudaEvent&& other) noexcept;
  CudaEvent& operator=(CudaEvent&& other) noexcept;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void Record(cudaStream_t stream) const;
  // Makes `stream` wait for this event's last recorded work (no host blocking).
  void Wait(cudaStream_t stream) const;
  void Synchronize() const;
  // Milliseconds from `start` to this event; both must be timing events, recorded and complete.
  float ElapsedMsSince(const CudaEvent& start) const;

 private:
  cudaEvent_t event_ = nullptr;
};

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  // cudaMalloc of `bytes` (nothing for 0); contents uninitialised.
  explicit DeviceBuffer(size_t bytes);
  ~DeviceBuffer();
  DeviceBuffer(DeviceBuffer&& other) noexcept;
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  void* get() const { return data_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }
  // Grows to at least `bytes` (contents lost when it grows). cudaFree synchronises the device, so
  // call it outside steady-state loops.
  void Reserve(size_t bytes);
  // *out = a cudaMalloc of `bytes` (nothing for 0), or the error, cleared, for the caller to
  // report (Reserve aborts instead).
  static cudaError_t TryAllocate(size_t bytes, DeviceBuffer* out);

 private:
  void* data_ = nullptr;
  size_t bytes_ = 0;
};

// One of the CUDA backend's scratch buffers (cuda_scratch.h), named for its checks. Bound to a
// piece of the scratch the backend reserved, it is that piece, and a need beyond it aborts naming
// the buffer (the reservation's limits were wrong: a bug); until it is bound (ops called without
// a reservation, as unit tests do) it grows on demand, a cudaMalloc outside any plan.
class ScratchBuffer {
 public:
  explicit ScratchBuffer(const char* name) : name_(name) {}

  // From now on the buffer is `bytes` at `data` (device memory the caller owns and keeps while
  // the buffer is bound; bytes may be 0); a grown buffer is freed.
  void Bind(void* data, size_t bytes);
  // Device memory of at least `bytes` (null for 0). REQUIRES (checked) when bound: bytes fit.
  void* Get(size_t bytes);
  template <typename T>
  T* As(size_t bytes) {
    return static_cast<T*>(Get(bytes));
  }
  // Frees what the buffer holds and unbinds it (it grows on demand again).
  void Release();

 private:
  const char* name_;
  bool bound_ = false;
  void* bound_data_ = nullptr;
  size_t bound_bytes_ = 0;
  DeviceBuffer grown_;
};

class CublasHandle {
 public:
  // A handle whose work runs on `stream`, with a `workspace_bytes` workspace of its own (none for
  // 0: then give each SetStream one).
  CublasHandle(cudaStream_t stream, size_t workspace_bytes = kDefaultWorkspaceBytes);
  ~CublasHandle();
  CublasHandle(CublasHandle&& other) noexcept;
  CublasHandle& operator=(CublasHandle&& other) noexcept;
  CublasHandle(const CublasHandle&) = delete;
  CublasHandle& operator=(const CublasHandle&) = delete;

  cublasHandle_t get() const { return handle_; }
  cudaStream_t stream() const { return stream_; }
  // The handle's own workspace, kDefaultWorkspaceBytes or what the constructor was given (null for
  // 0): cuBLASLt GEMMs queued beside this handle's on its stream may share it.
  void* workspace() const { return workspace_.get(); }
  // Later work runs on `stream`, still with this handle's workspace (cublasSetStream alone would
  // drop it for the default pool). REQUIRES: work queued on the previous stream through this handle
  // does not overlap the new stream's (they share the workspace).
  void SetStream(cudaStream_t stream);
  // The same with `workspace_bytes` at `workspace` (device memory the caller owns, kept while
  // work queued through this handle may use it) instead of the handle's own.
  void SetStream(cudaStream_t stream, void* workspace, size_t workspace_bytes);

  // NVIDIA recommends 32 MiB on Hopper; smaller suffices elsewhere.
  static constexpr size_t kDefaultWorkspaceBytes = kCublasWorkspaceBytes;

 private:
  cublasHandle_t handle_ = nullptr;
  cudaStream_t stream_ = nullptr;
  DeviceBuffer workspace_;
};

}  // namespace strata
