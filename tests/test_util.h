// Shared helpers for the GoogleTest suites: temporary directories and small datasets on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace test_util {

/// A fresh directory under the system temp dir, removed with everything in it on destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::filesystem::path& path() const { return path_; }
  std::filesystem::path operator/(const std::string& rel) const { return path_ / rel; }

 private:
  std::filesystem::path path_;
};

/// Writes `bytes` (or `text`) to `file`, creating parent directories.
void write_file(const std::filesystem::path& file, const std::vector<std::uint8_t>& bytes);
void write_text(const std::filesystem::path& file, const std::string& text);
std::vector<std::uint8_t> read_bytes(const std::filesystem::path& file);

/// Writes a small synthetic Food-101 dataset (real JPEGs) under `root` and returns root.
std::filesystem::path make_dataset(const std::filesystem::path& root, int classes, int per_class,
                                   std::uint64_t seed = 7, double test_fraction = 0.25);

}  // namespace test_util
