// What loader_bench measures (lib/bench/loader_bench.h).
#include "lib/bench/loader_bench.h"

#include <sys/resource.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <memory>
#include <opencv2/core.hpp>
#include <stdexcept>
#include <thread>
#include <vector>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/data_error.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/sample_reader.h"
#include "data_pipeline/sample_transform.h"
#include "lib/core/build_features.h"
#include "lib/core/usage_error.h"
#include "lib/device/cuda_device.h"

namespace workload::bench {

namespace {

using Clock = std::chrono::steady_clock;
namespace dp = data_pipeline;

// printf into `out`.
void append(std::string& out, const char* fmt, ...) {
  char buf[512];
  va_list args;
  va_start(args, fmt);
  std::vsnprintf(buf, sizeof(buf), fmt, args);
  va_end(args);
  out += buf;
}

// User + system CPU time of the whole process so far, in seconds.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) {
    return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_usec) * 1e-6;
  };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

}  // namespace

LoaderRun time_batches(int batches, const std::function<std::int64_t(bool last)>& take) {
  const double cpu0 = process_cpu_s();
  const auto start = Clock::now();
  std::int64_t images = 0;
  for (int i = 0; i < batches; ++i) images += take(i + 1 == batches);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  LoaderRun r;
  r.images_per_s = static_cast<double>(images) / s;
  r.seconds = s;
  r.images = images;
  r.cpu_us_per_image = (process_cpu_s() - cpu0) * 1e6 / static_cast<double>(images);
  return r;
}

namespace {

// Runs `warmup` + `batches` batches through a loader and times the last `batches`.
LoaderRun run_loader(const std::shared_ptr<const dp::Food101Index>& index,
                     dp::LoaderOptions options, int warmup, int batches) {
  dp::Loader loader(index, options);
  for (int i = 0; i < warmup; ++i) loader.next();
  return time_batches(batches, [&](bool) { return loader.next().size(); });
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
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  return images / std::chrono::duration<double>(Clock::now() - start).count();
}

// The stages of SampleTransform that the breakdown reports, in call order: JSON key, table label
// and the TransformTimes field.
struct Stage {
  const char* key;
  const char* label;
  std::int64_t dp::TransformTimes::*ns;
};
constexpr std::array<Stage, 5> kStages{{
    {"read", "read (file into memory)", &dp::TransformTimes::read_ns},
    {"decode", "decode (entropy + IDCT + colour)", &dp::TransformTimes::decode_ns},
    {"resize", "resize (cv::resize)", &dp::TransformTimes::resize_ns},
    {"write", "flip + normalise + write", &dp::TransformTimes::write_ns},
    {"digest", "digest (hash64 of the sample)", &dp::TransformTimes::digest_ns},
}};
constexpr int kBreakdownRounds = 3;

static_assert(kStages.size() == Breakdown::kStages);

// Times the CPU transform on this thread over up to `images` files spread evenly over `index`,
// each read from the file system on every pass (so `read` is the page-cached read after the
// warm-up pass). Passes with and without TransformTimes alternate, kBreakdownRounds of each, and
// the fastest of each kind is kept, which damps other load on the machine. Every pass draws the
// same augmentations (epoch 0 of `seed`), so both kinds do the same work.
Breakdown cpu_breakdown(const dp::Food101Index& index, const dp::TransformOptions& options,
                        std::uint64_t seed, std::int64_t images, std::uint64_t max_bytes) {
  struct File {
    std::string path;
    std::int64_t dataset_index;
  };
  std::vector<File> files;
  const std::int64_t n = std::min(images, index.size());
  for (std::int64_t k = 0; k < n; ++k) {
    const std::int64_t i = k * index.size() / n;
    files.push_back({index[i].path.string(), i});
  }
  // One core's cost: OpenCV's pool would otherwise spread cv::resize over the others (the Loader
  // sets the same, process-wide, for its workers).
  cv::setNumThreads(1);
  dp::SampleTransform transform(options);
  std::vector<std::uint8_t> dst(transform.sample_bytes());
  auto rng_for = [&](const File& f) {
    return dp::CounterRng(seed, 0, static_cast<std::uint64_t>(f.dataset_index),
                          dp::CounterRng::kAugment);
  };

  Breakdown b;
  std::vector<File> good;
  for (const File& f : files) {  // warm-up: page cache, buffers, and dropping undecodable files
    try {
      auto rng = rng_for(f);
      transform.apply_file(f.path, rng, dst.data(), nullptr, nullptr, max_bytes);
      good.push_back(f);
    } catch (const dp::DataError&) {
      ++b.skipped;
    }
  }
  if (good.empty()) throw std::runtime_error("--breakdown: none of the files could be decoded");
  b.images = static_cast<std::int64_t>(good.size());

  // One pass; returns its wall seconds and, when `sum` is given, adds each call's stage times.
  auto pass = [&](dp::TransformTimes* sum) {
    dp::TransformTimes t;
    const auto start = Clock::now();
    for (const File& f : good) {
      auto rng = rng_for(f);
      if (!sum) {
        transform.apply_file(f.path, rng, dst.data(), nullptr, nullptr, max_bytes);
        continue;
      }
      transform.apply_file(f.path, rng, dst.data(), nullptr, &t, max_bytes);
      for (const Stage& s : kStages) sum->*s.ns += t.*s.ns;
    }
    return std::chrono::duration<double>(Clock::now() - start).count();
  };
  const double per_image_us = 1e6 / static_cast<double>(b.images);
  double best_timed = 0, best_plain = 0;
  dp::TransformTimes best_sum;
  for (int r = 0; r < kBreakdownRounds; ++r) {
    const double plain = pass(nullptr);
    if (r == 0 || plain < best_plain) best_plain = plain;
    dp::TransformTimes sum;
    const double timed = pass(&sum);
    if (r == 0 || timed < best_timed) {
      best_timed = timed;
      best_sum = sum;
    }
  }
  for (std::size_t s = 0; s < kStages.size(); ++s) {
    b.stage_us[s] =
        static_cast<double>(best_sum.*kStages[s].ns) * 1e-3 / static_cast<double>(b.images);
    b.stages_us += b.stage_us[s];
  }
  b.timed_pass_us = best_timed * per_image_us;
  b.plain_pass_us = best_plain * per_image_us;
  return b;
}

nlohmann::ordered_json to_json(const Breakdown& b, const dp::TransformOptions& options) {
  nlohmann::ordered_json j;
  j["threads"] = 1;
  j["images"] = b.images;
  j["skipped"] = b.skipped;
  j["passes"] = kBreakdownRounds;
  j["image_size"] = options.image_size;
  j["dtype"] = common::to_string(options.dtype);
  auto& stages = j["stages"];
  for (std::size_t s = 0; s < kStages.size(); ++s) {
    stages[kStages[s].key] = {{"us_per_image", b.stage_us[s]},
                              {"share", b.stage_us[s] / b.stages_us}};
  }
  j["total_us_per_image"] = b.stages_us;
  j["images_per_s_per_core"] = 1e6 / b.stages_us;
  j["timed_pass_us_per_image"] = b.timed_pass_us;
  j["untimed_pass_us_per_image"] = b.plain_pass_us;
  j["untimed_images_per_s_per_core"] = 1e6 / b.plain_pass_us;
  j["hook_overhead_us_per_image"] = b.timed_pass_us - b.plain_pass_us;
  return j;
}

std::string format(const Breakdown& b, const dp::TransformOptions& options) {
  std::string out;
  append(
      out,
      "\nCPU transform breakdown: 1 thread, %lld images, %d px %s, fused ROI decode, fastest of %d "
      "passes\n",
      static_cast<long long>(b.images), options.image_size, common::to_string(options.dtype),
      kBreakdownRounds);
  if (b.skipped > 0) {
    append(out, "(%lld undecodable files left out)\n", static_cast<long long>(b.skipped));
  }
  append(out, "%-34s %12s %8s\n", "stage", "us/image", "share");
  for (std::size_t s = 0; s < kStages.size(); ++s) {
    append(out, "%-34s %12.1f %7.1f%%\n", kStages[s].label, b.stage_us[s],
           100.0 * b.stage_us[s] / b.stages_us);
  }
  append(out, "%-34s %12.1f %7.1f%%   %.0f images/s/core\n", "total (sum of stages)", b.stages_us,
         100.0, 1e6 / b.stages_us);
  append(out, "%-34s %12.1f %8s   %.0f images/s/core\n", "pass without hooks (wall)",
         b.plain_pass_us, "", 1e6 / b.plain_pass_us);
  append(out, "%-34s %12.1f %8s   hooks' overhead %+.1f us/image (%+.1f%%)\n",
         "pass with hooks (wall)", b.timed_pass_us, "", b.timed_pass_us - b.plain_pass_us,
         100.0 * (b.timed_pass_us - b.plain_pass_us) / b.plain_pass_us);
  return out;
}

}  // namespace

BenchOptions default_bench_options() {
  BenchOptions o;
  o.loader.workers =
      static_cast<int>(std::min(8u, std::max(1u, std::thread::hardware_concurrency())));
  o.loader.pin_memory = false;  // the loader alone: no device copies to serve
  return o;
}

void validate(const BenchOptions& o) {
  visit_bench_flags(o, CheckFlagRanges{});
  if (o.data.empty()) throw UsageError("--data: required (the dataset root)");
  if (o.loader.workers < 1) {
    throw UsageError("--workers: expected >= 1 (threads to time), got " +
                     std::to_string(o.loader.workers));
  }
  if (o.loader.decode == dp::DecodeDevice::kGpu) {
    require_built(Feature::kGpuDecode, "--decode gpu", "GPU decode stage");
    if (!cuda_available()) throw UsageError("--decode gpu: no CUDA device is visible");
  }
}

BenchResults run_bench(const BenchOptions& options) {
  BenchResults r;
  r.options = options;
  r.hardware_threads = std::max(1u, std::thread::hardware_concurrency());
  const dp::LoaderOptions& lo = options.loader;
  auto index = std::make_shared<const dp::Food101Index>(
      dp::Food101Index::load(options.data, to_string(options.split)));
  r.dataset_images = index->size();
  dp::LoaderOptions fused = lo;
  fused.transform.decode_mode = dp::DecodeMode::kFusedRoi;
  if (lo.decode == dp::DecodeDevice::kGpu) {
    r.gpu_stage = run_gpu_stage(index, fused, options.warmup, options.batches, &r.gpu_notice);
  }
  fused.decode = dp::DecodeDevice::kCpu;  // the CPU path beside it
  r.fused = run_loader(index, fused, options.warmup, options.batches);
  dp::LoaderOptions full = fused;
  full.transform.decode_mode = dp::DecodeMode::kFull;
  r.full = run_loader(index, full, options.warmup, options.batches);

  std::vector<std::vector<std::uint8_t>> files;
  const std::int64_t nfiles = std::min<std::int64_t>(index->size(), 512);
  for (std::int64_t i = 0; i < nfiles; ++i) {
    files.emplace_back();
    dp::read_file((*index)[i].path.string(), files.back());
  }
  const int decode_images = static_cast<int>(std::min<std::int64_t>(r.fused.images, 4096));
  r.decode_only_images_per_s =
      decode_only(files, lo.workers, std::max(decode_images, lo.workers * 16));
  if (options.breakdown) {
    r.breakdown = cpu_breakdown(*index, fused.transform, lo.seed, options.breakdown_images,
                                static_cast<std::uint64_t>(lo.max_image_mb) << 20);
  }
  return r;
}

nlohmann::ordered_json bench_json(const BenchResults& r) {
  const dp::LoaderOptions& lo = r.options.loader;
  const int workers = lo.workers;
  nlohmann::ordered_json j;
  j["threads"] = workers;
  j["batch_size"] = lo.batch_size;
  j["batches"] = r.options.batches;
  j["image_size"] = lo.transform.image_size;
  j["work_unit"] = common::to_string(lo.work_unit);
  j["images"] = r.dataset_images;
  j["fused_images_per_s"] = r.fused.images_per_s;
  j["fused_images_per_s_per_thread"] = r.fused.images_per_s / workers;
  j["full_images_per_s"] = r.full.images_per_s;
  j["full_images_per_s_per_thread"] = r.full.images_per_s / workers;
  j["fused_speedup_over_full"] = r.fused.images_per_s / r.full.images_per_s;
  j["fused_cpu_us_per_image"] = r.fused.cpu_us_per_image;
  if (r.gpu_stage) {
    const LoaderRun& staged = *r.gpu_stage;
    auto& g = j["gpu_decode"];
    g["images_per_s"] = staged.images_per_s;
    g["cpu_us_per_image"] = staged.cpu_us_per_image;
    g["cpu_time_vs_cpu_path"] = staged.cpu_us_per_image / r.fused.cpu_us_per_image;
    g["hardware_images"] = staged.hardware_images;
    g["fallback_images"] = staged.fallback_images;
    g["fallback_share"] = static_cast<double>(staged.fallback_images) /
                          static_cast<double>(staged.hardware_images + staged.fallback_images);
    g["notice"] = r.gpu_notice;
  }
  j["decode_only_images_per_s"] = r.decode_only_images_per_s;
  j["decode_only_images_per_s_per_thread"] = r.decode_only_images_per_s / workers;
  j["hardware_threads"] = r.hardware_threads;
  if (r.breakdown) {
    dp::TransformOptions fused = lo.transform;
    fused.decode_mode = dp::DecodeMode::kFusedRoi;
    j["cpu_breakdown"] = to_json(*r.breakdown, fused);
  }
  return j;
}

std::string format_bench(const BenchResults& r) {
  const dp::LoaderOptions& lo = r.options.loader;
  const int workers = lo.workers;
  std::string out;
  append(out, "loader_bench: %d worker threads, batch %lld, %d timed batches, %d px, %s unit\n",
         workers, static_cast<long long>(lo.batch_size), r.options.batches, lo.transform.image_size,
         common::to_string(lo.work_unit));
  append(out, "%-34s %12s %16s %14s\n", "path", "images/s", "images/s/thread", "CPU us/image");
  if (r.gpu_stage) {
    append(out, "%-34s %12.0f %16.0f %14.1f\n", "GPU stage (nvJPEG engines + kernel)",
           r.gpu_stage->images_per_s, r.gpu_stage->images_per_s / workers,
           r.gpu_stage->cpu_us_per_image);
  }
  append(out, "%-34s %12.0f %16.0f %14.1f\n", "fused ROI + scaled decode + aug",
         r.fused.images_per_s, r.fused.images_per_s / workers, r.fused.cpu_us_per_image);
  append(out, "%-34s %12.0f %16.0f\n", "full decode, then crop + aug", r.full.images_per_s,
         r.full.images_per_s / workers);
  append(out, "%-34s %12.0f %16.0f\n", "full decode only (in memory)", r.decode_only_images_per_s,
         r.decode_only_images_per_s / workers);
  append(out, "fused / full: %.2fx\n", r.fused.images_per_s / r.full.images_per_s);
  if (r.gpu_stage) {
    const LoaderRun& staged = *r.gpu_stage;
    const std::int64_t total = staged.hardware_images + staged.fallback_images;
    append(out,
           "GPU stage: %lld of %lld images on the engines (%.1f%% fell back to the CPU path), "
           "host CPU per image %.2fx the CPU path's%s%s\n",
           static_cast<long long>(staged.hardware_images), static_cast<long long>(total),
           total ? 100.0 * static_cast<double>(staged.fallback_images) / static_cast<double>(total)
                 : 0.0,
           staged.cpu_us_per_image / r.fused.cpu_us_per_image, r.gpu_notice.empty() ? "" : "; ",
           r.gpu_notice.c_str());
  }
  if (r.breakdown) {
    dp::TransformOptions fused = lo.transform;
    fused.decode_mode = dp::DecodeMode::kFusedRoi;
    out += format(*r.breakdown, fused);
  }
  return out;
}

}  // namespace workload::bench
