// Which of cuDNN's graph-API fusions of a convolution with the batch norms around it exist for
// ResNet-50's bottleneck shapes, what they cost against the plain convolution and how close they
// come to an FP32 reference (issue 45's feasibility probe), for cudnn_fusion_probe.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace workload::bench {

/// One convolution of the bottleneck: input N x C x H x W (NHWC), K filters of R x R, a stride.
struct ConvShape {
  std::int64_t c = 64, h = 56, w = 56, k = 64, r = 3, stride = 1;
  std::int64_t pad() const { return (r - 1) / 2; }
  std::int64_t out_h() const { return (h + 2 * pad() - r) / stride + 1; }
  std::int64_t out_w() const { return (w + 2 * pad() - r) / stride + 1; }
  /// "56x56x64-64r3s1"
  std::string name() const;
};

/// Parses "HxWxC-Kr{R}s{S}" (e.g. 56x56x64-256r1s1).
/// \throws UsageError naming the flag and the text.
ConvShape parse_conv_shape(const std::string& text, const char* flag);

/// ResNet-50's bottleneck shapes the issue names: 56x56 64->64 3x3, 56x56 64->256 1x1,
/// 14x14 1024->256 1x1, and the stride-2 3x3 of the second stage.
std::vector<ConvShape> default_conv_shapes();

/// The graphs the probe builds, each beside the plain convolution of its direction.
///   conv               plain forward convolution
///   conv_genstats      convolution, its output's per-channel sum and sum of squares (GenStats)
///   sbr_conv_genstats  scale -> bias -> ReLU on the input, the convolution, GenStats
///   wgrad              plain weight gradient
///   sbr_wgrad          the weight gradient with scale -> bias -> ReLU recomputed on its input
///   dgrad              plain data gradient
///   dgrad_drelu_bnbwd  data gradient -> ReLU's gradient -> the batch norm's weight gradients and
///                      the coefficients of its data gradient (dx = A dy + B x + C)
///   dbn_apply          dx = A dy + B x + C, per channel
///   bn_finalize        batch norm's statistics from the sums: mean, inverse std, the running
///                      statistics, and the scale and bias the next prologue applies
inline const std::vector<std::string>& probe_patterns() {
  static const std::vector<std::string> kPatterns = {
      "conv",  "conv_genstats",     "sbr_conv_genstats", "wgrad",      "sbr_wgrad",
      "dgrad", "dgrad_drelu_bnbwd", "dbn_apply",         "bn_finalize"};
  return kPatterns;
}

struct FusionProbeOptions {
  std::int64_t batch = 256;
  std::vector<std::string> dtypes = {"fp16", "bf16"};  ///< "fp16", "bf16"
  std::vector<ConvShape> shapes = default_conv_shapes();
  std::vector<std::string> patterns = probe_patterns();
  int repeats = 20;   ///< runs of each plan timed back to back (the best of 3 rounds' mean counts)
  int max_plans = 6;  ///< engine configurations built per graph and heuristics mode
  bool check = true;  ///< compare each result with an FP32 reference computed by LibTorch
  /// Seconds after which the remaining rows are listed as skipped, not run (0: no limit).
  double budget_s = 0;
};

/// One engine configuration the heuristics offered for a graph.
struct EngineTry {
  std::int64_t global_index = -1;
  bool runtime_compiled = false;  ///< CUDNN_BEHAVIOR_NOTE_RUNTIME_COMPILATION
  bool nondeterministic = false;  ///< CUDNN_NUMERICAL_NOTE_NONDETERMINISTIC
  std::string heuristics;         ///< "A" or "fallback"
  bool built = false;             ///< the execution plan finalized
  std::string status;             ///< why not, when not
  double build_ms = 0;            ///< cudnnBackendFinalize of the plan
  double best_us = 0;             ///< a run's time, µs (0 when not built or failed)
};

/// One graph (pattern, shape, dtype): whether cuDNN took it, its engines, its time, its error.
struct ProbeRow {
  std::string shape, dtype, pattern;
  std::string status;  ///< "ok", or why there is no result (graph refused, no engine, ...)
  std::vector<EngineTry> engines;
  double best_us = 0;  ///< the fastest engine's time
  std::int64_t best_engine = -1;
  double plain_us = 0;  ///< the plain convolution of the same direction (0 for BN-only)
  double seconds = 0;   ///< the row's wall time: graph, plans (runtime compilation), runs, check
  /// Relative L2 errors against the FP32 reference, per output ("y", "sum", "sqsum", "dw", ...);
  /// "<name>_plain" the plain convolution's own error at this dtype, where there is one.
  std::vector<std::pair<std::string, double>> errors;
};

/// Builds, times and checks every (shape, dtype, pattern) of `options` on the current CUDA device.
/// A graph cuDNN refuses is a row saying why (cudnnGetLastErrorString), never an exception.
/// \throws std::runtime_error when there is no CUDA device or cuDNN cannot start.
std::vector<ProbeRow> run_fusion_probe(const FusionProbeOptions& options);

nlohmann::json probe_rows_to_json(const std::vector<ProbeRow>& rows);
/// A Markdown table: one line a row.
std::string probe_rows_to_table(const std::vector<ProbeRow>& rows);

}  // namespace workload::bench
