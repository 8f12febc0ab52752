// The capture window of a run (lib/run/capture_window.h).
#include "lib/run/capture_window.h"

#include <utility>

#include "lib/instrument/nvtx.h"

namespace workload {

CaptureWindow::CaptureWindow(RunResult& result, bool cuda, std::string torch_trace,
                             std::int64_t batch)
    : result_(result), trace_path_(std::move(torch_trace)), batch_(batch), capture_(cuda) {}

void CaptureWindow::open() {
  if (is_open() || closed_) return;
  if (!trace_path_.empty()) trace_ = std::make_unique<TorchTrace>(trace_path_, capture_.enabled());
  capture_.start();
  result_.capture_started = capture_.started();
  if (trace_) trace_->start();
  opened_ = SteadyClock::now();
  range_.emplace(nvtx::kCaptureWindow);
}

void CaptureWindow::close() {
  if (!is_open()) return;
  {
    const auto t = SteadyClock::now();
    Phase drain(nvtx::kCaptureDrain);
    device_synchronize();
    result_.capture_drain_ms = ms_since(t);
  }
  range_.reset();
  closed_ = true;
  result_.elapsed_s = s_since(opened_);
  if (trace_) {
    trace_->stop_and_save();
    result_.torch_trace = trace_->path();
  }
  const auto t_stop = SteadyClock::now();
  capture_.stop();
  result_.profiler_stop_ms = capture_.started() ? ms_since(t_stop) : 0.0;
  if (result_.elapsed_s > 0) {
    result_.images_per_s =
        static_cast<double>(result_.steps.size()) * static_cast<double>(batch_) / result_.elapsed_s;
  }
}

}  // namespace workload
