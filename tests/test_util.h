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

/// Outcome of a child process.
struct ProcessResult {
  int exit_code = -1;  ///< exit status, or 128 + signal when killed by one
  bool timed_out = false;
  int pid = 0;
  std::string out;     ///< stdout
  std::string err;     ///< stderr
  double seconds = 0;  ///< wall time
};

/// Runs `argv` (argv[0] a path), killing it after `timeout_s`. The child's environment is this
/// process's with each "NAME=value" of `env` set (replacing an inherited NAME). Optionally sends
/// `signal` to it `signal_after_s` seconds after the start.
ProcessResult run_process(const std::vector<std::string>& argv,
                          const std::vector<std::string>& env = {}, double timeout_s = 120,
                          int signal = 0, double signal_after_s = 0);

/// Like run_process, but sends `signal` as soon as the child's stdout contains `marker`;
/// `signal_seconds` then holds the time from the signal to the child's exit (-1 if never sent).
/// `env` as for run_process. With `again_after_s` >= 0 the signal is sent a second time that many
/// seconds after the first.
ProcessResult run_process_signal_on(const std::vector<std::string>& argv, const std::string& marker,
                                    int signal, double timeout_s, double* signal_seconds,
                                    const std::vector<std::string>& env = {},
                                    double again_after_s = -1);

/// Writes a small synthetic Food-101 dataset (real JPEGs) under `root` and returns root.
std::filesystem::path make_dataset(const std::filesystem::path& root, int classes, int per_class,
                                   std::uint64_t seed = 7, double test_fraction = 0.25);

}  // namespace test_util
