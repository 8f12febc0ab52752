// What train_resnet50 prints (lib/report/summary_text.h).
#include "lib/report/summary_text.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "lib/core/version.h"
#include "lib/report/report.h"
#include "lib/report/step_summary.h"

namespace workload {

namespace {

std::string printed(const char* fmt, double v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

std::string printed_int(const char* fmt, long long v) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), fmt, v);
  return buf;
}

// "workers 8, prefetch 2, pinned yes, batch unit, iterator reused, decode cpu".
std::string input_line(const RunFacts& f) {
  const TrainConfig& c = f.config;
  const data_pipeline::LoaderOptions& lo = c.loader;
  if (c.synthetic) return "synthetic batches (no loader)";
  const bool pinned = f.loader && f.loader->ring.pinned;
  return "workers " + std::to_string(lo.workers) + ", prefetch " +
         std::to_string(lo.prefetch_factor) + ", pinned " + (pinned ? "yes" : "no") + ", " +
         to_string(lo.work_unit) + " unit, iterator " + (c.reuse_iterator ? "reused" : "reset") +
         ", decode " + to_string(lo.decode);
}

// The experiment line, or "" for the article's settings.
std::string experiment_line(const RunFacts& f) {
  const TrainConfig& c = f.config;
  const TrainConfig article;
  const auto& lo = c.loader;
  if (c.precision == article.precision && lo.transform.dtype == article.loader.transform.dtype &&
      c.mode == article.mode && c.nvtx_detail == article.nvtx_detail && !c.sync_every_step &&
      !c.cuda_graph && !c.fused_bn && !c.fuse_conv_bn && !c.stem_pad && !c.deterministic &&
      c.torch_profiler_trace.empty()) {
    return {};
  }
  const std::string bn =
      c.mode == RunMode::kForward ? std::string(" (BN ") + to_string(c.forward_bn) + ")" : "";
  const std::string cast =
      f.model && f.model->weight_cast
          ? std::string(" (weights cast ") + to_string(*f.model->weight_cast) + ")"
          : "";
  return std::string("experiment: precision ") + to_string(c.precision) + cast + ", host dtype " +
         to_string(lo.transform.dtype) + ", mode " + to_string(c.mode) + bn + ", nvtx detail " +
         to_string(c.nvtx_detail) +
         (c.fused_bn ? ", batch norm fused with ReLU and add (cuDNN)" : "") +
         (c.fuse_conv_bn ? ", convolutions carrying their batch norms" : "") +
         (c.stem_pad ? ", the stem's input padded to 4 channels" : "") +
         (c.deterministic ? ", deterministic (the same bits every run)" : "") +
         (c.cuda_graph ? ", step replayed from a CUDA graph" : "") +
         (c.sync_every_step ? ", loss read every step" : "") +
         (c.torch_profiler_trace.empty() ? ""
                                         : ", torch profiler trace " + c.torch_profiler_trace) +
         "\n";
}

// "3 warm-up + 8 captured steps", or with --epochs "10 epochs of 94 steps, evaluated every
// epoch, capture window at step 90 for 8 steps".
std::string shape_text(const RunFacts& f) {
  const TrainConfig& c = f.config;
  if (c.epochs == 0) {
    return std::to_string(c.warmup) + " warm-up + " + std::to_string(c.steps) + " captured steps";
  }
  std::string out = std::to_string(c.epochs) + " epochs";
  if (f.loader) out += " of " + std::to_string(f.loader->ring.batches_per_epoch) + " steps";
  out += c.eval_every == 0   ? ", no evaluation"
         : c.eval_every == 1 ? ", evaluated every epoch"
                             : ", evaluated every " + std::to_string(c.eval_every) + " epochs";
  if (c.capture_at) {
    out += ", capture window at step " + std::to_string(*c.capture_at) + " for " +
           std::to_string(c.steps) + " steps";
  }
  return out;
}

// "sgd: lr cosine, peak 0.05 (scaled: 0.1 x global batch 128 / 256), warm-up 1 of 11 steps", with
// the label smoothing when there is one; "" without a schedule (--mode forward).
std::string lr_line(const RunFacts& f) {
  if (!f.lr_schedule) return {};
  const LrPlan& s = *f.lr_schedule;
  const LrScheduleOptions& o = s.options;
  std::string out =
      std::string("sgd: lr ") + to_string(o.kind) + ", peak " + printed("%g", o.peak_lr);
  if (s.scaled) {
    out += " (scaled: " + printed("%g", kReferenceLr) + " x global batch " +
           std::to_string(s.global_batch) + " / " + std::to_string(kReferenceBatch) + ")";
  }
  out += ", warm-up " + std::to_string(o.warmup_steps) + " of " + std::to_string(o.total_steps) +
         " steps";
  if (f.config.label_smoothing != 0) {
    out += ", label smoothing " + printed("%g", f.config.label_smoothing);
  }
  return out + "\n";
}

std::string interruption(const RunResult& r) {
  if (!r.aborted.empty()) return "yes (" + r.interrupt_signal + "; aborted: " + r.aborted + ")";
  if (r.stop_agreed_by.empty()) return "yes (" + r.interrupt_signal + ")";
  return "yes (" + r.interrupt_signal + "; the ranks stopped together for " + r.stop_agreed_by +
         ")";
}

}  // namespace

std::string format_banner(const RunFacts& f, const std::vector<std::string>& notices,
                          const std::string& prefix) {
  const TrainConfig& c = f.config;
  const bool cuda = f.model && f.model->on_cuda;
  std::string out = prefix + "train_resnet50 " + kWorkloadVersion + ": " + (cuda ? "cuda" : "cpu") +
                    ", batch " + std::to_string(c.loader.batch_size) + ", " +
                    std::to_string(c.loader.transform.image_size) + " px, " + shape_text(f) + ", " +
                    input_line(f) + "\n";
  out += experiment_line(f);
  if (const std::string lr = lr_line(f); !lr.empty()) out += prefix + lr;
  if (f.dist) {
    const LaunchEnv& e = f.dist->env;
    out += prefix + "distributed: rank " + std::to_string(e.rank) + " of " +
           std::to_string(e.world_size) + ", local rank " + std::to_string(e.local_rank) + ", " +
           to_string(f.dist->backend) + ", store " + e.master_addr + ":" +
           std::to_string(e.master_port) + ", batch " + std::to_string(c.loader.batch_size) +
           " per rank\n";
  }
  for (const auto& n : notices) out.append(prefix).append("note: ").append(n).append("\n");
  return out;
}

std::string format_step(const std::string& prefix, const StepRecord& r, int warmup_total,
                        int steps_total) {
  char buf[256];
  std::snprintf(buf, sizeof(buf),
                "[%s %d/%d] batch_wait %8.2f ms | h2d_submit %6.2f ms | step %8.2f ms\n",
                r.warmup ? "warmup" : "step  ", r.index + 1, r.warmup ? warmup_total : steps_total,
                r.batch_wait_ms, r.h2d_submit_ms, r.step_ms);
  return prefix + buf;
}

std::string format_duration(double seconds) {
  if (!(seconds >= 0)) return "?";
  if (seconds < 60) return printed("%.1fs", seconds);
  const auto total = std::llround(seconds);
  if (total < 3600) return printed_int("%lldm", total / 60) + printed_int("%02llds", total % 60);
  return printed_int("%lldh", total / 3600) + printed_int("%02lldm", (total % 3600) / 60);
}

std::string format_epoch(const std::string& prefix, const EpochRecord& r, int epochs_total,
                         double eta_s) {
  const std::string total = std::to_string(epochs_total);
  std::string number = std::to_string(r.epoch + 1);
  if (number.size() < total.size()) number.insert(0, total.size() - number.size(), ' ');
  std::string out =
      prefix + "[epoch " + number + "/" + total + "]" + printed(" loss %.4f", r.train_loss);
  if (r.eval) {
    out += printed(" | top-1 %.2f%%", 100.0 * r.eval->top1) +
           printed(" top-5 %.2f%%", 100.0 * r.eval->top5) +
           printed(" (eval loss %.4f,", r.eval->loss) + printed(" %.1f s)", r.eval->ms / 1000.0);
  }
  if (r.eval_cut) out += " | evaluation cut short by the stop";
  out += printed(" | %.1f images/s", r.images_per_s) + " | " + format_duration(r.epoch_s);
  if (r.checkpoint && r.checkpoint->bytes > 0) {
    out += printed(" | checkpoint %.0f ms", r.checkpoint->ms);
  }
  if (eta_s >= 0) out += " | ETA " + format_duration(eta_s);
  return out + "\n";
}

namespace {

// The summary's "  label    value" lines, in one string.
struct SummaryLines {
  std::string out;
  void line(const char* label, const std::string& value) {
    char buf[512];
    std::snprintf(buf, sizeof(buf), "  %-28s %s\n", label, value.c_str());
    out += buf;
  }
};

// The heading: how many steps the figures below count, of which batch, and around what.
std::string summary_heading(const TrainConfig& c, const RunResult& result) {
  const std::string steps = std::to_string(result.steps.size());
  const std::string batch = std::to_string(c.loader.batch_size);
  if (c.epochs == 0) {
    return "summary (" + steps + " captured steps of batch " + batch + ", after " +
           std::to_string(result.warmup_steps.size()) + " warm-up)\n";
  }
  if (!c.capture_at)
    return "summary (" + steps + " steps of batch " + batch + ", no capture window)\n";
  return "summary (" + steps + " captured steps of batch " + batch + ", after " +
         std::to_string(result.warmup_steps.size()) + " and before " +
         std::to_string(result.steps_after_capture.size()) + " others)\n";
}

// An --epochs run's lines: epochs done, the last one, the best top-1 and the target.
void epoch_lines(SummaryLines& l, const TrainConfig& c, const RunResult& result) {
  const std::size_t done = result.epochs.size();
  l.line("epochs",
         std::to_string(done) + " of " + std::to_string(c.epochs) +
             (result.resumed_from.empty() ? std::string()
                                          : " (resumed from " + result.resumed_from + ")"));
  if (done > 0) {
    const EpochRecord& last = result.epochs.back();
    l.line("last epoch", printed("loss %.4f", last.train_loss) +
                             (last.eval ? printed(", top-1 %.2f%%", 100.0 * last.eval->top1) +
                                              printed(", top-5 %.2f%%", 100.0 * last.eval->top5)
                                        : std::string()));
    l.line("wall time", format_duration(last.elapsed_s));
  }
  if (result.best_top1) {
    l.line("best top-1", printed("%.2f%%", 100.0 * *result.best_top1) + " after epoch " +
                             std::to_string(result.best_top1_epoch + 1) + ", at " +
                             format_duration(result.time_to_best_top1_s));
  }
  if (c.target_top1) {
    l.line("target top-1", printed("%.2f%%: ", 100.0 * *c.target_top1) +
                               (result.target_reached ? "reached" : "not reached"));
  }
}

// The window's figures: throughput, step times, the waits, what the window left outside it.
void window_lines(SummaryLines& l, const TrainConfig& c, const RunResult& result,
                  const StepSummary& s) {
  const bool epochs_without_window = c.epochs > 0 && !c.capture_at;
  l.line("throughput",
         printed("%.1f images/s", result.images_per_s) +
             (epochs_without_window ? " (training steps, evaluations excluded)" : ""));
  l.line(epochs_without_window ? "training steps" : "capture window",
         printed("%.1f ms", result.elapsed_s * 1000.0));
  l.line("step time p50 / p95",
         printed("%.2f", s.step_ms_p50) + printed(" / %.2f ms", s.step_ms_p95));
  std::string max_wait = printed("%.2f ms", s.batch_wait_max_ms);
  if (s.batch_wait_max_step >= 0) {
    max_wait += " (step " + std::to_string(s.batch_wait_max_step) + ")";
  }
  l.line("batch_wait total", printed("%.2f ms", s.batch_wait_total_ms));
  l.line("batch_wait max", max_wait);
  l.line("h2d_submit total", printed("%.2f ms", s.h2d_submit_total_ms));
  if (!c.reuse_iterator) l.line("iterator_reset", printed("%.2f ms", result.iterator_reset_ms));
  l.line("capture_drain", printed("%.2f ms", result.capture_drain_ms));
  if (result.graph_capture_ms) {
    // Before the window: recording, rewriting, instantiating and uploading the step's graph.
    l.line("graph capture", printed("%.1f ms", *result.graph_capture_ms));
    if (result.graph_memset_kernels >= 0) {
      l.line("graph memsets", std::to_string(result.graph_memset_kernels) + " as kernels, " +
                                  std::to_string(result.graph_memset_nodes) + " as memset nodes");
    }
  }
  if (result.capture_started) {
    // Outside the window: under nsys, cudaProfilerStop returns once the capture is handed over.
    l.line("cudaProfilerStop", printed("%.1f ms", result.profiler_stop_ms));
  }
}

// ": steps 0, 1 and 3" for the steps an fp16 run's epochs recorded as skipped, when they are all of
// the `skipped` (a run resumed from a checkpoint without them, or one without epochs, names none);
// the first kListed, then how many more.
std::string skipped_steps_named(const RunResult& result, std::int64_t skipped) {
  constexpr std::size_t kListed = 8;
  if (skipped <= 0 || result.epochs.empty() || !result.epochs.back().loss_scale) return "";
  const std::vector<std::int64_t>& at = result.epochs.back().skipped_at;
  if (static_cast<std::int64_t>(at.size()) != skipped) return "";
  std::string out = at.size() == 1 ? ": step " : ": steps ";
  const std::size_t listed = std::min(at.size(), kListed);
  for (std::size_t i = 0; i < listed; ++i) {
    if (i > 0) out += i + 1 == listed && listed == at.size() ? " and " : ", ";
    out += std::to_string(at[i]);
  }
  if (listed < at.size()) out += " and " + std::to_string(at.size() - listed) + " more";
  return out;
}

// How the run ended: skipped images, the last loss, a non-finite loss, a stop, the rank.
void ending_lines(SummaryLines& l, const RunFacts& f, const StepSummary& s) {
  const RunResult& result = f.result;
  if (s.images_skipped_all_steps > 0) {
    l.line("images skipped", std::to_string(s.images_skipped_all_steps) +
                                 " (undecodable, replaced; see the report's skipped_images)");
  }
  l.line("loss after drain",
         result.loss_after_drain ? printed("%.4f", *result.loss_after_drain) : std::string("n/a"));
  if (!result.nonfinite_loss.empty()) {
    l.line("non-finite loss", result.nonfinite_loss + (result.nonfinite_stopped
                                                           ? " (no result: exit 1)"
                                                           : " (--allow-nonfinite-loss: went on)"));
  }
  if (f.loss_scaling) {
    const LossScaler::State& st = f.loss_scaling->state;
    l.line("loss scale (fp16)", printed("%g", st.scale) + " at the end; " +
                                    std::to_string(st.skipped_steps) +
                                    " steps skipped (a gradient not finite)" +
                                    skipped_steps_named(result, st.skipped_steps));
  }
  if (result.interrupted) l.line("interrupted", interruption(result));
  if (f.dist) {
    l.line("rank", std::to_string(f.dist->env.rank) + " of " +
                       std::to_string(f.dist->env.world_size) + " (" + to_string(f.dist->backend) +
                       ")");
    if (result.parameter_digest) l.line("parameter digest", hex64(*result.parameter_digest));
  }
}

}  // namespace

std::string format_summary(const RunFacts& f) {
  const StepSummary s = summarize(f.result);
  SummaryLines l{"\n" + summary_heading(f.config, f.result)};
  if (f.config.epochs > 0) epoch_lines(l, f.config, f.result);
  window_lines(l, f.config, f.result, s);
  ending_lines(l, f, s);
  return l.out;
}

}  // namespace workload
