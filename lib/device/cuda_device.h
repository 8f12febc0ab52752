// Small CUDA-side helpers for the trainer: device synchronize, the profiler capture range and the
// device description. Every function degrades to a no-op (or an empty answer) in CPU builds.
#pragma once

#include <memory>
#include <string>

namespace workload {

/// True when this build carries CUDA and a device is visible.
bool cuda_available();

/// cudaDeviceSynchronize on the current device (no-op without CUDA). \throws on CUDA errors.
void device_synchronize();

/// Makes GPU `index` the calling thread's current device (before anything else touches CUDA, and
/// before profiler calls) and sets cuDNN's algorithm search (--cudnn-benchmark) and whether
/// LibTorch's cuDNN calls take deterministic algorithms only (--deterministic). No-op without CUDA.
void use_cuda_device(int index, bool cudnn_benchmark, bool deterministic = false);

/// Makes a high-priority stream of the current device, from LibTorch's pool, the calling thread's
/// current stream for its lifetime, then restores the previous one. Made before the model goes to
/// the device, so everything the trainer queues shares that stream. Does nothing when `enabled` is
/// false or in CPU builds. Neither copyable nor movable; the thread that made it.
class StepStream {
 public:
  explicit StepStream(bool enabled);
  ~StepStream();
  StepStream(const StepStream&) = delete;
  StepStream& operator=(const StepStream&) = delete;
  StepStream(StepStream&&) = delete;
  StepStream& operator=(StepStream&&) = delete;

 private:
  struct Guard;  // c10::cuda::CUDAStreamGuard (CUDA builds)
  std::unique_ptr<Guard> guard_;
};

/// Owns the cudaProfilerStart/Stop pair of one run. `start()` and `stop()` are each effective
/// once, from the thread that set the device; the destructor stops a started capture (so an
/// exception or interrupt inside the window still ends the capture and nsys keeps a report).
/// Disabled instances (CPU runs) do nothing. Neither copyable nor movable.
class ProfilerCapture {
 public:
  explicit ProfilerCapture(bool enabled) : enabled_(enabled) {}
  ~ProfilerCapture();
  ProfilerCapture(const ProfilerCapture&) = delete;
  ProfilerCapture& operator=(const ProfilerCapture&) = delete;

  void start();
  void stop();
  bool enabled() const { return enabled_; }
  bool started() const { return started_; }

 private:
  bool enabled_;
  bool started_ = false;
  bool stopped_ = false;
};

/// Versions and device facts for the report.
struct DeviceDescription {
  std::string cuda_runtime;  ///< e.g. "13.0"; empty without CUDA
  std::string cuda_driver;
  std::string cudnn;        ///< e.g. "9.19.0"; empty when unknown
  std::string device_name;  ///< e.g. "NVIDIA H200"; "cpu" for CPU runs
  int multiprocessors = 0;
  double memory_gib = 0;
};
DeviceDescription describe_device(bool cuda);

}  // namespace workload
