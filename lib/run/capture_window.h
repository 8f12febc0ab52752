// The capture window of a run: what `nsys --capture-range=cudaProfilerApi` records, the span of
// --torch-profiler-trace's Kineto trace and the capture_window NVTX range, opened once and closed
// once, by the step run and the epoch run alike (lib/run/trainer.h).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "lib/core/elapsed.h"
#include "lib/device/cuda_device.h"
#include "lib/instrument/phase.h"
#include "lib/instrument/torch_trace.h"
#include "lib/report/run_result.h"

namespace workload {

/// Opening starts the CUDA profiler (a CPU run skips it), then the Kineto trace, then the
/// capture_window range; closing drains the device inside capture_drain, ends the range, saves the
/// trace and stops the profiler, and records each of those times and the window's images/s in the
/// run's result. A window left open when its owner goes (a failure inside it) ends the range,
/// drops the trace and stops the profiler without draining or recording. The trainer's thread.
class CaptureWindow {
 public:
  /// Starts nothing. `cuda`: the profiler API is called; `torch_trace`: the trace's path, "" for
  /// none; `batch`: a step's images (this rank's), for images/s.
  CaptureWindow(RunResult& result, bool cuda, std::string torch_trace, std::int64_t batch);
  CaptureWindow(const CaptureWindow&) = delete;
  CaptureWindow& operator=(const CaptureWindow&) = delete;

  /// Opens the window (result.capture_started: the profiler started). Once; nothing queued before
  /// it is drained here (the caller synchronizes where the window must start empty).
  /// \throws std::runtime_error when the trace cannot be prepared (a LibTorch without Kineto).
  void open();
  /// Closes an open window, recording result.capture_drain_ms, elapsed_s (from open() through the
  /// drain), torch_trace, profiler_stop_ms and images_per_s (result.steps over elapsed_s). Does
  /// nothing unless the window is open. \throws std::runtime_error when the trace cannot be saved.
  void close();
  bool is_open() const { return range_.has_value(); }
  /// Opened and closed.
  bool closed() const { return closed_; }

 private:
  RunResult& result_;
  std::string trace_path_;
  std::int64_t batch_;
  // Destroyed in reverse: the range ends, then the trace stops, then the profiler.
  ProfilerCapture capture_;
  std::unique_ptr<TorchTrace> trace_;
  std::optional<Phase> range_;
  SteadyClock::time_point opened_;
  bool closed_ = false;
};

}  // namespace workload
