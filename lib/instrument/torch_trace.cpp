// Records a span of the run with LibTorch's profiler and writes a Chrome trace JSON.
#include "lib/instrument/torch_trace.h"

#include <torch/csrc/autograd/profiler_kineto.h>
#include <torch/version.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "lib/core/output_file.h"

#include <cstdio>
#include <filesystem>
#include <set>
#include <stdexcept>
#include <utility>

namespace workload {

namespace {
namespace tp = torch::profiler::impl;
namespace ap = torch::autograd::profiler;

std::set<tp::ActivityType> activities(bool cuda) {
  std::set<tp::ActivityType> a{tp::ActivityType::CPU};
  if (cuda) a.insert(tp::ActivityType::CUDA);
  return a;
}
}  // namespace

TorchTrace::TorchTrace(std::string path, bool cuda) : path_(std::move(path)), cuda_(cuda) {
  try {
    ap::prepareProfiler(tp::ProfilerConfig(tp::ProfilerState::KINETO), activities(cuda_));
  } catch (const c10::Error& e) {
    throw std::runtime_error("--torch-profiler-trace: this LibTorch cannot profile with Kineto: " +
                             std::string(e.what_without_backtrace()));
  }
}

TorchTrace::~TorchTrace() {
  if (!recording_) return;
  try {
    ap::disableProfiler();
  } catch (...) {
    std::fprintf(stderr, "warning: could not stop LibTorch's profiler\n");
  }
}

void TorchTrace::start() {
  ap::enableProfiler(tp::ProfilerConfig(tp::ProfilerState::KINETO), activities(cuda_),
                     {at::RecordScope::FUNCTION, at::RecordScope::USER_SCOPE});
  recording_ = true;
}

#if TORCH_VERSION_MAJOR < 2
// LibTorch 1.x built without Kineto (Debian's) records the events but cannot save them: write the
// Chrome trace from the recorded events instead (CPU operators and the user scopes).
void write_chrome_trace(const ap::ProfilerResult& result, const std::string& path) {
  nlohmann::json events = nlohmann::json::array();
  const auto pid = static_cast<std::int64_t>(::getpid());
  for (const auto& e : result.events()) {
    const bool user = e.scope() == static_cast<std::uint8_t>(at::RecordScope::USER_SCOPE);
    events.push_back({{"name", e.name()},
                      {"ph", "X"},
                      {"cat", user ? "user_annotation" : "cpu_op"},
                      {"ts", e.startUs()},
                      {"dur", e.durationUs()},
                      {"pid", pid},
                      {"tid", e.startThreadId()}});
  }
  std::ofstream out(path, std::ios::trunc);
  out << nlohmann::json{{"traceEvents", events}, {"displayTimeUnit", "ms"}}.dump();
  if (!out.flush()) throw std::runtime_error("write failed");
}
#endif

void TorchTrace::stop_and_save() {
  if (!recording_) return;
  recording_ = false;
  auto result = ap::disableProfiler();
  // Saved beside the target and moved into place (lib/core/output_file.h), as the report is.
  OutputFile out("--torch-profiler-trace", path_);
  try {
#if TORCH_VERSION_MAJOR < 2
    try {
      result->save(out.staging_path());
    } catch (const c10::Error&) {
      write_chrome_trace(*result, out.staging_path());  // no Kineto in this build
    }
#else
    result->save(out.staging_path());
#endif
  } catch (const std::exception& e) {
    throw std::runtime_error("--torch-profiler-trace " + path_ +
                             ": cannot write the trace: " + e.what());
  }
  std::error_code ec;
  if (std::filesystem::file_size(out.staging_path(), ec) == 0 || ec) {
    throw std::runtime_error("--torch-profiler-trace " + path_ + ": no trace was written");
  }
  out.commit();
}

}  // namespace workload
