// The run's JSON report (lib/report/report.h).
#include "lib/report/report.h"

#include <chrono>
#include <cstdio>
#include <limits>

#include "lib/config/train_flags.h"
#include "lib/core/output_file.h"
#include "lib/core/stop_request.h"
#include "lib/core/version.h"
#include "lib/distributed/data_parallel.h"
#include "lib/report/step_summary.h"

namespace workload {

namespace dp = data_pipeline;
using Json = nlohmann::ordered_json;

std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof(buf), "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

Json config_json(const TrainConfig& config) {
  Json j = Json::object();
  visit_train_flags(config, FlagsToJson(j));
  return j;
}

namespace {

template <typename T>
Json or_null(const std::optional<T>& v) {
  return v ? Json(*v) : Json(nullptr);
}

// {"data_load": 1.2, "batch_wait": 0.3, ...}; a phase opened twice in a step counts once, summed.
Json phase_ms_json(const std::vector<std::pair<std::string, double>>& phases) {
  Json j = Json::object();
  for (const auto& [name, ms] : phases) j[name] = j.value(name, 0.0) + ms;
  return j;
}

Json step_json(const StepRecord& r) {
  Json j;
  j["index"] = r.index;
  j["batch_wait_ms"] = r.batch_wait_ms;
  j["h2d_submit_ms"] = r.h2d_submit_ms;
  j["step_ms"] = r.step_ms;
  j["phase_ms"] = phase_ms_json(r.phase_ms);
  j["digest"] = hex64(r.digest);
  j["epoch"] = r.epoch;
  j["batch_in_epoch"] = r.batch_in_epoch;
  if (r.loss) j["loss"] = *r.loss;
  if (r.lr) j["lr"] = *r.lr;
  if (r.step) j["step"] = *r.step;
  if (!r.injected_stalls.empty()) {
    auto& list = j["injected_stalls"] = Json::array();
    for (const auto& s : r.injected_stalls) list.push_back({{"phase", s.phase}, {"ms", s.ms}});
  }
  if (!r.skipped.empty()) {
    auto& list = j["skipped"] = Json::array();
    for (const auto& s : r.skipped) {
      list.push_back({{"path", s.path}, {"reason", s.reason}, {"replacement", s.replacement}});
    }
  }
  return j;
}

Json environment_json(const EnvironmentFacts& e) {
  Json env;
  env["libtorch"] = e.libtorch;
  env["cuda_runtime"] = e.device.cuda_runtime;
  env["cuda_driver"] = e.device.cuda_driver;
  env["cudnn"] = e.device.cudnn;
  env["device_name"] = e.device.device_name;
  env["multiprocessors"] = e.device.multiprocessors;
  env["device_memory_gib"] = e.device.memory_gib;
  env["hardware_threads"] = e.hardware_threads;
  env["cuda_device_max_connections"] = or_null(e.cuda_connections.value);
  // "program": set by train_resnet50 itself for --decode gpu; "environment": the user's.
  env["cuda_device_max_connections_from"] =
      e.cuda_connections.value ? Json(e.cuda_connections.from) : Json(nullptr);
  env["opencv"] = e.opencv;
  env["libjpeg"] = e.libjpeg;
  if (e.libjpeg_turbo) env["libjpeg_turbo"] = *e.libjpeg_turbo;
  return env;
}

Json model_json(const ModelFacts& m, const TrainConfig& c) {
  Json j;
  j["name"] = "resnet50";
  j["num_classes"] = m.num_classes;
  j["parameters"] = m.parameters;
  j["memory_format"] = to_string(c.loader.transform.layout);
  j["weight_cast"] = m.weight_cast ? Json(to_string(*m.weight_cast)) : Json(nullptr);
  return j;
}

Json loader_json(const LoaderFacts& l, const TrainConfig& c) {
  Json j;
  j["ring_slots"] = l.ring.slots;
  j["ring_bytes"] = l.ring.bytes;
  j["pinned"] = l.ring.pinned;
  j["batches_per_epoch"] = l.ring.batches_per_epoch;
  j["dataset_images"] = l.dataset_images;
  j["images_skipped_total"] = l.ring.images_skipped;
  j["decode"] = to_string(c.loader.decode);
  return j;
}

Json gpu_decode_json(const GpuDecodeSummary& gpu) {
  Json j;
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

// The learning rate the run used: config's lr and lr_warmup_steps are null when the rules chose.
Json lr_schedule_json(const LrPlan& s) {
  const LrScheduleOptions& o = s.options;
  Json j;
  j["kind"] = to_string(o.kind);
  j["lr"] = o.peak_lr;  // the peak
  j["scaled"] = s.scaled;
  j["global_batch"] = s.global_batch;
  j["reference_lr"] = kReferenceLr;
  j["reference_batch"] = kReferenceBatch;
  j["warmup_steps"] = o.warmup_steps;
  j["total_steps"] = o.total_steps;
  if (o.kind == LrScheduleKind::kCosine) j["final_lr"] = o.peak_lr * o.final_fraction;
  if (o.kind == LrScheduleKind::kStep) {
    j["milestones"] = o.milestones;
    j["decay_factor"] = o.decay_factor;
  }
  // false: the article's kernels, the LR their scalar; true: read from a device table.
  j["lr_on_device"] = s.lr_on_device;
  return j;
}

Json capture_json(const TrainConfig& c, const RunResult& result) {
  Json cap;
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
    // -1 where the build could not read the graph (lib/report/run_result.h).
    cap["graph_memset_kernels"] = result.graph_memset_kernels;
    cap["graph_memset_nodes"] = result.graph_memset_nodes;
  }
  if (!result.torch_trace.empty()) cap["torch_profiler_trace"] = result.torch_trace;
  return cap;
}

Json summary_json(const RunResult& result) {
  const StepSummary s = summarize(result);
  Json sum;
  sum["step_ms_p50"] = s.step_ms_p50;
  sum["step_ms_p95"] = s.step_ms_p95;
  sum["batch_wait_total_ms"] = s.batch_wait_total_ms;
  sum["batch_wait_max_ms"] = s.batch_wait_max_ms;
  sum["batch_wait_max_step"] = s.batch_wait_max_step;
  sum["h2d_submit_total_ms"] = s.h2d_submit_total_ms;
  sum["images_skipped"] = s.images_skipped;
  sum["images_skipped_all_steps"] = s.images_skipped_all_steps;
  sum["phase_ms_p50"] = phase_ms_json(s.phase_ms_p50);
  return sum;
}

// Every image replaced under --on-bad-image=skip, warm-up included.
Json skipped_images_json(const RunResult& result) {
  Json skipped = Json::array();
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

Json dist_json(const DistFacts& dist, const RunFacts& facts) {
  const LaunchEnv& env = dist.env;
  const TrainConfig& c = facts.config;
  const RunResult& result = facts.result;
  Json d;
  d["backend"] = to_string(dist.backend);
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
  d["nccl_version"] = dist.nccl_version;
  d["nccl_nvls_enable"] = or_null(facts.environment.nccl_nvls_enable);
  d["parameter_digest"] = result.parameter_digest ? hex64(*result.parameter_digest) : std::string();
  d["stop_agreed_by"] = result.stop_agreed_by;
  d["aborted"] = result.aborted;
  d["lost_rank"] = result.lost_rank >= 0 ? Json(result.lost_rank) : Json();
  return d;
}

// --epochs: the epochs, the best evaluation, the target and the checkpoint resumed from.
Json training_json(const TrainConfig& c, const RunResult& result) {
  Json t;
  t["epochs_planned"] = c.epochs;
  t["resumed_from"] = result.resumed_from.empty() ? Json() : Json(result.resumed_from);
  t["best_top1"] = or_null(result.best_top1);
  t["best_top1_epoch"] = result.best_top1_epoch >= 0 ? Json(result.best_top1_epoch) : Json();
  t["time_to_best_top1_s"] = result.best_top1 ? Json(result.time_to_best_top1_s) : Json();
  t["target_top1"] = or_null(c.target_top1);
  t["target_reached"] = result.target_reached;
  auto& epochs = t["epochs"] = Json::array();
  for (const EpochRecord& e : result.epochs) epochs.push_back(epoch_json(e));
  return t;
}

// The sections of what the steps produced (none in a partial record).
void add_run(Json& j, const RunFacts& facts) {
  const RunResult& result = facts.result;
  j["capture"] = capture_json(facts.config, result);
  auto& steps = j["steps"] = Json::array();
  for (const auto& r : result.steps) steps.push_back(step_json(r));
  auto& warm = j["warmup"] = Json::array();
  for (const auto& r : result.warmup_steps) warm.push_back(step_json(r));
  if (facts.config.epochs > 0) {
    auto& after = j["steps_after_capture"] = Json::array();
    for (const auto& r : result.steps_after_capture) after.push_back(step_json(r));
    j["training"] = training_json(facts.config, result);
  }
  j["summary"] = summary_json(result);
  j["skipped_images"] = skipped_images_json(result);
  j["loss_after_drain"] = or_null(result.loss_after_drain);
  j["nonfinite_loss"] = result.nonfinite_loss.empty() ? Json() : Json(result.nonfinite_loss);
  j["nonfinite_stopped"] = result.nonfinite_stopped;
}

}  // namespace

Json epoch_json(const EpochRecord& e) {
  Json j;
  j["epoch"] = e.epoch;
  j["steps"] = e.steps;
  j["train_loss"] = e.train_loss;
  j["train_s"] = e.train_s;
  j["images_per_s"] = e.images_per_s;
  j["epoch_s"] = e.epoch_s;
  j["elapsed_s"] = e.elapsed_s;
  j["lr"] = e.lr;
  if (e.eval) {
    j["eval"] = {{"images", e.eval->images}, {"top1", e.eval->top1}, {"top5", e.eval->top5},
                 {"loss", e.eval->loss},     {"ms", e.eval->ms},     {"steps", e.eval->steps}};
    if (!e.eval->skipped.empty()) j["eval"]["skipped_images"] = e.eval->skipped;
  } else {
    j["eval"] = nullptr;
  }
  if (e.checkpoint) {
    j["checkpoint"] = {
        {"path", e.checkpoint->path}, {"bytes", e.checkpoint->bytes}, {"ms", e.checkpoint->ms}};
  } else {
    j["checkpoint"] = nullptr;
  }
  if (e.resumed) j["resumed"] = true;
  if (e.eval_cut) j["eval_cut"] = true;
  if (e.loss_scale) {
    j["loss_scale"] = *e.loss_scale;
    j["skipped_steps"] = e.skipped_steps;
    j["skipped_at"] = e.skipped_at;
  }
  return j;
}

namespace {

/// j[key] as a number; `fallback` where it is missing and NaN where it is null. JSON has no NaN or
/// infinity: nlohmann's dump writes either as null, so a non-finite loss that a run kept
/// (--allow-nonfinite-loss) reads back as not finite instead of failing the read.
double number_or(const Json& j, const char* key, double fallback) {
  const auto it = j.find(key);
  if (it == j.end()) return fallback;
  if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  return it->get<double>();
}

}  // namespace

EpochRecord epoch_from_json(const Json& j) {
  EpochRecord e;
  e.epoch = j.value("epoch", std::int64_t{0});
  e.steps = j.value("steps", std::int64_t{0});
  e.train_loss = number_or(j, "train_loss", 0.0);
  e.train_s = number_or(j, "train_s", 0.0);
  e.images_per_s = number_or(j, "images_per_s", 0.0);
  e.epoch_s = number_or(j, "epoch_s", 0.0);
  e.elapsed_s = number_or(j, "elapsed_s", 0.0);
  e.lr = number_or(j, "lr", 0.0);
  if (j.contains("eval") && j["eval"].is_object()) {
    const Json& v = j["eval"];
    EvalRecord r;
    r.images = v.value("images", std::int64_t{0});
    r.top1 = number_or(v, "top1", 0.0);
    r.top5 = number_or(v, "top5", 0.0);
    r.loss = number_or(v, "loss", 0.0);
    r.ms = number_or(v, "ms", 0.0);
    r.steps = v.value("steps", 0);
    r.skipped = v.value("skipped_images", std::vector<std::string>());
    e.eval = r;
  }
  if (j.contains("checkpoint") && j["checkpoint"].is_object()) {
    const Json& v = j["checkpoint"];
    e.checkpoint = CheckpointRecord{v.value("path", std::string()),
                                    v.value("bytes", std::uint64_t{0}), number_or(v, "ms", 0.0)};
  }
  e.resumed = j.value("resumed", false);
  e.eval_cut = j.value("eval_cut", false);
  if (j.contains("loss_scale") && j["loss_scale"].is_number()) {
    e.loss_scale = j["loss_scale"].get<double>();
    e.skipped_steps = j.value("skipped_steps", std::int64_t{0});
    e.skipped_at = j.value("skipped_at", std::vector<std::int64_t>());
  }
  return e;
}

// fp16's loss scaling: GradScaler's options, the scale the run ended on and the steps it skipped.
Json loss_scaling_json(const LossScalingFacts& s) {
  Json j;
  j["init_scale"] = s.options.init_scale;
  j["growth_factor"] = s.options.growth_factor;
  j["backoff_factor"] = s.options.backoff_factor;
  j["growth_interval"] = s.options.growth_interval;
  j["final_scale"] = s.state.scale;
  j["growth_tracker"] = s.state.growth_tracker;
  j["skipped_steps"] = s.state.skipped_steps;
  return j;
}

Json report_json(const RunFacts& facts) {
  Json j;
  j["program"] = "train_resnet50";
  j["version"] = kWorkloadVersion;
  j["config"] = config_json(facts.config);
  j["environment"] = environment_json(facts.environment);
  if (facts.partial) {
    j["partial"] = facts.partial->why;
    j["steps_completed"] = facts.partial->steps_completed;
  }
  if (facts.model) j["model"] = model_json(*facts.model, facts.config);
  if (facts.loader) j["loader"] = loader_json(*facts.loader, facts.config);
  if (facts.gpu_decode) j["gpu_decode"] = gpu_decode_json(*facts.gpu_decode);
  if (facts.lr_schedule) j["lr_schedule"] = lr_schedule_json(*facts.lr_schedule);
  if (facts.loss_scaling) j["loss_scaling"] = loss_scaling_json(*facts.loss_scaling);
  if (!facts.partial) add_run(j, facts);
  j["interrupted"] = facts.result.interrupted;
  if (facts.result.interrupted) j["interrupt_signal"] = facts.result.interrupt_signal;
  if (facts.dist) j["dist"] = dist_json(*facts.dist, facts);
  return j;
}

void write_report(const std::string& path, const Json& report) {
  write_output_file("--report", path, report.dump(2) + "\n");
}

}  // namespace workload
