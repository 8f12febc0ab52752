// loader_bench: images/s of the loader alone, fused ROI decode vs full decode, and pure decode.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>
#include <vector>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/sample_transform.h"
#include "lib/cli.h"
#include "lib/train_flags.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace dp = data_pipeline;

struct LoaderRun {
  double images_per_s = 0;
  double seconds = 0;
  std::int64_t images = 0;
};

// Runs `warmup` + `batches` batches through a loader and times the last `batches`.
LoaderRun run_loader(const std::shared_ptr<const dp::Food101Index>& index,
                     dp::LoaderOptions options, int warmup, int batches) {
  dp::Loader loader(index, options);
  for (int i = 0; i < warmup; ++i) loader.next();
  const auto start = Clock::now();
  std::int64_t images = 0;
  for (int i = 0; i < batches; ++i) images += loader.next().size();
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  return {images / s, s, images};
}

// Full-resolution decode only (no crop, resize or normalisation), `threads` threads over the
// files held in memory, so neither the file system nor the ring is measured.
double decode_only(const std::vector<std::vector<std::uint8_t>>& files, int threads, int images) {
  std::atomic<int> next{0};
  auto work = [&] {
    dp::JpegDecoder decoder;
    for (int k = next++; k < images; k = next++) {
      const auto& f = files[static_cast<std::size_t>(k) % files.size()];
      decoder.decode_full(f.data(), f.size(), "bench");
    }
  };
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  return images / std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace

int main(int argc, char** argv) {
  return workload::run_main("loader_bench", [&] {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    cxxopts::Options options(
        "loader_bench",
        "Runs the data_pipeline loader alone over a Food-101-layout dataset and reports images/s "
        "in total and per worker thread, for the fused ROI + DCT-scaled decode and for a plain "
        "full decode followed by the crop, plus the pure full-decode rate. The loader flags are "
        "train_resnet50's.");
    options.set_width(100);
    std::string data;
    dp::Split split = dp::Split::kTrain;
    dp::LoaderOptions lo;
    lo.workers = static_cast<int>(std::min(8u, hw));
    lo.pin_memory = false;  // the loader alone: no device copies to serve
    int batches = 20;
    int warmup = 2;
    bool json = false;
    // The benchmark's own flags, as a table like train_resnet50's (lib/train_flags.h).
    auto visit = [&](auto&& v) {
      v.text({"data", workload::kDataGroup, "dataset root (holds food-101/ or is it)"}, data);
      v.choice({"split", workload::kDataGroup, "the split to read"}, split);
      workload::visit_loader_flags(lo, v);
      v.integer({"batches", "Benchmark", "timed batches per mode"}, batches, 1, 1000000);
      v.integer({"warmup-batches", "Benchmark", "untimed batches first"}, warmup, 0, 1000000);
      v.boolean({"json", "Benchmark", "print one JSON object instead of the table"}, json);
    };
    visit(workload::DeclareFlags(options));
    options.add_options("Benchmark")("h,help", "print this help");
    const auto result = options.parse(argc, argv);
    if (result.count("help")) {
      std::cout << options.help() << std::endl;
      return 0;
    }
    workload::FlagReader(result).reject_unmatched();
    visit(workload::ReadFlags(result));
    if (data.empty()) throw workload::UsageError("--data: required (the dataset root)");
    if (lo.workers < 1) {
      throw workload::UsageError("--workers: expected >= 1 (threads to time), got " +
                                 std::to_string(lo.workers));
    }
    const int workers = lo.workers;

    auto index =
        std::make_shared<const dp::Food101Index>(dp::Food101Index::load(data, to_string(split)));

    lo.transform.decode_mode = dp::DecodeMode::kFusedRoi;
    const LoaderRun fused = run_loader(index, lo, warmup, batches);
    lo.transform.decode_mode = dp::DecodeMode::kFull;
    const LoaderRun full = run_loader(index, lo, warmup, batches);

    std::vector<std::vector<std::uint8_t>> files;
    const std::int64_t nfiles = std::min<std::int64_t>(index->size(), 512);
    for (std::int64_t i = 0; i < nfiles; ++i) {
      files.emplace_back();
      dp::read_file((*index)[i].path.string(), files.back());
    }
    const int decode_images = static_cast<int>(std::min<std::int64_t>(fused.images, 4096));
    const double decode = decode_only(files, workers, std::max(decode_images, workers * 16));

    nlohmann::ordered_json j;
    j["threads"] = workers;
    j["batch_size"] = lo.batch_size;
    j["batches"] = batches;
    j["image_size"] = lo.transform.image_size;
    j["work_unit"] = dp::to_string(lo.work_unit);
    j["images"] = index->size();
    j["fused_images_per_s"] = fused.images_per_s;
    j["fused_images_per_s_per_thread"] = fused.images_per_s / workers;
    j["full_images_per_s"] = full.images_per_s;
    j["full_images_per_s_per_thread"] = full.images_per_s / workers;
    j["fused_speedup_over_full"] = fused.images_per_s / full.images_per_s;
    j["decode_only_images_per_s"] = decode;
    j["decode_only_images_per_s_per_thread"] = decode / workers;
    j["hardware_threads"] = hw;
    if (json) {
      std::cout << j.dump() << std::endl;
      return 0;
    }
    std::printf("loader_bench: %d worker threads, batch %lld, %d timed batches, %d px, %s unit\n",
                workers, static_cast<long long>(lo.batch_size), batches, lo.transform.image_size,
                dp::to_string(lo.work_unit));
    std::printf("%-34s %12s %16s\n", "path", "images/s", "images/s/thread");
    std::printf("%-34s %12.0f %16.0f\n", "fused ROI + scaled decode + aug", fused.images_per_s,
                fused.images_per_s / workers);
    std::printf("%-34s %12.0f %16.0f\n", "full decode, then crop + aug", full.images_per_s,
                full.images_per_s / workers);
    std::printf("%-34s %12.0f %16.0f\n", "full decode only (in memory)", decode, decode / workers);
    std::printf("fused / full: %.2fx\n", fused.images_per_s / full.images_per_s);
    return 0;
  });
}
