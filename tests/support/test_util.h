// Shared helpers for the GoogleTest suites: temporary directories and small datasets on disk.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "data_pipeline/food101_index.h"

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

/// A child process started with posix_spawn, its stdout and stderr in files of its own. Not
/// copyable; the destructor kills a child still running.
class Process {
 public:
  /// Starts `argv` (argv[0] a path) with this process's environment and each "NAME=value" of
  /// `env` set (replacing an inherited NAME); a bare "NAME" removes NAME. \throws
  /// std::runtime_error when it cannot start.
  Process(const std::vector<std::string>& argv, const std::vector<std::string>& env = {});
  ~Process();
  Process(const Process&) = delete;
  Process& operator=(const Process&) = delete;

  int pid() const { return pid_; }
  /// True once the child has exited (reaping it).
  bool poll();
  /// Waits up to `timeout_s`; true when the child has exited.
  bool wait(double timeout_s);
  void signal(int sig);
  /// Exit status, or 128 + the signal that killed it; -1 while it runs.
  int exit_code() const { return exit_code_; }
  std::string out() const;
  std::string err() const;
  /// While the child runs: one line per thread, "<tid> <name> <state> <kernel wait channel>", from
  /// /proc (what a test prints when a child it waits for does not end). Empty once it ended.
  std::string threads() const;

 private:
  std::unique_ptr<TempDir> io_;
  int pid_ = 0;
  bool done_ = false;
  int exit_code_ = -1;
};

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

/// The seconds this machine takes now to start `binary` and end it without running anything
/// (`binary --version`: its libraries loaded, its flags parsed, its exit). A bound on a child's
/// wall time is the program's promise plus this, which a busy machine stretches as it stretches
/// the child's. \throws std::runtime_error when the binary does not exit 0.
double start_and_exit_seconds(const std::string& binary);

/// Writes a small synthetic Food-101 dataset (real JPEGs) under `root` and returns root.
std::filesystem::path make_dataset(const std::filesystem::path& root, int classes, int per_class,
                                   std::uint64_t seed = 7, double test_fraction = 0.25,
                                   double class_signal = 0);

/// A synthetic Food-101 training split of 3 classes x 8 images (seed 3, no test images) in a
/// temporary directory, written on first use and shared by the process's tests, with its index.
struct TrainingSet {
  TrainingSet();
  TempDir dir;
  std::shared_ptr<const data_pipeline::Food101Index> index;
};
const TrainingSet& small_training_set();

}  // namespace test_util
