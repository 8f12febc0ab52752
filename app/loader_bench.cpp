// loader_bench: images/s of the loader alone, fused ROI decode vs full decode, and pure decode.
#include <cstdio>
#include <iostream>

#include "lib/bench/loader_bench.h"
#include "lib/config/flag_table.h"
#include "lib/core/exit_status.h"

int main(int argc, char** argv) {
  using namespace workload;
  return run_main("loader_bench", [&] {
    cxxopts::Options options(
        "loader_bench",
        "Runs the data_pipeline loader alone over a Food-101-layout dataset and reports images/s "
        "in total and per worker thread, for the fused ROI + DCT-scaled decode and for a plain "
        "full decode followed by the crop, plus the pure full-decode rate, with the process's host "
        "CPU time per image. With --decode gpu, the GPU decode stage first (images/s on the "
        "device, host CPU per image, share of images that fell back to the CPU path). The loader "
        "flags are train_resnet50's.");
    options.set_width(100);
    bench::BenchOptions o = bench::default_bench_options();
    bench::visit_bench_flags(o, DeclareFlags(options));
    options.add_options("Benchmark")("h,help", "print this help", request_value());
    const auto result = parse_command_line(options, argc, argv);
    if (given_boolean(result, "help")) {
      std::cout << options.help() << std::endl;
      return kExitOk;
    }
    FlagReader(result).reject_unmatched();
    bench::visit_bench_flags(o, ReadFlags(result));
    bench::validate(o);
    const bench::BenchResults results = bench::run_bench(o);
    if (o.json) {
      std::cout << bench::bench_json(results).dump() << std::endl;
    } else {
      std::printf("%s", bench::format_bench(results).c_str());
    }
    return kExitOk;
  });
}
