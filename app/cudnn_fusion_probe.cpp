// cudnn_fusion_probe: which of cuDNN's graph-API fusions of a convolution with the batch norms
// around it exist for ResNet-50's bottleneck shapes, their engines, their time against the plain
// convolution and their error against an FP32 reference (issue 45). Built where this build has a
// CUDA LibTorch and cuDNN 9. Set CUDNN_LOGLEVEL_DBG=2 (and CUDNN_LOGDEST_DBG=stderr) for cuDNN's
// own reasons when a graph is refused.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

#include "lib/bench/cudnn_fusion_probe.h"
#include "lib/config/flag_table.h"
#include "lib/core/exit_status.h"
#include "lib/core/usage_error.h"

namespace {

std::vector<std::string> split_commas(const std::string& text, const char* flag) {
  std::vector<std::string> out;
  std::stringstream in(text);
  std::string item;
  while (std::getline(in, item, ',')) {
    if (item.empty())
      throw workload::UsageError(std::string(flag) + ": an empty item in '" + text + "'");
    out.push_back(item);
  }
  if (out.empty()) throw workload::UsageError(std::string(flag) + ": expected at least one item");
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace workload;
  return run_main("cudnn_fusion_probe", [&] {
    cxxopts::Options options(
        "cudnn_fusion_probe",
        "Builds cuDNN graph-API fusions of a convolution with its batch norms (scale, bias and "
        "ReLU in the prologue, statistics in the epilogue, the backward patterns) for each shape "
        "and dtype, times every engine the heuristics offer against the plain convolution, and "
        "checks the fastest against an FP32 reference. Prints a Markdown table.");
    bench::FusionProbeOptions o;
    std::int64_t batch = o.batch;
    std::string dtypes = "fp16,bf16", patterns, shapes, json;
    for (const auto& p : bench::probe_patterns()) patterns += (patterns.empty() ? "" : ",") + p;
    for (const auto& s : o.shapes) shapes += (shapes.empty() ? "" : ",") + s.name();
    auto visit = [&](auto&& v) {
      v.integer({"batch", "Probe", "images a batch (N)"}, batch, 1, 4096);
      v.text({"dtypes", "Probe", "comma-separated: fp16, bf16"}, dtypes);
      v.text({"shapes", "Probe", "comma-separated HxWxC-K r R s S (e.g. 56x56x64-256r1s1)"},
             shapes);
      v.text({"patterns", "Probe",
              "comma-separated, of: conv, conv_genstats, sbr_conv_genstats, "
              "wgrad, sbr_wgrad, dgrad, dgrad_drelu_bnbwd, dbn_apply, "
              "bn_finalize"},
             patterns);
      v.integer({"repeats", "Probe", "runs of each plan timed back to back (best of 3 rounds)"},
                o.repeats, 1, 10000);
      v.integer({"max-plans", "Probe", "engine configurations tried per heuristics mode"},
                o.max_plans, 1, 64);
      v.boolean({"check", "Probe", "compare each result with an FP32 reference"}, o.check);
      v.real({"budget-s", "Probe",
              "seconds after which the remaining rows are listed as skipped (0: no limit)"},
             o.budget_s, 0, 86400);
      v.text({"json", "Probe", "also write the rows here as JSON"}, json);
    };
    visit(DeclareFlags(options));
    options.add_options("Probe")("h,help", "print this help", request_value());
    const auto result = parse_command_line(options, argc, argv);
    if (given_boolean(result, "help")) {
      std::cout << options.help() << std::endl;
      return kExitOk;
    }
    FlagReader(result).reject_unmatched();
    visit(ReadFlags(result));
    o.batch = batch;
    o.dtypes = split_commas(dtypes, "--dtypes");
    o.patterns = split_commas(patterns, "--patterns");
    o.shapes.clear();
    for (const auto& s : split_commas(shapes, "--shapes")) {
      o.shapes.push_back(bench::parse_conv_shape(s, "--shapes"));
    }
    const auto rows = bench::run_fusion_probe(o);
    std::cout << bench::probe_rows_to_table(rows);
    if (!json.empty()) {
      std::ofstream out(json);
      out << bench::probe_rows_to_json(rows).dump(2) << "\n";
      if (!out) throw std::runtime_error("--json: cannot write " + json);
    }
    return kExitOk;
  });
}
