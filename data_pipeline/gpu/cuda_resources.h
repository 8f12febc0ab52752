// RAII owners of the CUDA runtime objects the GPU decode stage uses: a stream, an event and a
// block of device memory. Move-only; destructors never throw (a failed release is logged).
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>
#include <utility>

#include "common/cuda_check.h"

namespace data_pipeline::gpu {

/// A non-blocking stream of the current device (no implicit synchronisation with stream 0).
class CudaStream {
 public:
  CudaStream() { WORKLOAD_CUDA_CHECK(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking)); }
  ~CudaStream() {
    if (stream_) WORKLOAD_CUDA_CHECK_NOTHROW(cudaStreamDestroy(stream_));
  }
  CudaStream(CudaStream&& o) noexcept : stream_(std::exchange(o.stream_, nullptr)) {}
  CudaStream& operator=(CudaStream&&) = delete;
  CudaStream(const CudaStream&) = delete;
  CudaStream& operator=(const CudaStream&) = delete;

  cudaStream_t get() const { return stream_; }
  void synchronize() const { WORKLOAD_CUDA_CHECK(cudaStreamSynchronize(stream_)); }

 private:
  cudaStream_t stream_ = nullptr;
};

/// An event without timing, for ordering and host waits. A never-recorded event is complete.
class CudaEvent {
 public:
  CudaEvent() { WORKLOAD_CUDA_CHECK(cudaEventCreateWithFlags(&event_, cudaEventDisableTiming)); }
  ~CudaEvent() {
    if (event_) WORKLOAD_CUDA_CHECK_NOTHROW(cudaEventDestroy(event_));
  }
  CudaEvent(CudaEvent&& o) noexcept : event_(std::exchange(o.event_, nullptr)) {}
  CudaEvent& operator=(CudaEvent&&) = delete;
  CudaEvent(const CudaEvent&) = delete;
  CudaEvent& operator=(const CudaEvent&) = delete;

  cudaEvent_t get() const { return event_; }
  void record(cudaStream_t stream) { WORKLOAD_CUDA_CHECK(cudaEventRecord(event_, stream)); }
  /// Blocks the calling host thread until the recorded work is done.
  void synchronize() const { WORKLOAD_CUDA_CHECK(cudaEventSynchronize(event_)); }

 private:
  cudaEvent_t event_ = nullptr;
};

/// Device memory of the current device, uninitialised; grows by reallocation (contents lost).
class DeviceMemory {
 public:
  DeviceMemory() = default;
  explicit DeviceMemory(std::size_t bytes) { reserve(bytes); }
  ~DeviceMemory() { release(); }
  DeviceMemory(DeviceMemory&& o) noexcept
      : data_(std::exchange(o.data_, nullptr)), size_(std::exchange(o.size_, 0)) {}
  DeviceMemory& operator=(DeviceMemory&& o) noexcept {
    if (this != &o) {
      release();
      data_ = std::exchange(o.data_, nullptr);
      size_ = std::exchange(o.size_, 0);
    }
    return *this;
  }
  DeviceMemory(const DeviceMemory&) = delete;
  DeviceMemory& operator=(const DeviceMemory&) = delete;

  /// Makes room for `bytes`: reallocates (with half again as much headroom) when smaller. The
  /// caller guarantees no queued work still uses the old block.
  void reserve(std::size_t bytes) {
    if (bytes <= size_) return;
    release();
    const std::size_t want = bytes + bytes / 2;
    WORKLOAD_CUDA_CHECK(cudaMalloc(&data_, want));
    size_ = want;
  }
  template <typename T = std::uint8_t>
  T* data() const {
    return static_cast<T*>(data_);
  }
  std::size_t size() const { return size_; }

 private:
  void release() noexcept {
    if (data_) WORKLOAD_CUDA_CHECK_NOTHROW(cudaFree(data_));
    data_ = nullptr;
    size_ = 0;
  }
  void* data_ = nullptr;
  std::size_t size_ = 0;
};

}  // namespace data_pipeline::gpu
