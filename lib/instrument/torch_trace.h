// Records a span of the run with LibTorch's own profiler (Kineto: CPU + CUDA activities) and
// writes it as a Chrome trace JSON (Perfetto, TensorBoard, chrome://tracing).
#pragma once

#include <string>

namespace workload {

/// Owns one profiling session. Not usable under Nsight Systems at the same time: both attach to
/// CUPTI, which serves one subscriber. Single-threaded use from the training thread.
class TorchTrace {
 public:
  /// Prepares Kineto (CPU, and CUDA when `cuda`), outside the measured span.
  /// \throws std::runtime_error when this LibTorch cannot profile (built without Kineto).
  TorchTrace(std::string path, bool cuda);
  /// Stops a session still recording (an exception or interrupt in the span) without saving.
  ~TorchTrace();
  TorchTrace(const TorchTrace&) = delete;
  TorchTrace& operator=(const TorchTrace&) = delete;

  void start();
  /// Stops recording and writes the trace. \throws std::runtime_error naming the path.
  void stop_and_save();
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  bool cuda_;
  bool recording_ = false;
};

}  // namespace workload
