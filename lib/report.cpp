// The run's JSON report and the end-of-run summary table.
#include "lib/report.h"

#include <torch/version.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <opencv2/core/version.hpp>
#include <stdexcept>
#include <thread>

#include <jpeglib.h>

#include "lib/cuda_device.h"
#include "lib/distributed.h"
#include "lib/train_flags.h"
#include "lib/version.h"

namespace workload {

namespace dp = data_pipeline;

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const double pos = q / 100.0 * static_cast<double>(values.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (pos - static_cast<double>(lo));
}

namespace {
int count_skipped(const std::vector<StepRecord>& steps) {
  int n = 0;
  for (const auto& r : steps) n += static_cast<int>(r.skipped.size());
  return n;
}
}  // namespace

StepSummary summarize(const RunResult& result) {
  StepSummary s;
  std::vector<double> times;
  for (const auto& r : result.steps) {
    times.push_back(r.step_ms);
    s.batch_wait_total_ms += r.batch_wait_ms;
    s.h2d_submit_total_ms += r.h2d_submit_ms;
    if (r.batch_wait_ms > s.batch_wait_max_ms || s.batch_wait_max_step < 0) {
      s.batch_wait_max_ms = r.batch_wait_ms;
      s.batch_wait_max_step = r.index;
    }
  }
  s.step_ms_p50 = percentile(times, 50);
  s.step_ms_p95 = percentile(times, 95);
  s.images_skipped = count_skipped(result.steps);
  s.images_skipped_all_steps = s.images_skipped + count_skipped(result.warmup_steps);
  return s;
}

namespace {

nlohmann::ordered_json step_json(const StepRecord& r) {
  nlohmann::ordered_json j;
  j["index"] = r.index;
  j["batch_wait_ms"] = r.batch_wait_ms;
  j["h2d_submit_ms"] = r.h2d_submit_ms;
  j["step_ms"] = r.step_ms;
  j["digest"] = hex64(r.digest);
  j["epoch"] = r.epoch;
  j["batch_in_epoch"] = r.batch_in_epoch;
  if (r.loss) j["loss"] = *r.loss;
  if (!r.injected_stalls.empty()) {
    auto& list = j["injected_stalls"] = nlohmann::ordered_json::array();
    for (const auto& s : r.injected_stalls) list.push_back({{"phase", s.phase}, {"ms", s.ms}});
  }
  if (!r.skipped.empty()) {
    auto& list = j["skipped"] = nlohmann::ordered_json::array();
    for (const auto& s : r.skipped) {
      list.push_back({{"path", s.path}, {"reason", s.reason}, {"replacement", s.replacement}});
    }
  }
  return j;
}

nlohmann::ordered_json gpu_decode_json(const GpuDecodeSummary& gpu) {
  nlohmann::ordered_json j;
  j["hardware"] = gpu.info.hardware;
  j["engines"] = gpu.info.engines;
  j["cores_per_engine"] = gpu.info.cores_per_engine;
  j["nvjpeg_version"] = gpu.info.nvjpeg_version;
  j["notice"] = gpu.info.notice;
  j["batches"] = gpu.stats.batches;
  j["hardware_images"] = gpu.stats.hardware_images;
  j["fallback_images"] = gpu.stats.fallback_images;
  j["refused_images"] = gpu.stats.refused_images;
  j["failed_batches"] = gpu.stats.failed_batches;
  j["fallback_reasons"] = gpu.stats.fallback_reasons;
  j["consumer_wait_ms"] =
      std::chrono::duration<double, std::milli>(gpu.stats.consumer_wait).count();
  return j;
}

}  // namespace

nlohmann::ordered_json config_json(const TrainConfig& config) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  visit_train_flags(config, FlagsToJson(j));
  return j;
}

namespace {

nlohmann::ordered_json environment_json(bool cuda) {
  const DeviceDescription d = describe_device(cuda);
  nlohmann::ordered_json env;
  env["libtorch"] = TORCH_VERSION;
  env["cuda_runtime"] = d.cuda_runtime;
  env["cuda_driver"] = d.cuda_driver;
  env["cudnn"] = d.cudnn;
  env["device_name"] = d.device_name;
  env["multiprocessors"] = d.multiprocessors;
  env["device_memory_gib"] = d.memory_gib;
  env["hardware_threads"] = std::thread::hardware_concurrency();
  // How many hardware work queues the process's streams share (CUDA's default 8 when unset): it
  // decides which streams can wait behind each other's work, so runs are compared with it known.
  const char* connections = std::getenv("CUDA_DEVICE_MAX_CONNECTIONS");
  env["cuda_device_max_connections"] =
      connections ? nlohmann::ordered_json(connections) : nlohmann::ordered_json(nullptr);
  // "program": set by train_resnet50 itself for --decode gpu; "environment": the user's.
  env["cuda_device_max_connections_from"] =
      !connections
          ? nlohmann::ordered_json(nullptr)
          : nlohmann::ordered_json(cuda_connections_set_here() ? "program" : "environment");
  env["opencv"] = CV_VERSION;
  env["libjpeg"] = JPEG_LIB_VERSION;
#if defined(LIBJPEG_TURBO_VERSION_NUMBER)
  env["libjpeg_turbo"] = LIBJPEG_TURBO_VERSION_NUMBER;
#endif
  return env;
}

nlohmann::ordered_json loader_json(const HostRingFacts& ring, const Trainer& trainer) {
  nlohmann::ordered_json l;
  l["ring_slots"] = ring.slots;
  l["ring_bytes"] = ring.bytes;
  l["pinned"] = ring.pinned;
  l["batches_per_epoch"] = ring.batches_per_epoch;
  l["dataset_images"] = trainer.dataset_images();
  l["images_skipped_total"] = ring.images_skipped;
  l["decode"] = to_string(trainer.config().loader.decode);
  return l;
}

nlohmann::ordered_json capture_json(const TrainConfig& c, const RunResult& result) {
  nlohmann::ordered_json cap;
  cap["warmup_steps"] = static_cast<int>(result.warmup_steps.size());
  cap["steps"] = static_cast<int>(result.steps.size());
  cap["batch_size"] = c.loader.batch_size;
  cap["elapsed_s"] = result.elapsed_s;
  cap["images_per_s"] = result.images_per_s;
  cap["reuse_iterator"] = c.reuse_iterator;
  cap["iterator_reset_ms"] = result.iterator_reset_ms;
  cap["capture_drain_ms"] = result.capture_drain_ms;
  cap["profiler_stop_ms"] = result.profiler_stop_ms;
  cap["profiler_api"] = result.capture_started;
  if (result.graph_capture_ms) {
    cap["graph_capture_ms"] = *result.graph_capture_ms;
    // -1 where the build could not read the graph (lib/run_result.h).
    cap["graph_memset_kernels"] = result.graph_memset_kernels;
    cap["graph_memset_nodes"] = result.graph_memset_nodes;
  }
  if (!result.torch_trace.empty()) cap["torch_profiler_trace"] = result.torch_trace;
  return cap;
}

nlohmann::ordered_json summary_json(const RunResult& result) {
  const StepSummary s = summarize(result);
  nlohmann::ordered_json sum;
  sum["step_ms_p50"] = s.step_ms_p50;
  sum["step_ms_p95"] = s.step_ms_p95;
  sum["batch_wait_total_ms"] = s.batch_wait_total_ms;
  sum["batch_wait_max_ms"] = s.batch_wait_max_ms;
  sum["batch_wait_max_step"] = s.batch_wait_max_step;
  sum["h2d_submit_total_ms"] = s.h2d_submit_total_ms;
  sum["images_skipped"] = s.images_skipped;
  sum["images_skipped_all_steps"] = s.images_skipped_all_steps;
  return sum;
}

// Every image replaced under --on-bad-image=skip, warm-up included.
nlohmann::ordered_json skipped_images_json(const RunResult& result) {
  nlohmann::ordered_json skipped = nlohmann::ordered_json::array();
  for (const auto* steps_of : {&result.warmup_steps, &result.steps}) {
    for (const auto& r : *steps_of) {
      for (const auto& s : r.skipped) {
        skipped.push_back({{"path", s.path},
                           {"reason", s.reason},
                           {"replacement", s.replacement},
                           {"epoch", s.epoch},
                           {"step", r.index},
                           {"warmup", r.warmup}});
      }
    }
  }
  return skipped;
}

nlohmann::ordered_json dist_json(const Distributed& dist, const TrainConfig& c,
                                 const RunResult& result) {
  const DistEnv& env = dist.env();
  nlohmann::ordered_json d;
  d["backend"] = to_string(dist.backend());
  d["world_size"] = env.world_size;
  d["rank"] = env.rank;
  d["local_rank"] = env.local_rank;
  d["local_world_size"] = env.local_world_size;
  d["master"] = env.master_addr + ":" + std::to_string(env.master_port);
  d["agent_store"] = env.agent_store;
  d["timeout_s"] = c.dist_timeout_s;
  d["peer_timeout_s"] = c.dist_peer_timeout_s;
  d["bucket_mb"] = c.bucket_mb;
  d["first_bucket_mb"] = kFirstBucketBytes >> 20;
  d["broadcast_buffers"] = c.broadcast_buffers;
  d["grad_bucket_view"] = c.grad_bucket_view;
  d["nccl_version"] = dist.nccl_version();
  // As found in the environment: the GPU machines set NCCL_NVLS_ENABLE=0, and nothing here
  // changes it.
  const char* nvls = std::getenv("NCCL_NVLS_ENABLE");
  d["nccl_nvls_enable"] = nvls ? nlohmann::ordered_json(nvls) : nlohmann::ordered_json(nullptr);
  d["parameter_digest"] = result.parameter_digest ? hex64(*result.parameter_digest) : std::string();
  d["stop_agreed_by"] = result.stop_agreed_by;
  d["aborted"] = result.aborted;
  d["lost_rank"] =
      result.lost_rank >= 0 ? nlohmann::ordered_json(result.lost_rank) : nlohmann::ordered_json();
  return d;
}

}  // namespace

nlohmann::ordered_json make_report(const Trainer& trainer, const RunResult& result) {
  const TrainConfig& c = trainer.config();
  nlohmann::ordered_json j;
  j["program"] = "train_resnet50";
  j["version"] = kWorkloadVersion;
  j["config"] = config_json(c);
  j["environment"] = environment_json(trainer.on_cuda());
  auto& model = j["model"];
  model["name"] = "resnet50";
  model["num_classes"] = trainer.num_classes();
  model["parameters"] = trainer.parameters();
  model["memory_format"] = to_string(c.loader.transform.layout);
  if (const std::optional<HostRingFacts> ring = trainer.input().host_ring()) {
    j["loader"] = loader_json(*ring, trainer);
  }
  if (const std::optional<GpuDecodeSummary> gpu = trainer.input().gpu_decode()) {
    j["gpu_decode"] = gpu_decode_json(*gpu);
  }
  j["capture"] = capture_json(c, result);
  auto& steps = j["steps"] = nlohmann::ordered_json::array();
  for (const auto& r : result.steps) steps.push_back(step_json(r));
  auto& warm = j["warmup"] = nlohmann::ordered_json::array();
  for (const auto& r : result.warmup_steps) warm.push_back(step_json(r));
  j["summary"] = summary_json(result);
  j["skipped_images"] = skipped_images_json(result);
  if (result.loss_after_drain) {
    j["loss_after_drain"] = *result.loss_after_drain;
  } else {
    j["loss_after_drain"] = nullptr;
  }
  j["interrupted"] = result.interrupted;
  if (result.interrupted) j["interrupt_signal"] = result.interrupt_signal;
  if (const Distributed* dist = trainer.distributed()) j["dist"] = dist_json(*dist, c, result);
  return j;
}

nlohmann::ordered_json make_last_resort_report(const TrainConfig& config, const DistEnv& env,
                                               const DistVerdict& verdict, std::int64_t steps_done,
                                               int signal) {
  nlohmann::ordered_json j;
  j["program"] = "train_resnet50";
  j["version"] = kWorkloadVersion;
  j["config"] = config_json(config);
  j["partial"] =
      "written by the distributed watchdog: the trainer's thread did not come back after the "
      "abort, so the steps' records, the summary and the digest are missing";
  j["steps_completed"] = steps_done;
  j["interrupted"] = true;
  j["interrupt_signal"] = signal_name(signal < 0 ? 0 : signal);
  auto& d = j["dist"];
  d["world_size"] = env.world_size;
  d["rank"] = env.rank;
  d["local_rank"] = env.local_rank;
  d["master"] = env.master_addr + ":" + std::to_string(env.master_port);
  d["aborted"] = verdict.reason;
  d["lost_rank"] =
      verdict.rank >= 0 ? nlohmann::ordered_json(verdict.rank) : nlohmann::ordered_json();
  return j;
}

void write_report(const std::string& path, const nlohmann::ordered_json& report) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::trunc);
    if (!out) throw std::runtime_error("--report " + path + ": cannot open for writing");
    out << report.dump(2) << "\n";
    if (!out.flush()) throw std::runtime_error("--report " + path + ": write failed");
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    std::remove(tmp.c_str());
    throw std::runtime_error("--report " + path + ": cannot move the report into place");
  }
}

std::string format_summary(const Trainer& trainer, const RunResult& result) {
  const TrainConfig& c = trainer.config();
  const StepSummary s = summarize(result);
  char buf[256];
  std::string out = "\n";
  auto line = [&](const char* label, const std::string& value) {
    std::snprintf(buf, sizeof(buf), "  %-28s %s\n", label, value.c_str());
    out += buf;
  };
  auto num = [&](const char* fmt, double v) {
    std::snprintf(buf, sizeof(buf), fmt, v);
    return std::string(buf);
  };
  out += "summary (" + std::to_string(result.steps.size()) + " captured steps of batch " +
         std::to_string(c.loader.batch_size) + ", after " +
         std::to_string(result.warmup_steps.size()) + " warm-up)\n";
  line("throughput", num("%.1f images/s", result.images_per_s));
  line("capture window", num("%.1f ms", result.elapsed_s * 1000.0));
  line("step time p50 / p95", num("%.2f", s.step_ms_p50) + num(" / %.2f ms", s.step_ms_p95));
  std::string max_wait = num("%.2f ms", s.batch_wait_max_ms);
  if (s.batch_wait_max_step >= 0)
    max_wait += " (step " + std::to_string(s.batch_wait_max_step) + ")";
  line("batch_wait total", num("%.2f ms", s.batch_wait_total_ms));
  line("batch_wait max", max_wait);
  line("h2d_submit total", num("%.2f ms", s.h2d_submit_total_ms));
  if (!c.reuse_iterator) line("iterator_reset", num("%.2f ms", result.iterator_reset_ms));
  line("capture_drain", num("%.2f ms", result.capture_drain_ms));
  if (result.graph_capture_ms) {
    // Before the window: recording, rewriting, instantiating and uploading the step's graph.
    line("graph capture", num("%.1f ms", *result.graph_capture_ms));
    if (result.graph_memset_kernels >= 0) {
      line("graph memsets", std::to_string(result.graph_memset_kernels) + " as kernels, " +
                                std::to_string(result.graph_memset_nodes) + " as memset nodes");
    }
  }
  if (result.capture_started) {
    // Outside the window: under nsys, cudaProfilerStop returns once the capture is handed over.
    line("cudaProfilerStop", num("%.1f ms", result.profiler_stop_ms));
  }
  if (s.images_skipped_all_steps > 0) {
    line("images skipped", std::to_string(s.images_skipped_all_steps) +
                               " (undecodable, replaced; see the "
                               "report's skipped_images)");
  }
  line("loss after drain",
       result.loss_after_drain ? num("%.4f", *result.loss_after_drain) : std::string("n/a"));
  if (result.interrupted) {
    line("interrupted", "yes (" + result.interrupt_signal +
                            (!result.aborted.empty()         ? "; aborted: " + result.aborted + ")"
                             : result.stop_agreed_by.empty() ? std::string(")")
                                                             : "; the ranks stopped together for " +
                                                                   result.stop_agreed_by + ")"));
  }
  if (const Distributed* dist = trainer.distributed()) {
    line("rank", std::to_string(dist->rank()) + " of " + std::to_string(dist->world_size()) + " (" +
                     to_string(dist->backend()) + ")");
    if (result.parameter_digest) line("parameter digest", hex64(*result.parameter_digest));
  }
  return out;
}

}  // namespace workload
