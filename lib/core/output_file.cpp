// Output files of a run (lib/core/output_file.h).
#include "lib/core/output_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <stdexcept>

#include "lib/core/unique_fd.h"
#include "lib/core/usage_error.h"

namespace workload {

namespace fs = std::filesystem;

namespace {

// The file a chain of symlinks at `path` ends at (itself when it is none), which need not exist.
std::string resolve_links(const std::string& flag, const std::string& path) {
  fs::path p(path);
  for (int hops = 0; hops < 40; ++hops) {
    std::error_code ec;
    if (!fs::is_symlink(fs::symlink_status(p, ec))) return p.string();
    const fs::path to = fs::read_symlink(p, ec);
    // NOLINTNEXTLINE(performance-inefficient-string-concatenation): a throw's message
    if (ec) throw UsageError(flag + ": " + path + ": cannot read the symlink: " + ec.message());
    p = to.is_absolute() ? to : p.parent_path() / to;
  }
  throw UsageError(flag + ": " + path + ": too many levels of symlinks");
}

std::string named(const std::string& path, const std::string& target) {
  return target == path ? path : path + " (-> " + target + ")";
}

std::string directory_of(const std::string& target) {
  const fs::path p(target);
  return p.has_parent_path() ? p.parent_path().string() : std::string(".");
}

// The target's kind once checked: true for a character device (written in place).
bool checked_target(const std::string& flag, const std::string& path, const std::string& target) {
  const std::string name = named(path, target);
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0) {
    if (S_ISCHR(st.st_mode)) {
      if (::access(target.c_str(), W_OK) != 0) {
        throw UsageError(flag + ": " + name + " is a device that cannot be written");
      }
      return true;
    }
    if (S_ISDIR(st.st_mode)) throw UsageError(flag + ": " + name + " is a directory");
    // Written at the end of the run: opening a pipe nobody reads would hold the finished run there.
    const char* kind = S_ISFIFO(st.st_mode)   ? "named pipe"
                       : S_ISSOCK(st.st_mode) ? "socket"
                       : S_ISBLK(st.st_mode)  ? "block device"
                       : S_ISREG(st.st_mode)  ? nullptr
                                              : "special file";
    if (kind) {
      throw UsageError(flag + ": " + name + " is a " + kind +
                       "; expected a regular file (or a character device such as /dev/null)");
    }
    if (::access(target.c_str(), W_OK) != 0) {
      throw UsageError(flag + ": " + name + " exists and is not writable");
    }
  }
  const std::string dir = directory_of(target);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    throw UsageError(flag + ": directory " + dir + " does not exist" +
                     (target == path ? "" : " (for " + name + ")"));
  }
  if (::access(dir.c_str(), W_OK) != 0) {
    throw UsageError(flag + ": directory " + dir + " is not writable" +
                     (target == path ? "" : " (for " + name + ")"));
  }
  return false;
}

// A new file, created exclusively, named after `target` in `dir`; its descriptor is closed.
std::string create_staging(const std::string& dir, const std::string& target, mode_t mode) {
  static std::atomic<unsigned> counter{0};
  const std::string base = fs::path(target).filename().string();
  for (int attempt = 0; attempt < 100; ++attempt) {
    std::string name = (fs::path(dir) / ("." + base + ".tmp." + std::to_string(::getpid()) + "." +
                                         std::to_string(counter++)))
                           .string();
    const UniqueFd fd(::open(name.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode));
    if (fd) return name;
    if (errno != EEXIST) {
      throw std::runtime_error("cannot create " + name + ": " + std::strerror(errno));
    }
  }
  throw std::runtime_error("cannot create a staging file in " + dir);
}

// Copies the file `from` into the open descriptor `to`. Returns errno, 0 on success.
int copy_into(const std::string& from, int to) {
  const UniqueFd in(::open(from.c_str(), O_RDONLY | O_CLOEXEC));
  if (!in) return errno;
  char buf[1 << 16];
  int error = 0;
  for (;;) {
    const ssize_t n = ::read(in.get(), buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      if (n < 0) error = errno;
      break;
    }
    for (ssize_t done = 0; done < n;) {
      const ssize_t w = ::write(to, buf + done, static_cast<std::size_t>(n - done));
      if (w < 0 && errno == EINTR) continue;
      if (w < 0) {
        error = errno;
        break;
      }
      done += w;
    }
    if (error) break;
  }
  return error;
}

}  // namespace

void check_output_file(const std::string& flag, const std::string& path) {
  if (path.empty()) throw UsageError(flag + ": expected a file path, got ''");
  checked_target(flag, path, resolve_links(flag, path));
}

fs::path output_target(const std::string& path) {
  std::string target;
  try {
    target = resolve_links("", path);
  } catch (const UsageError&) {
    return {};
  }
  std::error_code ec;
  const fs::path absolute = fs::absolute(target, ec);
  if (ec) return {};
  fs::path out = fs::weakly_canonical(absolute, ec);
  return ec ? fs::path() : out;
}

bool same_output_file(const std::string& a, const std::string& b) {
  const fs::path target = output_target(a);
  return !target.empty() && target == output_target(b);
}

OutputFile::OutputFile(std::string flag, std::string path)
    : flag_(std::move(flag)), path_(std::move(path)) {
  if (path_.empty()) throw UsageError(flag_ + ": expected a file path, got ''");
  target_ = resolve_links(flag_, path_);
  device_ = checked_target(flag_, path_, target_);
  // A replaced file keeps its permissions (chmod, which the umask does not touch); a new one gets
  // 0666 less the umask, as open() creates it.
  struct stat st {};
  const bool replacing = !device_ && ::stat(target_.c_str(), &st) == 0;
  const mode_t mode = replacing ? (st.st_mode & 07777) : 0666;
  const char* tmp = std::getenv("TMPDIR");
  const std::string dir = device_ ? (tmp && *tmp ? tmp : "/tmp") : directory_of(target_);
  try {
    staging_ = create_staging(dir, target_, mode);
    if (replacing && ::chmod(staging_.c_str(), mode) != 0) fail("cannot set its permissions");
  } catch (const std::runtime_error& e) {
    fail(e.what());
  }
}

OutputFile::~OutputFile() {
  // A device's staging file is a copy in the temporary directory, removed once written in place.
  if (!staging_.empty() && (device_ || !committed_)) ::unlink(staging_.c_str());
}

void OutputFile::fail(const std::string& what) const {
  throw std::runtime_error(flag_ + " " + named(path_, target_) + ": " + what);
}

void OutputFile::commit() {
  if (device_) {
    UniqueFd fd(::open(target_.c_str(), O_WRONLY | O_NOCTTY | O_CLOEXEC));
    if (!fd) fail(std::string("cannot open for writing: ") + std::strerror(errno));
    const int error = copy_into(staging_, fd.get());
    fd.close();
    if (error) fail(std::string("write failed: ") + std::strerror(error));
    committed_ = true;
    return;
  }
  UniqueFd fd(::open(staging_.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd || ::fsync(fd.get()) != 0) {
    fail(std::string("cannot flush ") + staging_ + ": " + std::strerror(errno));
  }
  fd.close();
  if (std::rename(staging_.c_str(), target_.c_str()) != 0) {
    fail(std::string("cannot move the file into place: ") + std::strerror(errno));
  }
  committed_ = true;
}

void write_output_file(const std::string& flag, const std::string& path,
                       const std::string& contents) {
  OutputFile out(flag, path);
  std::FILE* f = std::fopen(out.staging_path().c_str(), "wb");
  if (!f) {
    throw std::runtime_error(flag + " " + path + ": cannot open " + out.staging_path() + ": " +
                             std::strerror(errno));
  }
  const bool written = std::fwrite(contents.data(), 1, contents.size(), f) == contents.size();
  const int error = errno;
  if (std::fclose(f) != 0 || !written) {
    throw std::runtime_error(flag + " " + path +
                             ": write failed: " + std::strerror(written ? errno : error));
  }
  out.commit();
}

}  // namespace workload
