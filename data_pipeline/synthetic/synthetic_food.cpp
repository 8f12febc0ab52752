// A synthetic dataset in the Food-101 layout: real JPEG files that decode like food photos.
#include "data_pipeline/synthetic/synthetic_food.h"

#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <opencv2/imgproc.hpp>
#include <stdexcept>
#include <system_error>
#include <thread>

#include "data_pipeline/counter_rng.h"
#include "data_pipeline/synthetic/jpeg_encoder.h"

namespace data_pipeline {
namespace fs = std::filesystem;

namespace {

// The real Food-101 class list (meta/classes.txt), so that synthetic paths look like real ones.
// clang-format off
const char* const kFood101Classes[101] = {
    "apple_pie", "baby_back_ribs", "baklava", "beef_carpaccio", "beef_tartare", "beet_salad",
    "beignets", "bibimbap", "bread_pudding", "breakfast_burrito", "bruschetta", "caesar_salad",
    "cannoli", "caprese_salad", "carrot_cake", "ceviche", "cheese_plate", "cheesecake",
    "chicken_curry", "chicken_quesadilla", "chicken_wings", "chocolate_cake", "chocolate_mousse",
    "churros", "clam_chowder", "club_sandwich", "crab_cakes", "creme_brulee", "croque_madame",
    "cup_cakes", "deviled_eggs", "donuts", "dumplings", "edamame", "eggs_benedict", "escargots",
    "falafel", "filet_mignon", "fish_and_chips", "foie_gras", "french_fries",
    "french_onion_soup", "french_toast", "fried_calamari", "fried_rice", "frozen_yogurt",
    "garlic_bread", "gnocchi", "greek_salad", "grilled_cheese_sandwich", "grilled_salmon",
    "guacamole", "gyoza", "hamburger", "hot_and_sour_soup", "hot_dog", "huevos_rancheros",
    "hummus", "ice_cream", "lasagna", "lobster_bisque", "lobster_roll_sandwich",
    "macaroni_and_cheese", "macarons", "miso_soup", "mussels", "nachos", "omelette", "onion_rings",
    "oysters", "pad_thai", "paella", "pancakes", "panna_cotta", "peking_duck", "pho", "pizza",
    "pork_chop", "poutine", "prime_rib", "pulled_pork_sandwich", "ramen", "ravioli",
    "red_velvet_cake", "risotto", "samosa", "sashimi", "scallops", "seaweed_salad",
    "shrimp_and_grits", "spaghetti_bolognese", "spaghetti_carbonara", "spring_rolls", "steak",
    "strawberry_shortcake", "sushi", "tacos", "takoyaki", "tiramisu", "tuna_tartare", "waffles"};
// clang-format on

std::string title_case(const std::string& name) {
  std::string out = name;
  bool start = true;
  for (char& ch : out) {
    if (ch == '_') {
      ch = ' ';
      start = true;
    } else {
      if (start && ch >= 'a' && ch <= 'z') ch = static_cast<char>(ch - 'a' + 'A');
      start = false;
    }
  }
  return out;
}

void write_text(const fs::path& file, const std::string& text) {
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  if (!out) throw std::runtime_error(file.string() + ": cannot open for writing");
  out << text;
  if (!out.flush()) throw std::runtime_error(file.string() + ": write failed");
}

}  // namespace

std::vector<std::string> synthetic_class_names(int classes) {
  std::vector<std::string> names;
  for (int c = 0; c < classes; ++c) {
    if (c < 101) {
      names.emplace_back(kFood101Classes[c]);
    } else {
      char buf[32];
      std::snprintf(buf, sizeof(buf), "class_%03d", c);
      names.emplace_back(buf);
    }
  }
  return names;
}

namespace {

// Filled ellipses give the edges and flat regions of plated food; with a class signal their
// colours lean to the class's tint.
void add_blobs(cv::Mat& img, CounterRng& rng, double class_signal, const float (&tint)[3]) {
  const int blobs = 8 + static_cast<int>(rng.below(13));
  for (int i = 0; i < blobs; ++i) {
    // The draws in the order GCC evaluated the constructors' arguments (right to left), written
    // out so that the bytes do not depend on the compiler.
    const auto cy = rng.below(static_cast<std::uint64_t>(img.rows));
    const auto cx = rng.below(static_cast<std::uint64_t>(img.cols));
    const auto ay = rng.below(111);
    const auto ax = rng.below(111);
    const double c2 = rng.uniform(0, 255), c1 = rng.uniform(0, 255), c0 = rng.uniform(0, 255);
    const cv::Point centre(static_cast<int>(cx), static_cast<int>(cy));
    const cv::Size axes(10 + static_cast<int>(ax), 10 + static_cast<int>(ay));
    cv::Scalar colour(c0, c1, c2);
    if (class_signal > 0) {
      for (int ch = 0; ch < 3; ++ch) {
        colour[ch] = (1.0 - class_signal) * colour[ch] + class_signal * tint[ch];
      }
    }
    cv::ellipse(img, centre, axes, rng.uniform(0, 180), 0, 360, colour, cv::FILLED, cv::LINE_AA);
  }
}

// Mild noise (sum of four uniforms: close to Gaussian, sigma about 6 grey levels), rounded to
// 8-bit.
cv::Mat with_noise(const cv::Mat& img, CounterRng& rng) {
  cv::Mat out(img.rows, img.cols, CV_8UC3);
  for (int y = 0; y < img.rows; ++y) {
    const auto* src = img.ptr<float>(y);
    auto* dst = out.ptr<std::uint8_t>(y);
    for (int x = 0; x < img.cols * 3; ++x) {
      const double u1 = rng.uniform(), u2 = rng.uniform(), u3 = rng.uniform();
      const double u = u1 + u2 + u3 + rng.uniform() - 2.0;
      const double v = src[x] + u * 10.4;  // var of the sum is 1/3: 10.4 / sqrt(3) = 6
      dst[x] = static_cast<std::uint8_t>(v < 0 ? 0 : (v > 255 ? 255 : std::lround(v)));
    }
  }
  return out;
}

}  // namespace

cv::Mat make_synthetic_food_image(std::uint64_t seed, int class_index, int item,
                                  double class_signal) {
  CounterRng rng(seed, static_cast<std::uint64_t>(class_index), static_cast<std::uint64_t>(item),
                 CounterRng::kSynthetic);
  int w = 512, h = 512;
  if (rng.bernoulli(0.6)) {
    h = 340 + static_cast<int>(rng.below(173));
  } else {
    w = 340 + static_cast<int>(rng.below(173));
  }
  CounterRng tint_rng(seed, static_cast<std::uint64_t>(class_index), 0, CounterRng::kSynthetic);
  float tint[3];
  for (int ch = 0; ch < 3; ++ch) tint[ch] = static_cast<float>(tint_rng.uniform(90.0, 170.0));
  // class_signal 0 keeps the original arithmetic exactly (the default's bytes).
  const float swing = class_signal > 0 ? static_cast<float>(60.0 * (1.0 - class_signal)) : 60.0f;
  // Smooth colour field: per channel a separable product of a sine along x and a cosine along y,
  // around the class's tint. In this function, not a helper of its own: GCC 12 rounds one of
  // 15 images' pixels otherwise (measured), and the data set's bytes must stay the same.
  cv::Mat img(h, w, CV_32FC3);
  std::vector<float> fx(static_cast<std::size_t>(w)), fy(static_cast<std::size_t>(h));
  for (int ch = 0; ch < 3; ++ch) {
    const double a = rng.uniform(0.005, 0.03), b = rng.uniform(0.005, 0.03);
    const double phase = rng.uniform(0.0, 0.3);
    for (int x = 0; x < w; ++x) {
      fx[static_cast<std::size_t>(x)] = static_cast<float>(std::sin(a * x + phase * 10));
    }
    for (int y = 0; y < h; ++y) {
      fy[static_cast<std::size_t>(y)] = static_cast<float>(std::cos(b * y + ch));
    }
    for (int y = 0; y < h; ++y) {
      auto* row = img.ptr<cv::Vec3f>(y);
      for (int x = 0; x < w; ++x) {
        row[x][ch] =
            tint[ch] + swing * fx[static_cast<std::size_t>(x)] * fy[static_cast<std::size_t>(y)];
      }
    }
  }
  add_blobs(img, rng, class_signal, tint);
  cv::GaussianBlur(img, img, cv::Size(0, 0), 2.0);
  return with_noise(img, rng);
}

namespace {

void check_options(const SyntheticFoodOptions& options) {
  if (options.classes < 1) throw std::invalid_argument("classes must be >= 1");
  if (options.per_class < 1) throw std::invalid_argument("per_class must be >= 1");
  if (options.quality < 1 || options.quality > 100) {
    throw std::invalid_argument("quality must be in [1, 100]");
  }
  if (options.test_fraction < 0.0 || options.test_fraction >= 1.0) {
    throw std::invalid_argument("test_fraction must be in [0, 1)");
  }
  if (!(options.class_signal >= 0 && options.class_signal <= 1)) {
    throw std::invalid_argument("class_signal must be in [0, 1]");
  }
}

void make_directory(const fs::path& dir) {
  std::error_code ec;
  fs::create_directories(dir, ec);
  if (ec) throw std::runtime_error(dir.string() + ": cannot create: " + ec.message());
}

// Image ids like Food-101's: numeric, unique within the dataset.
std::string id_of(int c, int j) { return std::to_string(100000 + c * 10000 + j); }

// Encodes and writes every image, options.threads at once (0: the cores); returns the JPEG bytes.
// The first failure ends the work and is rethrown.
std::int64_t write_images(const fs::path& images, const std::vector<std::string>& names,
                          const SyntheticFoodOptions& options) {
  const std::int64_t total = static_cast<std::int64_t>(options.classes) * options.per_class;
  std::atomic<std::int64_t> next{0};
  std::atomic<std::int64_t> bytes{0};
  std::mutex error_mu;
  std::exception_ptr error;
  auto work = [&] {
    JpegEncodeOptions enc;
    enc.quality = options.quality;
    for (std::int64_t k = next++; k < total; k = next++) {
      {
        std::lock_guard<std::mutex> lock(error_mu);
        if (error) return;
      }
      const int c = static_cast<int>(k / options.per_class);
      const int j = static_cast<int>(k % options.per_class);
      try {
        const cv::Mat rgb = make_synthetic_food_image(options.seed, c, j, options.class_signal);
        const auto jpeg = encode_jpeg(rgb.data, rgb.cols, rgb.rows, 3, rgb.step[0], enc);
        const fs::path file = images / names[static_cast<std::size_t>(c)] / (id_of(c, j) + ".jpg");
        std::ofstream f(file, std::ios::binary | std::ios::trunc);
        f.write(reinterpret_cast<const char*>(jpeg.data()),
                static_cast<std::streamsize>(jpeg.size()));
        if (!f.flush()) throw std::runtime_error(file.string() + ": write failed");
        bytes += static_cast<std::int64_t>(jpeg.size());
      } catch (...) {
        std::lock_guard<std::mutex> lock(error_mu);
        if (!error) error = std::current_exception();
        return;
      }
    }
  };
  int threads =
      options.threads > 0 ? options.threads : static_cast<int>(std::thread::hardware_concurrency());
  threads = std::max(1, threads);
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads; ++t) pool.emplace_back(work);
  for (auto& t : pool) t.join();
  if (error) std::rethrow_exception(error);
  return bytes.load();
}

// meta/: the classes, their labels, and each split as text and JSON (the first test_fraction of
// each class's images are its test images). Counts the splits' images into summary.
void write_meta(const fs::path& meta, const std::vector<std::string>& names,
                const SyntheticFoodOptions& options, SyntheticFoodSummary& summary) {
  const int per_test = static_cast<int>(options.per_class * options.test_fraction);
  std::string classes_txt, labels_txt, train_txt, test_txt;
  nlohmann::ordered_json train_json = nlohmann::ordered_json::object();
  nlohmann::ordered_json test_json = nlohmann::ordered_json::object();
  for (int c = 0; c < options.classes; ++c) {
    const std::string& name = names[static_cast<std::size_t>(c)];
    classes_txt += name + "\n";
    labels_txt += title_case(name) + "\n";
    train_json[name] = nlohmann::ordered_json::array();
    test_json[name] = nlohmann::ordered_json::array();
    for (int j = 0; j < options.per_class; ++j) {
      const std::string rel = name + "/" + id_of(c, j);
      if (j < per_test) {
        test_txt += rel + "\n";
        test_json[name].push_back(rel);
        ++summary.test_images;
      } else {
        train_txt += rel + "\n";
        train_json[name].push_back(rel);
        ++summary.train_images;
      }
    }
  }
  write_text(meta / "classes.txt", classes_txt);
  write_text(meta / "labels.txt", labels_txt);
  write_text(meta / "train.txt", train_txt);
  write_text(meta / "test.txt", test_txt);
  write_text(meta / "train.json", train_json.dump());
  write_text(meta / "test.json", test_json.dump());
}

}  // namespace

SyntheticFoodSummary write_synthetic_food101(const fs::path& out,
                                             const SyntheticFoodOptions& options) {
  check_options(options);
  const auto names = synthetic_class_names(options.classes);
  SyntheticFoodSummary summary;
  summary.dataset_dir = out / "food-101";
  const fs::path images = summary.dataset_dir / "images";
  const fs::path meta = summary.dataset_dir / "meta";
  make_directory(meta);
  for (const auto& name : names) make_directory(images / name);
  summary.total_bytes = write_images(images, names, options);
  write_meta(meta, names, options, summary);
  summary.images = static_cast<std::int64_t>(options.classes) * options.per_class;
  return summary;
}

}  // namespace data_pipeline
