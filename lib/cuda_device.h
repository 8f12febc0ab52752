// Small CUDA-side helpers for the trainer: device synchronize, the profiler capture range and the
// device description. Every function degrades to a no-op (or an empty answer) in CPU builds.
#pragma once

#include <string>

namespace workload {

/// True when this build carries CUDA and a device is visible.
bool cuda_available();

/// cudaDeviceSynchronize on the current device (no-op without CUDA). \throws on CUDA errors.
void device_synchronize();

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
