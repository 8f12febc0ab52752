// loader_bench: images/s of the loader alone, fused ROI decode vs full decode, and pure decode.
#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <iostream>
#include <memory>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

#include <sys/resource.h>

#include "data_pipeline/data_error.h"
#include "data_pipeline/food101_index.h"
#include "data_pipeline/jpeg_decoder.h"
#include "data_pipeline/loader.h"
#include "data_pipeline/sample_transform.h"
#include "lib/cli.h"
#include "lib/cuda_device.h"
#include "lib/train_flags.h"

#if defined(WORKLOAD_HAVE_NVJPEG)
#include <cuda_runtime_api.h>

#include "data_pipeline/gpu/gpu_decoder.h"
#endif

namespace {

using Clock = std::chrono::steady_clock;
namespace dp = data_pipeline;

struct LoaderRun {
  double images_per_s = 0;
  double seconds = 0;
  std::int64_t images = 0;
  double cpu_us_per_image = 0;  // host CPU time of the whole process (getrusage) per timed image
  // --decode gpu only:
  std::int64_t hardware_images = 0;
  std::int64_t fallback_images = 0;
};

// User + system CPU time of the whole process so far, in seconds.
double process_cpu_s() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  auto sec = [](const timeval& t) { return static_cast<double>(t.tv_sec) + t.tv_usec * 1e-6; };
  return sec(u.ru_utime) + sec(u.ru_stime);
}

// Times `batches` calls of `take(last)`, each returning the images of one batch (`last` is true for
// the final one): wall time and the whole process's CPU time per image.
template <typename Take>
LoaderRun time_batches(int batches, Take&& take) {
  const double cpu0 = process_cpu_s();
  const auto start = Clock::now();
  std::int64_t images = 0;
  for (int i = 0; i < batches; ++i) images += take(i + 1 == batches);
  const double s = std::chrono::duration<double>(Clock::now() - start).count();
  LoaderRun r;
  r.images_per_s = images / s;
  r.seconds = s;
  r.images = images;
  r.cpu_us_per_image = (process_cpu_s() - cpu0) * 1e6 / static_cast<double>(images);
  return r;
}

// Runs `warmup` + `batches` batches through a loader and times the last `batches`.
LoaderRun run_loader(const std::shared_ptr<const dp::Food101Index>& index,
                     dp::LoaderOptions options, int warmup, int batches) {
  dp::Loader loader(index, options);
  for (int i = 0; i < warmup; ++i) loader.next();
  return time_batches(batches, [&](bool) { return loader.next().size(); });
}

#if defined(WORKLOAD_HAVE_NVJPEG)
// The GPU decode stage alone (--decode gpu): batches decoded on the device, each released as soon
// as it is ready; the clock stops when the last timed batch is on the device.
LoaderRun run_gpu_stage(const std::shared_ptr<const dp::Food101Index>& index,
                        dp::LoaderOptions options, int warmup, int batches,
                        dp::gpu::GpuDecodeInfo* info) {
  options.decode = dp::DecodeDevice::kGpu;
  dp::gpu::GpuDecoder stage(index, options);
  *info = stage.info();
  for (int i = 0; i < warmup; ++i) {
    dp::gpu::DeviceBatch b = stage.next();
    cudaEventSynchronize(b.ready());
  }
  const dp::gpu::GpuDecodeStats before = stage.stats();
  LoaderRun r = time_batches(batches, [&](bool last) {
    dp::gpu::DeviceBatch b = stage.next();
    if (last && cudaEventSynchronize(b.ready()) != cudaSuccess) {
      throw std::runtime_error("GPU decode stage: the last batch failed on the device");
    }
    return b.size();
  });
  const dp::gpu::GpuDecodeStats after = stage.stats();
  r.hardware_images = after.hardware_images - before.hardware_images;
  r.fallback_images = after.fallback_images - before.fallback_images;
  return r;
}
#endif

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

// What cpu_breakdown measured; times are microseconds per image.
struct Breakdown {
  std::int64_t images = 0;                        // timed in each pass
  std::int64_t skipped = 0;                       // files the warm-up pass could not decode
  std::array<double, kStages.size()> stage_us{};  // means over the fastest pass with hooks
  double stages_us = 0;                           // their sum
  double timed_pass_us = 0;                       // wall time of that pass, hooks on
  double plain_pass_us = 0;                       // wall time of the fastest pass without hooks
};

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
    b.stage_us[s] = static_cast<double>(best_sum.*kStages[s].ns) * 1e-3 / b.images;
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
  j["dtype"] = dp::to_string(options.dtype);
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

void print(const Breakdown& b, const dp::TransformOptions& options) {
  std::printf(
      "\nCPU transform breakdown: 1 thread, %lld images, %d px %s, fused ROI decode, fastest of %d "
      "passes\n",
      static_cast<long long>(b.images), options.image_size, dp::to_string(options.dtype),
      kBreakdownRounds);
  if (b.skipped > 0) {
    std::printf("(%lld undecodable files left out)\n", static_cast<long long>(b.skipped));
  }
  std::printf("%-34s %12s %8s\n", "stage", "us/image", "share");
  for (std::size_t s = 0; s < kStages.size(); ++s) {
    std::printf("%-34s %12.1f %7.1f%%\n", kStages[s].label, b.stage_us[s],
                100.0 * b.stage_us[s] / b.stages_us);
  }
  std::printf("%-34s %12.1f %7.1f%%   %.0f images/s/core\n", "total (sum of stages)", b.stages_us,
              100.0, 1e6 / b.stages_us);
  std::printf("%-34s %12.1f %8s   %.0f images/s/core\n", "pass without hooks (wall)",
              b.plain_pass_us, "", 1e6 / b.plain_pass_us);
  std::printf("%-34s %12.1f %8s   hooks' overhead %+.1f us/image (%+.1f%%)\n",
              "pass with hooks (wall)", b.timed_pass_us, "", b.timed_pass_us - b.plain_pass_us,
              100.0 * (b.timed_pass_us - b.plain_pass_us) / b.plain_pass_us);
}

}  // namespace

int main(int argc, char** argv) {
  return workload::run_main("loader_bench", [&] {
    const unsigned hw = std::max(1u, std::thread::hardware_concurrency());
    cxxopts::Options options(
        "loader_bench",
        "Runs the data_pipeline loader alone over a Food-101-layout dataset and reports images/s "
        "in total and per worker thread, for the fused ROI + DCT-scaled decode and for a plain "
        "full decode followed by the crop, plus the pure full-decode rate, with the process's host "
        "CPU time per image. With --decode gpu, the GPU decode stage first (images/s on the "
        "device, "
        "host CPU per image, share of images that fell back to the CPU path). The loader flags are "
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
    bool breakdown = false;
    std::int64_t breakdown_images = 512;
    // The benchmark's own flags, as a table like train_resnet50's (lib/train_flags.h).
    auto visit = [&](auto&& v) {
      v.text({"data", workload::kDataGroup, "dataset root (holds food-101/ or is it)"}, data);
      v.choice({"split", workload::kDataGroup, "the split to read"}, split);
      workload::visit_loader_flags(lo, v);
      v.integer({"batches", "Benchmark", "timed batches per mode"}, batches, 1, 1000000);
      v.integer({"warmup-batches", "Benchmark", "untimed batches first"}, warmup, 0, 1000000);
      v.boolean({"json", "Benchmark", "print one JSON object instead of the table"}, json);
      v.boolean({"breakdown", "Benchmark",
                 "also time each stage of the CPU transform (read, decode, resize, write, "
                 "digest) on one thread"},
                breakdown);
      v.integer({"breakdown-images", "Benchmark",
                 "files per --breakdown pass, spread evenly over the split"},
                breakdown_images, 1, 100000000);
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
    const bool gpu = lo.decode == dp::DecodeDevice::kGpu;
    if (gpu) {
#if !defined(WORKLOAD_HAVE_NVJPEG)
      throw workload::UsageError(
          "--decode gpu: this build has no GPU decode stage (CUDA LibTorch, nvJPEG and nvcc are "
          "needed)");
#endif
      if (!workload::cuda_available()) {
        throw workload::UsageError("--decode gpu: no CUDA device is visible");
      }
    }

    auto index =
        std::make_shared<const dp::Food101Index>(dp::Food101Index::load(data, to_string(split)));

    lo.transform.decode_mode = dp::DecodeMode::kFusedRoi;
    LoaderRun staged;
    std::string gpu_notice;
#if defined(WORKLOAD_HAVE_NVJPEG)
    dp::gpu::GpuDecodeInfo gpu_info;
    if (gpu) {
      staged = run_gpu_stage(index, lo, warmup, batches, &gpu_info);
      gpu_notice = gpu_info.notice;
    }
#endif
    dp::LoaderOptions cpu_lo = lo;
    cpu_lo.decode = dp::DecodeDevice::kCpu;  // the CPU path beside it
    const LoaderRun fused = run_loader(index, cpu_lo, warmup, batches);
    lo.transform.decode_mode = dp::DecodeMode::kFull;
    cpu_lo.transform.decode_mode = dp::DecodeMode::kFull;
    const LoaderRun full = run_loader(index, cpu_lo, warmup, batches);

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
    j["fused_cpu_us_per_image"] = fused.cpu_us_per_image;
    if (gpu) {
      auto& g = j["gpu_decode"];
      g["images_per_s"] = staged.images_per_s;
      g["cpu_us_per_image"] = staged.cpu_us_per_image;
      g["cpu_time_vs_cpu_path"] = staged.cpu_us_per_image / fused.cpu_us_per_image;
      g["hardware_images"] = staged.hardware_images;
      g["fallback_images"] = staged.fallback_images;
      g["fallback_share"] = static_cast<double>(staged.fallback_images) /
                            static_cast<double>(staged.hardware_images + staged.fallback_images);
      g["notice"] = gpu_notice;
    }
    j["decode_only_images_per_s"] = decode;
    j["decode_only_images_per_s_per_thread"] = decode / workers;
    j["hardware_threads"] = hw;
    Breakdown cpu;
    dp::TransformOptions cpu_options = lo.transform;
    cpu_options.decode_mode = dp::DecodeMode::kFusedRoi;
    if (breakdown) {
      cpu = cpu_breakdown(*index, cpu_options, lo.seed, breakdown_images,
                          static_cast<std::uint64_t>(lo.max_image_mb) << 20);
      j["cpu_breakdown"] = to_json(cpu, cpu_options);
    }
    if (json) {
      std::cout << j.dump() << std::endl;
      return 0;
    }
    std::printf("loader_bench: %d worker threads, batch %lld, %d timed batches, %d px, %s unit\n",
                workers, static_cast<long long>(lo.batch_size), batches, lo.transform.image_size,
                dp::to_string(lo.work_unit));
    std::printf("%-34s %12s %16s %14s\n", "path", "images/s", "images/s/thread", "CPU us/image");
    if (gpu) {
      std::printf("%-34s %12.0f %16.0f %14.1f\n", "GPU stage (nvJPEG engines + kernel)",
                  staged.images_per_s, staged.images_per_s / workers, staged.cpu_us_per_image);
    }
    std::printf("%-34s %12.0f %16.0f %14.1f\n", "fused ROI + scaled decode + aug",
                fused.images_per_s, fused.images_per_s / workers, fused.cpu_us_per_image);
    std::printf("%-34s %12.0f %16.0f\n", "full decode, then crop + aug", full.images_per_s,
                full.images_per_s / workers);
    std::printf("%-34s %12.0f %16.0f\n", "full decode only (in memory)", decode, decode / workers);
    std::printf("fused / full: %.2fx\n", fused.images_per_s / full.images_per_s);
    if (gpu) {
      const std::int64_t total = staged.hardware_images + staged.fallback_images;
      std::printf(
          "GPU stage: %lld of %lld images on the engines (%.1f%% fell back to the CPU path), "
          "host CPU per image %.2fx the CPU path's%s%s\n",
          static_cast<long long>(staged.hardware_images), static_cast<long long>(total),
          total ? 100.0 * static_cast<double>(staged.fallback_images) / total : 0.0,
          staged.cpu_us_per_image / fused.cpu_us_per_image, gpu_notice.empty() ? "" : "; ",
          gpu_notice.c_str());
    }
    if (breakdown) print(cpu, cpu_options);
    return 0;
  });
}
