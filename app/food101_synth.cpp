// food101_synth: writes a synthetic Food-101-layout dataset of real JPEG files.
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <thread>

#include "data_pipeline/synthetic/synthetic_food.h"
#include "lib/config/flag_table.h"
#include "lib/core/exit_status.h"

int main(int argc, char** argv) {
  return workload::run_main("food101_synth", [&] {
    cxxopts::Options options("food101_synth",
                             "Writes a synthetic dataset in the Food-101 layout "
                             "(<out>/food-101/{images,meta}) of real JPEG files whose sizes and "
                             "decode cost resemble food photos. Deterministic for a seed.");
    // clang-format off
    options.add_options()
        ("out", "output root (food-101/ is created inside)", cxxopts::value<std::string>())
        ("classes", "number of classes", cxxopts::value<std::string>()->default_value("101"))
        ("per-class", "images per class", cxxopts::value<std::string>()->default_value("100"))
        ("seed", "random seed", cxxopts::value<std::string>()->default_value("2026"))
        ("quality", "JPEG quality (1-100)", cxxopts::value<std::string>()->default_value("85"))
        ("test-fraction", "share of each class listed in meta/test.txt",
         cxxopts::value<std::string>()->default_value("0.25"))
        ("threads", "encoder threads (0 = all hardware threads)",
         cxxopts::value<std::string>()->default_value("0"))
        ("class-signal",
         "0..1: how strongly an image shows its class (ellipses pulled toward the class's tint); "
         "0 writes the default bytes",
         cxxopts::value<std::string>()->default_value("0"))
        ("h,help", "print this help",
         workload::request_value());
    // clang-format on
    const auto result = workload::parse_command_line(options, argc, argv);
    if (workload::given_boolean(result, "help")) {
      std::cout << options.help() << std::endl;
      return 0;
    }
    workload::FlagReader flags(result);
    flags.reject_unmatched();
    if (!flags.has("out")) throw workload::UsageError("--out: required (the output directory)");
    // A new dataset only: writing over a food-101/ would mix two (its old images left behind), or
    // overwrite a real one's lists.
    const std::string out = flags.string("out");
    if (out.empty()) throw workload::UsageError("--out: expected a directory path, got ''");
    namespace fs = std::filesystem;
    std::error_code ec;
    if (fs::exists(out, ec) && !fs::is_directory(out, ec)) {
      throw workload::UsageError("--out " + out + ": not a directory");
    }
    // Made here, so a path that cannot be a directory (a file on the way, no permission) is named
    // as the flag rather than as a file deep inside the dataset.
    if (fs::create_directories(out, ec); ec) {
      throw workload::UsageError("--out " + out + ": cannot create the directory: " + ec.message());
    }
    const fs::path dataset = fs::path(out) / "food-101";
    if (fs::exists(fs::symlink_status(dataset, ec))) {
      throw workload::UsageError("--out " + out + ": " + dataset.string() +
                                 " exists; food101_synth writes a new dataset and replaces none "
                                 "(delete it, or give another --out)");
    }
    data_pipeline::SyntheticFoodOptions opt;
    opt.classes = static_cast<int>(flags.integer("classes", 1, 100000));
    opt.per_class = static_cast<int>(flags.integer("per-class", 1, 1000000));
    opt.seed = flags.unsigned_integer("seed");
    opt.quality = static_cast<int>(flags.integer("quality", 1, 100));
    opt.test_fraction = flags.real("test-fraction", 0.0, 0.99);
    opt.threads = static_cast<int>(flags.integer("threads", 0, 4096));
    opt.class_signal = flags.real("class-signal", 0.0, 1.0);
    const auto summary = data_pipeline::write_synthetic_food101(out, opt);
    std::printf("food101_synth: wrote %lld images (%lld train, %lld test) to %s, mean %.1f KiB\n",
                static_cast<long long>(summary.images),
                static_cast<long long>(summary.train_images),
                static_cast<long long>(summary.test_images), summary.dataset_dir.c_str(),
                summary.images ? static_cast<double>(summary.total_bytes) / 1024.0 /
                                     static_cast<double>(summary.images)
                               : 0.0);
    return 0;
  });
}
