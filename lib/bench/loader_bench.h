// What loader_bench measures: the loader alone (fused ROI decode and full decode), the pure decode,
// the GPU decode stage, and the CPU transform's stages; the results as JSON and as a table.
#pragma once

#include <nlohmann/json.hpp>

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "data_pipeline/food101_index.h"
#include "data_pipeline/loader_options.h"
#include "lib/config/train_flags.h"

namespace workload::bench {

/// loader_bench's settings; the loader's flags are train_resnet50's (visit_loader_flags).
struct BenchOptions {
  std::string data;
  data_pipeline::Split split = data_pipeline::Split::kTrain;
  data_pipeline::LoaderOptions loader;
  int batches = 20;
  int warmup = 2;
  bool json = false;
  bool breakdown = false;
  std::int64_t breakdown_images = 512;
};

/// loader_bench's flag table, as train_resnet50's (lib/config/train_flags.h).
template <typename O, typename V>
void visit_bench_flags(O& o, V&& v) {
  v.text({"data", kDataGroup, "dataset root (holds food-101/ or is it)"}, o.data);
  v.choice({"split", kDataGroup, "the split to read"}, o.split);
  visit_loader_flags(o.loader, v);
  v.integer({"batches", "Benchmark", "timed batches per mode"}, o.batches, 1, 1000000);
  v.integer({"warmup-batches", "Benchmark", "untimed batches first"}, o.warmup, 0, 1000000);
  v.boolean({"json", "Benchmark", "print one JSON object instead of the table"}, o.json);
  v.boolean({"breakdown", "Benchmark",
             "also time each stage of the CPU transform (read, decode, resize, write, digest) on "
             "one thread"},
            o.breakdown);
  v.integer(
      {"breakdown-images", "Benchmark", "files per --breakdown pass, spread evenly over the split"},
      o.breakdown_images, 1, 100000000);
}

/// The defaults on this machine: min(8, hardware threads) workers, no pinning (no device copies to
/// serve).
BenchOptions default_bench_options();

/// Checks what the flags' ranges cannot. \throws UsageError naming the flag.
void validate(const BenchOptions& options);

/// One timed mode: images/s and the whole process's CPU time per image.
struct LoaderRun {
  double images_per_s = 0;
  double seconds = 0;
  std::int64_t images = 0;
  double cpu_us_per_image = 0;
  std::int64_t hardware_images = 0;  ///< --decode gpu only
  std::int64_t fallback_images = 0;
};

/// --breakdown: the CPU transform's stages on one thread, microseconds per image.
struct Breakdown {
  static constexpr std::size_t kStages = 5;  ///< read, decode, resize, write, digest
  std::int64_t images = 0;                   ///< timed in each pass
  std::int64_t skipped = 0;                  ///< files the warm-up pass could not decode
  std::array<double, kStages> stage_us{};    ///< means over the fastest pass with hooks
  double stages_us = 0;                      ///< their sum
  double timed_pass_us = 0;                  ///< wall time of that pass, hooks on
  double plain_pass_us = 0;                  ///< wall time of the fastest pass without hooks
};

/// Everything one loader_bench run measured.
struct BenchResults {
  BenchOptions options;
  std::int64_t dataset_images = 0;
  unsigned hardware_threads = 0;
  std::optional<LoaderRun> gpu_stage;  ///< --decode gpu
  std::string gpu_notice;
  LoaderRun fused;  ///< the loader with the fused ROI decode
  LoaderRun full;   ///< the loader with a full decode, then the crop
  double decode_only_images_per_s = 0;
  std::optional<Breakdown> breakdown;  ///< --breakdown
};

/// Runs every measurement `options` asks for. \throws DataError naming a file; UsageError for
/// --decode gpu where this build or machine cannot.
BenchResults run_bench(const BenchOptions& options);

/// The results as loader_bench --json prints them, and as its table.
nlohmann::ordered_json bench_json(const BenchResults& results);
std::string format_bench(const BenchResults& results);

/// Times `batches` calls of `take(last)`, each returning the images of one batch (`last` is true
/// for the final one): wall time and the whole process's CPU time per image.
LoaderRun time_batches(int batches, const std::function<std::int64_t(bool last)>& take);

/// The GPU decode stage alone (lib/bench/gpu_stage_bench.cpp, the one file that compiles against
/// it): batches decoded on the device, each released as soon as it is ready; the clock stops when
/// the last timed batch is on the device. `notice`: the stage's notice.
/// \throws UsageError in a build without the stage.
LoaderRun run_gpu_stage(const std::shared_ptr<const data_pipeline::Food101Index>& index,
                        data_pipeline::LoaderOptions options, int warmup, int batches,
                        std::string* notice);

}  // namespace workload::bench
