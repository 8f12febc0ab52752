// Shared helpers for the GoogleTest suites: temporary directories and small datasets on disk.
#include "tests/support/test_util.h"

#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>

#include <fstream>
#include <stdexcept>

#include "data_pipeline/synthetic/synthetic_food.h"

namespace test_util {
namespace fs = std::filesystem;

TempDir::TempDir() {
  std::string pattern = (fs::temp_directory_path() / "workload_test_XXXXXX").string();
  if (!mkdtemp(pattern.data())) throw std::runtime_error("mkdtemp failed");
  path_ = pattern;
}

namespace {
int remove_entry(const char* path, const struct stat*, int, struct FTW*) {
  chmod(path, 0700);  // a test may have made it unreadable
  return ::remove(path);
}
}  // namespace

TempDir::~TempDir() {
  // POSIX nftw rather than std::filesystem::remove_all: PyTorch's pip wheels export their own
  // copies of libstdc++'s filesystem symbols from libtorch.so, and their remove_all crashes when
  // it is bound in place of the system's (seen with LibTorch 2.11 on Ubuntu 24.04).
  nftw(path_.c_str(), remove_entry, 16, FTW_DEPTH | FTW_PHYS);
}

void write_file(const fs::path& file, const std::vector<std::uint8_t>& bytes) {
  fs::create_directories(file.parent_path());
  std::ofstream out(file, std::ios::binary | std::ios::trunc);
  out.write(reinterpret_cast<const char*>(bytes.data()),
            static_cast<std::streamsize>(bytes.size()));
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
                      double test_fraction, double class_signal) {
  data_pipeline::SyntheticFoodOptions options;
  options.classes = classes;
  options.per_class = per_class;
  options.seed = seed;
  options.threads = 2;
  options.test_fraction = test_fraction;
  options.class_signal = class_signal;
  data_pipeline::write_synthetic_food101(root, options);
  return root;
}

double start_and_exit_seconds(const std::string& binary) {
  const ProcessResult r = run_process({binary, "--version"}, {}, 60);
  if (r.exit_code != 0) {
    throw std::runtime_error(binary + " --version: exit " + std::to_string(r.exit_code) + ": " +
                             r.err);
  }
  return r.seconds;
}

namespace {
ProcessResult run_impl(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       double timeout_s, int signal, double signal_after_s,
                       const std::string& marker, double* signal_seconds,
                       double again_after_s = -1);
}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                          double timeout_s, int signal, double signal_after_s) {
  return run_impl(argv, env, timeout_s, signal, signal_after_s, "", nullptr);
}

ProcessResult run_process_signal_on(const std::vector<std::string>& argv, const std::string& marker,
                                    int signal, double timeout_s, double* signal_seconds,
                                    const std::vector<std::string>& env, double again_after_s) {
  return run_impl(argv, env, timeout_s, signal, 0, marker, signal_seconds, again_after_s);
}

namespace {
ProcessResult run_impl(const std::vector<std::string>& argv, const std::vector<std::string>& env,
                       double timeout_s, int signal, double signal_after_s,
                       const std::string& marker, double* signal_seconds, double again_after_s) {
  Process child(argv, env);
  const auto start = std::chrono::steady_clock::now();
  bool signalled = signal == 0;
  double signalled_at = -1;
  ProcessResult r;
  r.pid = child.pid();
  while (!child.poll()) {
    const double elapsed =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    bool due = !signalled && elapsed >= signal_after_s;
    if (due && !marker.empty()) due = child.out().find(marker) != std::string::npos;
    if (due) {
      child.signal(signal);
      signalled = true;
      signalled_at = elapsed;
    } else if (signalled && again_after_s >= 0 && signalled_at >= 0 &&
               elapsed - signalled_at >= again_after_s) {
      child.signal(signal);
      again_after_s = -1;
    }
    if (elapsed > timeout_s) {
      r.timed_out = true;
      child.signal(SIGKILL);
      child.wait(60);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (signal_seconds) *signal_seconds = signalled_at < 0 ? -1 : r.seconds - signalled_at;
  r.exit_code = child.exit_code();
  r.out = child.out();
  r.err = child.err();
  return r;
}
}  // namespace

Process::Process(const std::vector<std::string>& argv, const std::vector<std::string>& env)
    : io_(std::make_unique<TempDir>()) {
  const std::string out_path = (io_->path() / "out").string();
  const std::string err_path = (io_->path() / "err").string();
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  posix_spawn_file_actions_addopen(&actions, 2, err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC,
                                   0644);
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<std::string> env_storage;
  // The child gets this process's environment with each NAME of `env` set to its value (an
  // inherited NAME=... is dropped: getenv would find whichever came first); a bare NAME unsets.
  auto name_of = [](const std::string& entry) { return entry.substr(0, entry.find('=')); };
  for (char** e = environ; *e; ++e) {
    const std::string entry(*e);
    bool overridden = false;
    for (const auto& mine : env) overridden = overridden || name_of(mine) == name_of(entry);
    if (!overridden) env_storage.push_back(entry);
  }
  for (const auto& e : env) {
    if (e.find('=') != std::string::npos) env_storage.push_back(e);
  }
  std::vector<char*> envp;
  for (auto& e : env_storage) envp.push_back(e.data());
  envp.push_back(nullptr);
  const int rc = posix_spawn(&pid_, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) throw std::runtime_error("cannot start " + argv[0]);
}

Process::~Process() {
  if (!done_) {
    signal(SIGKILL);
    wait(60);
  }
}

bool Process::poll() {
  if (done_) return true;
  int status = 0;
  if (waitpid(pid_, &status, WNOHANG) != pid_) return false;
  done_ = true;
  exit_code_ = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return true;
}

bool Process::wait(double timeout_s) {
  const auto start = std::chrono::steady_clock::now();
  while (!poll()) {
    if (std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() >
        timeout_s) {
      return false;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

void Process::signal(int sig) {
  if (!done_) kill(pid_, sig);
}

std::string Process::out() const {
  const auto bytes = read_bytes(io_->path() / "out");
  return std::string(bytes.begin(), bytes.end());
}

std::string Process::err() const {
  const auto bytes = read_bytes(io_->path() / "err");
  return std::string(bytes.begin(), bytes.end());
}

std::string Process::threads() const {
  if (done_) return "";
  std::string lines;
  const fs::path tasks = "/proc/" + std::to_string(pid_) + "/task";
  std::error_code ec;
  for (const auto& task : fs::directory_iterator(tasks, ec)) {
    auto first_line = [&](const char* file) {
      std::ifstream in(task.path() / file);
      std::string line;
      std::getline(in, line);
      return line;
    };
    // stat: "tid (name) state ...": the state follows the last ')'.
    const std::string stat = first_line("stat");
    const std::size_t paren = stat.rfind(')');
    const std::string state =
        paren == std::string::npos || paren + 2 >= stat.size() ? "?" : stat.substr(paren + 2, 1);
    lines += task.path().filename().string() + " " + first_line("comm") + " " + state + " " +
             first_line("wchan") + "\n";
  }
  return lines;
}

TrainingSet::TrainingSet() {
  make_dataset(dir.path(), 3, 8, 3, 0.0);
  index = std::make_shared<const data_pipeline::Food101Index>(
      data_pipeline::Food101Index::load(dir.path().string(), "train"));
}

const TrainingSet& small_training_set() {
  static const TrainingSet set;
  return set;
}

}  // namespace test_util
