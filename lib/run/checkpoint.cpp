// Checkpoint files (lib/run/checkpoint.h).
#include "lib/run/checkpoint.h"

#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <torch/serialize/input-archive.h>
#include <torch/serialize/output-archive.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "common/hash64.h"
#include "lib/core/unique_fd.h"
#include "lib/core/usage_error.h"

namespace workload {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kPrefix = "checkpoint-e";
constexpr const char* kSuffix = ".ckpt";
constexpr const char* kTmpSuffix = ".tmp";
constexpr const char* kLockName = ".lock";

std::string system_error(int err) { return std::strerror(err); }

void put_u32(std::string& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
void put_u64(std::string& out, std::uint64_t v) {
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<char>((v >> (8 * i)) & 0xFF));
}
std::uint64_t get_le(const std::string& in, std::size_t at, int bytes) {
  std::uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) {
    v |= static_cast<std::uint64_t>(static_cast<unsigned char>(in[at + i])) << (8 * i);
  }
  return v;
}

std::uint64_t digest_of(const std::string& meta, const std::string& payload) {
  return common::hash64(payload.data(), payload.size(), common::hash64(meta.data(), meta.size()));
}

// Writes all of `bytes` to `fd`; false with errno set on failure.
bool write_all(int fd, const std::string& bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    done += static_cast<std::size_t>(n);
  }
  return true;
}

// The epoch of a file named as CheckpointDir::file_for names them, or -1.
std::int64_t epoch_of(const std::string& name) {
  const std::string prefix = kPrefix, suffix = kSuffix;
  if (name.size() <= prefix.size() + suffix.size() || name.compare(0, prefix.size(), prefix) != 0 ||
      name.compare(name.size() - suffix.size(), suffix.size(), suffix) != 0) {
    return -1;
  }
  const std::string digits =
      name.substr(prefix.size(), name.size() - prefix.size() - suffix.size());
  if (digits.empty() || digits.size() > 12) return -1;
  for (char c : digits) {
    if (c < '0' || c > '9') return -1;
  }
  return std::stoll(digits);
}

// True for a temporary file of a checkpoint: NAME.tmp (older builds) or NAME.tmp.PID.
bool is_checkpoint_tmp(const std::string& name) {
  const std::size_t at = name.rfind(kTmpSuffix);
  if (at == std::string::npos || epoch_of(name.substr(0, at)) < 0) return false;
  const std::string rest = name.substr(at + std::strlen(kTmpSuffix));
  if (rest.empty()) return true;
  return rest.size() > 1 && rest[0] == '.' &&
         std::all_of(rest.begin() + 1, rest.end(), [](char c) { return c >= '0' && c <= '9'; });
}

}  // namespace

bool is_checkpoint_dir_file(const std::string& name) {
  return name == kLockName || epoch_of(name) >= 0 || is_checkpoint_tmp(name);
}

namespace {

// The command line of this process, its arguments joined by spaces (for the lock's holder).
std::string own_command_line() {
  std::ifstream in("/proc/self/cmdline", std::ios::binary);
  std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!all.empty() && all.back() == '\0') all.pop_back();
  std::replace(all.begin(), all.end(), '\0', ' ');
  return all;
}

}  // namespace

void check_checkpoint_dir(const std::string& dir) {
  std::error_code ec;
  fs::path p(dir);
  if (fs::exists(p, ec)) {
    if (!fs::is_directory(p, ec)) throw UsageError("--checkpoint-dir " + dir + ": not a directory");
    if (::access(dir.c_str(), W_OK | X_OK) != 0) {
      throw UsageError("--checkpoint-dir " + dir + ": cannot write in it: " + system_error(errno));
    }
    return;
  }
  // Missing: the run creates it, in its nearest existing parent.
  fs::path parent = fs::absolute(p, ec).parent_path();
  while (!parent.empty() && !fs::exists(parent, ec)) parent = parent.parent_path();
  if (parent.empty()) parent = "/";
  if (!fs::is_directory(parent, ec)) {
    throw UsageError("--checkpoint-dir " + dir + ": cannot create it: " + parent.string() +
                     " is not a directory");
  }
  if (::access(parent.c_str(), W_OK | X_OK) != 0) {
    throw UsageError("--checkpoint-dir " + dir + ": cannot create it in " + parent.string() + ": " +
                     system_error(errno));
  }
}

CheckpointLock::CheckpointLock(const std::string& dir) {
  const std::string path = (fs::path(dir) / kLockName).string();
  fd_ = UniqueFd(::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644));
  if (!fd_) {
    throw UsageError("--checkpoint-dir " + dir + ": cannot create its lock " + path + ": " +
                     system_error(errno));
  }
  if (::flock(fd_.get(), LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    if (err != EWOULDBLOCK) {
      throw UsageError("--checkpoint-dir " + dir + ": cannot lock " + path + ": " +
                       system_error(err));
    }
    std::string holder;
    char buf[4096];
    const ssize_t n = ::pread(fd_.get(), buf, sizeof(buf) - 1, 0);
    if (n > 0) holder.assign(buf, static_cast<std::size_t>(n));
    while (!holder.empty() && (holder.back() == '\n' || holder.back() == ' ')) holder.pop_back();
    std::replace(holder.begin(), holder.end(), '\n', ' ');
    throw UsageError("--checkpoint-dir " + dir + ": another run is writing checkpoints there (" +
                     (holder.empty() ? std::string("its pid unknown") : holder) +
                     "); wait for it to end, or give another directory");
  }
  const std::string me = "pid " + std::to_string(::getpid()) + ": " + own_command_line() + "\n";
  // The holder's line, for the message of a run refused; the lock holds without it.
  if (::ftruncate(fd_.get(), 0) == 0) {
    const ssize_t n = ::pwrite(fd_.get(), me.data(), me.size(), 0);
    static_cast<void>(n);
  }
}

std::uint64_t write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint) {
  std::string payload;
  try {
    torch::serialize::OutputArchive archive;
    for (std::size_t i = 0; i < checkpoint.tensors.size(); ++i) {
      archive.write("t" + std::to_string(i), checkpoint.tensors[i].second.detach().to(torch::kCPU));
    }
    std::ostringstream out;
    archive.save_to(out);
    payload = out.str();
  } catch (const c10::Error& e) {
    throw CheckpointError("checkpoint " + path +
                          ": cannot serialize the tensors: " + e.what_without_backtrace());
  }
  Json meta = checkpoint.meta;
  Json names = Json::array();
  for (const auto& [name, tensor] : checkpoint.tensors) names.push_back(name);
  meta["tensor_names"] = names;
  const std::string meta_text = meta.dump();

  // The header and meta, then the payload as it is (no copy of the tensors' bytes).
  std::string head(kCheckpointMagic, sizeof(kCheckpointMagic));
  put_u32(head, kCheckpointVersion);
  put_u64(head, meta_text.size());
  put_u64(head, payload.size());
  put_u64(head, digest_of(meta_text, payload));
  head += meta_text;

  const std::string tmp = path + kTmpSuffix + "." + std::to_string(::getpid());
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return CheckpointError("checkpoint " + tmp + ": " + what + ": " + system_error(err) +
                           (fs::exists(path) ? "; " + path + " is left as it was" : ""));
  };
  UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  if (!fd) throw fail("cannot create", errno);
  if (!write_all(fd.get(), head) || !write_all(fd.get(), payload))
    throw fail("write failed", errno);
  if (::fsync(fd.get()) != 0) throw fail("fsync failed", errno);
  if (fd.close() != 0) throw fail("close failed", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("rename to " + path + " failed", errno);
  // The rename is durable once the directory is.
  const std::string dir = fs::path(path).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path).parent_path().string();
  const UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd) ::fsync(dfd.get());
  return head.size() + payload.size();
}

// Reads exactly `n` bytes at `offset` of `fd` into `out`; false with errno set on failure (a
// short read sets EIO: the file shrank under us).
bool read_exactly(int fd, std::uint64_t offset, std::uint64_t n, std::string& out) {
  out.resize(n);
  std::uint64_t done = 0;
  while (done < n) {
    const ssize_t got = ::pread(fd, out.data() + done, n - done, static_cast<off_t>(offset + done));
    if (got < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    if (got == 0) {
      errno = EIO;
      return false;
    }
    done += static_cast<std::uint64_t>(got);
  }
  return true;
}

Checkpoint read_checkpoint_file(const std::string& path) {
  const auto error = [&](const std::string& what) {
    return CheckpointError("checkpoint " + path + ": " + what);
  };
  // The header is read and checked against the file's size before anything else: a file that is
  // not a checkpoint (a 30 GB image named like one) costs 36 bytes, not its size in memory.
  const UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd) throw error("cannot open: " + system_error(errno));
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) throw error("cannot stat: " + system_error(errno));
  if (!S_ISREG(st.st_mode)) throw error("not a regular file");
  const auto size = static_cast<std::uint64_t>(st.st_size);
  std::string head;
  if (!read_exactly(fd.get(), 0, std::min<std::uint64_t>(size, kCheckpointHeaderBytes), head)) {
    throw error("read failed: " + system_error(errno));
  }
  if (head.size() < sizeof(kCheckpointMagic) ||
      head.compare(0, sizeof(kCheckpointMagic), kCheckpointMagic, sizeof(kCheckpointMagic)) != 0) {
    throw error("not a train_resnet50 checkpoint (no RN50CKPT header)");
  }
  if (size < kCheckpointHeaderBytes) {
    throw error("truncated: " + std::to_string(size) + " bytes, shorter than its header");
  }
  const auto version = static_cast<std::uint32_t>(get_le(head, 8, 4));
  if (version != kCheckpointVersion) {
    throw error("version " + std::to_string(version) + ", this build reads version " +
                std::to_string(kCheckpointVersion));
  }
  const std::uint64_t meta_bytes = get_le(head, 12, 8);
  const std::uint64_t payload_bytes = get_le(head, 20, 8);
  const std::uint64_t digest = get_le(head, 28, 8);
  const std::uint64_t body = size - kCheckpointHeaderBytes;
  if (meta_bytes > body || payload_bytes > body - meta_bytes) {
    throw error("truncated: " + std::to_string(size) + " bytes where its header says " +
                std::to_string(kCheckpointHeaderBytes + meta_bytes + payload_bytes));
  }
  if (meta_bytes + payload_bytes != body) {
    throw error("corrupt: " + std::to_string(body - meta_bytes - payload_bytes) +
                " bytes after its end");
  }
  if (meta_bytes > kCheckpointMaxMetaBytes) {
    throw error("corrupt: its header gives its facts " + std::to_string(meta_bytes) +
                " bytes, more than the " + std::to_string(kCheckpointMaxMetaBytes) +
                " any checkpoint holds");
  }
  std::string meta_text, payload;
  if (!read_exactly(fd.get(), kCheckpointHeaderBytes, meta_bytes, meta_text) ||
      !read_exactly(fd.get(), kCheckpointHeaderBytes + meta_bytes, payload_bytes, payload)) {
    throw error("read failed: " + system_error(errno));
  }
  if (digest_of(meta_text, payload) != digest) {
    throw error("corrupt: its contents do not match their digest");
  }
  Checkpoint out;
  try {
    out.meta = Json::parse(meta_text);
  } catch (const std::exception& e) {
    throw error(std::string("corrupt meta: ") + e.what());
  }
  if (!out.meta.is_object() || !out.meta.contains("tensor_names") ||
      !out.meta["tensor_names"].is_array()) {
    throw error("corrupt meta: no tensor_names list");
  }
  try {
    torch::serialize::InputArchive archive;
    archive.load_from(payload.data(), payload.size(), torch::Device(torch::kCPU));
    std::size_t i = 0;
    for (const auto& name : out.meta["tensor_names"]) {
      torch::Tensor t;
      archive.read("t" + std::to_string(i++), t);
      out.tensors.emplace_back(name.get<std::string>(), t);
    }
  } catch (const c10::Error& e) {
    throw error(std::string("cannot read its tensors: ") + e.what_without_backtrace());
  } catch (const std::exception& e) {
    throw error(std::string("cannot read its tensors: ") + e.what());
  }
  out.meta.erase("tensor_names");
  return out;
}

CheckpointDir::CheckpointDir(std::string dir) : dir_(std::move(dir)) {
  std::error_code ec;
  if (fs::exists(dir_, ec) && !fs::is_directory(dir_, ec)) {
    throw UsageError("--checkpoint-dir " + dir_ + ": not a directory");
  }
  fs::create_directories(dir_, ec);
  if (ec) throw UsageError("--checkpoint-dir " + dir_ + ": cannot create it: " + ec.message());
  const std::string probe = (fs::path(dir_) / ".write-probe").string();
  if (!UniqueFd(::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644))) {
    throw UsageError("--checkpoint-dir " + dir_ + ": cannot write in it: " + system_error(errno));
  }
  ::unlink(probe.c_str());
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (epoch_of(entry.path().filename().string()) >= 0 && !entry.is_regular_file(ec)) {
      throw UsageError("--checkpoint-dir " + dir_ + ": " + entry.path().string() +
                       " is named as a checkpoint but is not a file; move it away");
    }
  }
}

std::string CheckpointDir::file_for(std::int64_t epochs_done) const {
  char name[48];
  std::snprintf(name, sizeof(name), "%s%06lld%s", kPrefix, static_cast<long long>(epochs_done),
                kSuffix);
  return (fs::path(dir_) / name).string();
}

std::vector<std::pair<std::int64_t, std::string>> CheckpointDir::list() const {
  std::vector<std::pair<std::int64_t, std::string>> out;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::int64_t epoch = epoch_of(entry.path().filename().string());
    if (epoch >= 0 && entry.is_regular_file(ec)) out.emplace_back(epoch, entry.path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::string CheckpointDir::write(std::int64_t epochs_done, const Checkpoint& checkpoint,
                                 std::uint64_t* bytes) const {
  std::string path = file_for(epochs_done);
  const std::uint64_t written = write_checkpoint_file(path, checkpoint);
  if (bytes) *bytes = written;
  const auto files = list();
  for (std::size_t i = 0; i + kKeep < files.size(); ++i) ::unlink(files[i].second.c_str());
  // Temporary files a killed run left (this run holds the directory's lock: none is being written).
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    if (is_checkpoint_tmp(entry.path().filename().string())) ::unlink(entry.path().c_str());
  }
  return path;
}

std::vector<std::string> CheckpointDir::files() const {
  std::vector<std::string> out;
  for (const auto& [epoch, path] : list()) out.push_back(path);
  return out;
}

int CheckpointDir::remove_all() const {
  int removed = 0;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    const bool checkpoint = epoch_of(name) >= 0;
    if (!checkpoint && !is_checkpoint_tmp(name)) continue;
    if (::unlink(entry.path().c_str()) != 0 && errno != ENOENT) {
      throw UsageError("--start-over: cannot delete " + entry.path().string() + ": " +
                       system_error(errno));
    }
    if (checkpoint) ++removed;
  }
  return removed;
}

std::optional<std::string> CheckpointDir::newest() const {
  const auto files = list();
  if (files.empty()) return std::nullopt;
  return files.back().second;
}

std::string fingerprint_mismatch(const Json& found, const Json& expected) {
  std::string out;
  for (const auto& [key, value] : expected.items()) {
    const bool same = found.is_object() && found.contains(key) && found[key] == value;
    if (same) continue;
    if (!out.empty()) out += "; ";
    out += key + ": checkpoint " +
           (found.is_object() && found.contains(key) ? found[key].dump() : std::string("none")) +
           ", run " + value.dump();
  }
  return out;
}

}  // namespace workload
