// The data_pipeline NVTX domain (its range names, a scoped range in it, thread naming) and the
// process-wide switch that turns every NVTX call of the program on or off.
#pragma once

#include <atomic>
#include <string>

namespace data_pipeline::nvtx {

/// The loader's NVTX domain. Its ranges sit on the worker threads, apart from the training step's
/// tree in the default domain (lib/instrument/nvtx.h), which the analysis scripts parse.
inline constexpr const char* kDomain = "data_pipeline";

// Range names in kDomain: an interface, like the step vocabulary (scripts and users filter on
// them).
inline constexpr const char* kLoadBatch = "load_batch";    ///< A worker fills a whole batch.
inline constexpr const char* kLoadSample = "load_sample";  ///< A worker fills one sample.
inline constexpr const char* kReuseFence = "reuse_fence";  ///< Waiting for the device to release a
                                                           ///< slot before rewriting it.

// The GPU decode stage's ranges (--decode gpu), on its own thread: submitting a batch to the
// hardware JPEG decoder, decoding on the CPU what the engines refused or failed, and launching the
// resize kernel.
inline constexpr const char* kGpuDecode = "gpu_decode";
inline constexpr const char* kDecodeFallback = "decode_fallback";
inline constexpr const char* kResizeNormalize = "resize_normalize";

/// Loader workers are named kWorkerThreadPrefix + index ("loader/0"), for the OS and for NVTX.
inline constexpr const char* kWorkerThreadPrefix = "loader/";
/// The GPU decode stage's thread (--decode gpu).
inline constexpr const char* kGpuStageThread = "loader/gpu";

namespace detail {
inline std::atomic<bool>& enabled_flag() {
  static std::atomic<bool> on{true};
  return on;
}
}  // namespace detail

/// The process-wide NVTX switch, on by default. Off, every range of the program (this domain's and
/// the step ranges of lib/instrument/nvtx.h) and every NVTX thread name is skipped, so a run
/// measures the cost of the instrumentation itself (train_resnet50 --nvtx=false). Read where a
/// range opens and where a thread is named: set it before starting the threads whose ranges it
/// should govern. Any thread.
inline bool enabled() { return detail::enabled_flag().load(std::memory_order_relaxed); }
inline void set_enabled(bool on) { detail::enabled_flag().store(on, std::memory_order_relaxed); }

/// A push/pop range named `name` (which must outlive it) in kDomain on the calling thread, or
/// nothing when NVTX is off. Closes on the thread and in the scope where it was opened: neither
/// copyable nor movable.
class ScopedRange {
 public:
  explicit ScopedRange(const char* name) noexcept;
  ~ScopedRange();
  ScopedRange(const ScopedRange&) = delete;
  ScopedRange& operator=(const ScopedRange&) = delete;
  ScopedRange(ScopedRange&&) = delete;
  ScopedRange& operator=(ScopedRange&&) = delete;

 private:
  bool active_;
};

/// Names the calling thread for the OS (truncated to 15 characters, the kernel's limit) and, when
/// NVTX is on, for NVTX (the full name, shown by Nsight Systems on the thread's row).
void name_current_thread(const std::string& name);

}  // namespace data_pipeline::nvtx
