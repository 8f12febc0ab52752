// nvJPEG for the GPU decode stage: its status names, the one throwing check, the library version,
// and move-only owners of its handles (library, decoder state, parsed stream, decode parameters).
#pragma once

#include <nvjpeg.h>

#include <stdexcept>
#include <string>
#include <utility>

namespace data_pipeline::gpu {

/// The enumerator's name ("NVJPEG_STATUS_BAD_JPEG"), or "unknown nvJPEG status".
inline const char* nvjpeg_status_name(nvjpegStatus_t s) {
  switch (s) {
    case NVJPEG_STATUS_SUCCESS:
      return "NVJPEG_STATUS_SUCCESS";
    case NVJPEG_STATUS_NOT_INITIALIZED:
      return "NVJPEG_STATUS_NOT_INITIALIZED";
    case NVJPEG_STATUS_INVALID_PARAMETER:
      return "NVJPEG_STATUS_INVALID_PARAMETER";
    case NVJPEG_STATUS_BAD_JPEG:
      return "NVJPEG_STATUS_BAD_JPEG";
    case NVJPEG_STATUS_JPEG_NOT_SUPPORTED:
      return "NVJPEG_STATUS_JPEG_NOT_SUPPORTED";
    case NVJPEG_STATUS_ALLOCATOR_FAILURE:
      return "NVJPEG_STATUS_ALLOCATOR_FAILURE";
    case NVJPEG_STATUS_EXECUTION_FAILED:
      return "NVJPEG_STATUS_EXECUTION_FAILED";
    case NVJPEG_STATUS_ARCH_MISMATCH:
      return "NVJPEG_STATUS_ARCH_MISMATCH";
    case NVJPEG_STATUS_INTERNAL_ERROR:
      return "NVJPEG_STATUS_INTERNAL_ERROR";
    case NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED:
      return "NVJPEG_STATUS_IMPLEMENTATION_NOT_SUPPORTED";
    case NVJPEG_STATUS_INCOMPLETE_BITSTREAM:
      return "NVJPEG_STATUS_INCOMPLETE_BITSTREAM";
    default:
      return "unknown nvJPEG status";
  }
}

/// Throws std::runtime_error naming `call` and the status unless it is NVJPEG_STATUS_SUCCESS.
inline void nvjpeg_check(nvjpegStatus_t s, const char* call) {
  if (s != NVJPEG_STATUS_SUCCESS) {
    throw std::runtime_error(std::string("nvJPEG call ") + call +
                             " failed: " + nvjpeg_status_name(s) + " (" +
                             std::to_string(static_cast<int>(s)) + ")");
  }
}

/// Evaluates an nvJPEG call and throws, with the call's text, when it fails.
#define WORKLOAD_NVJPEG_CHECK(call) ::data_pipeline::gpu::nvjpeg_check((call), #call)

/// The library's version ("13.0.1"), or "unknown".
inline std::string nvjpeg_version() {
  int major = 0, minor = 0, patch = 0;
  if (nvjpegGetProperty(MAJOR_VERSION, &major) != NVJPEG_STATUS_SUCCESS) return "unknown";
  nvjpegGetProperty(MINOR_VERSION, &minor);
  nvjpegGetProperty(PATCH_LEVEL, &patch);
  return std::to_string(major) + "." + std::to_string(minor) + "." + std::to_string(patch);
}

/// Owns one nvJPEG object, destroyed with `Destroy` (whose status is ignored: a teardown error has
/// nobody to go to). Move-only; an owner of objects made from a library handle must be destroyed
/// before that handle's owner (DecodeResources declares them in that order).
template <typename T, nvjpegStatus_t (*Destroy)(T)>
class NvjpegObject {
 public:
  NvjpegObject() = default;
  explicit NvjpegObject(T raw) : raw_(raw) {}
  ~NvjpegObject() {
    if (raw_) Destroy(raw_);
  }
  NvjpegObject(NvjpegObject&& o) noexcept : raw_(std::exchange(o.raw_, nullptr)) {}
  NvjpegObject& operator=(NvjpegObject&& o) noexcept {
    if (this != &o) {
      if (raw_) Destroy(raw_);
      raw_ = std::exchange(o.raw_, nullptr);
    }
    return *this;
  }
  NvjpegObject(const NvjpegObject&) = delete;
  NvjpegObject& operator=(const NvjpegObject&) = delete;
  T get() const { return raw_; }

 private:
  T raw_ = nullptr;
};
using NvjpegHandle = NvjpegObject<nvjpegHandle_t, nvjpegDestroy>;
using NvjpegState = NvjpegObject<nvjpegJpegState_t, nvjpegJpegStateDestroy>;
using NvjpegStream = NvjpegObject<nvjpegJpegStream_t, nvjpegJpegStreamDestroy>;
using NvjpegParams = NvjpegObject<nvjpegDecodeParams_t, nvjpegDecodeParamsDestroy>;

}  // namespace data_pipeline::gpu
