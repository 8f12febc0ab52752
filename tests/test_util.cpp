// Shared helpers for the GoogleTest suites: temporary directories and small datasets on disk.
#include "tests/test_util.h"

#include <stdlib.h>

#include <fstream>
#include <stdexcept>

#include "data_pipeline/synthetic_food.h"

namespace test_util {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "workload_test_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

TempDir::~TempDir() {
  std::error_code ec;
  // Restore permissions a test may have removed, so removal cannot fail half-way.
  for (auto it = fs::recursive_directory_iterator(path_, ec); !ec && it != fs::end(it);
       it.increment(ec)) {
    fs::permissions(it->path(), fs::perms::owner_all, fs::perm_options::add, ec);
  }
  fs::remove_all(path_, ec);
}

void write_file(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
  if (!out.flush()) throw std::runtime_error("cannot write " + file.string());
}

void write_text(const fs::path& file, const std::string& text) {
  write_file(file, std::vector<std::uint8_t>(text.begin(), text.end()));
}

std::vector<std::uint8_t> read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error("cannot read " + file.string());
  return std::vector<std::uint8_t>((std::istreambuf_iterator<char>(in)),
                                   std::istreambuf_iterator<char>());
}

fs::path make_dataset(const fs::path& root, int classes, int per_class, std::uint64_t seed,
                      double test_fraction) {
  data_pipeline::SyntheticFoodOptions options;
  options.classes = classes;
  options.per_class = per_class;
  options.seed = seed;
  options.threads = 2;
  options.test_fraction = test_fraction;
  data_pipeline::write_synthetic_food101(root, options);
  return root;
}

}  // namespace test_util
