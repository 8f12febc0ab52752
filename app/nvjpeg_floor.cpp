// nvjpeg_floor: one nvjpegDecodeBatchedEx per batch and nothing else, for counting the CUDA calls
// nvJPEG's hardware decode makes under nsys (issue 32). Built where this build has nvJPEG.
#include <cstdio>
#include <iostream>

#include "lib/bench/nvjpeg_floor.h"
#include "lib/config/flag_table.h"
#include "lib/core/exit_status.h"

int main(int argc, char** argv) {
  using namespace workload;
  return run_main("nvjpeg_floor", [&] {
    cxxopts::Options options("nvjpeg_floor",
                             "Decodes the first --batch training images of a Food-101 root with "
                             "nvJPEG's hardware backend, --iterations times inside "
                             "cudaProfilerStart/Stop, each batch in an NVTX range decode_batch.");
    bench::FloorOptions o;
    auto visit = [&](auto&& v) {
      v.text({"data", "Floor", "Food-101 root"}, o.data);
      v.integer({"batch", "Floor", "images per nvjpegDecodeBatchedEx"}, o.batch, 1, 4096);
      v.integer({"iterations", "Floor", "batches inside the capture range"}, o.iterations, 1,
                100000);
      v.integer({"warmup", "Floor", "batches before it"}, o.warmup, 0, 100000);
      v.boolean({"pinned", "Floor", "bitstreams in page-locked memory"}, o.pinned);
      v.integer(
          {"crop", "Floor", "a centred crop of this side as the region of interest (0: whole)"},
          o.crop, 0, 65536);
      v.boolean({"sync-each", "Floor", "wait for each batch on the host"}, o.sync_each);
      v.choice({"output", "Floor",
                "what nvJPEG writes: interleaved RGB (the stage's), the coded YUV planes, or luma "
                "alone (yuv and y: whole images only)"},
               o.output);
    };
    visit(DeclareFlags(options));
    options.add_options("Floor")("h,help", "print this help", request_value());
    const auto result = parse_command_line(options, argc, argv);
    if (given_boolean(result, "help")) {
      std::cout << options.help() << std::endl;
      return kExitOk;
    }
    FlagReader(result).reject_unmatched();
    visit(ReadFlags(result));
    if (o.data.empty()) throw UsageError("--data: required (a Food-101 root)");
    std::printf("nvjpeg_floor: %.1f images/s (batch %d, %s bitstreams, %s, %s output, %s)\n",
                bench::run_nvjpeg_floor(o), o.batch, o.pinned ? "pinned" : "pageable",
                o.crop > 0 ? ("crop " + std::to_string(o.crop)).c_str() : "whole images",
                common::to_string(o.output), o.sync_each ? "synchronised each batch" : "queued");
    return kExitOk;
  });
}
