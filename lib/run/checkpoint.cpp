// Checkpoint files (lib/run/checkpoint.h).
#include "lib/run/checkpoint.h"

#include <fcntl.h>
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

#include "data_pipeline/hash64.h"
#include "lib/core/usage_error.h"

namespace workload {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

namespace {

constexpr const char* kPrefix = "checkpoint-e";
constexpr const char* kSuffix = ".ckpt";
constexpr const char* kTmpSuffix = ".tmp";

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
  return data_pipeline::hash64(payload.data(), payload.size(),
                               data_pipeline::hash64(meta.data(), meta.size()));
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

}  // namespace

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

  const std::string tmp = path + kTmpSuffix;
  const auto fail = [&](const std::string& what, int err) {
    ::unlink(tmp.c_str());
    return CheckpointError("checkpoint " + tmp + ": " + what + ": " + system_error(err) +
                           (fs::exists(path) ? "; " + path + " is left as it was" : ""));
  };
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) throw fail("cannot create", errno);
  if (!write_all(fd, head) || !write_all(fd, payload)) {
    const int err = errno;
    ::close(fd);
    throw fail("write failed", err);
  }
  if (::fsync(fd) != 0) {
    const int err = errno;
    ::close(fd);
    throw fail("fsync failed", err);
  }
  if (::close(fd) != 0) throw fail("close failed", errno);
  if (::rename(tmp.c_str(), path.c_str()) != 0) throw fail("rename to " + path + " failed", errno);
  // The rename is durable once the directory is.
  const std::string dir = fs::path(path).parent_path().empty()
                              ? std::string(".")
                              : fs::path(path).parent_path().string();
  const int dfd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
  return head.size() + payload.size();
}

Checkpoint read_checkpoint_file(const std::string& path) {
  const auto error = [&](const std::string& what) {
    return CheckpointError("checkpoint " + path + ": " + what);
  };
  std::ifstream in(path, std::ios::binary);
  if (!in) throw error("cannot open: " + system_error(errno));
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw error("read failed");
  if (bytes.size() < sizeof(kCheckpointMagic) ||
      bytes.compare(0, sizeof(kCheckpointMagic), kCheckpointMagic, sizeof(kCheckpointMagic)) != 0) {
    throw error("not a train_resnet50 checkpoint (no RN50CKPT header)");
  }
  if (bytes.size() < kCheckpointHeaderBytes) {
    throw error("truncated: " + std::to_string(bytes.size()) + " bytes, shorter than its header");
  }
  const auto version = static_cast<std::uint32_t>(get_le(bytes, 8, 4));
  if (version != kCheckpointVersion) {
    throw error("version " + std::to_string(version) + ", this build reads version " +
                std::to_string(kCheckpointVersion));
  }
  const std::uint64_t meta_bytes = get_le(bytes, 12, 8);
  const std::uint64_t payload_bytes = get_le(bytes, 20, 8);
  const std::uint64_t digest = get_le(bytes, 28, 8);
  const std::uint64_t body = bytes.size() - kCheckpointHeaderBytes;
  if (meta_bytes > body || payload_bytes > body - meta_bytes) {
    throw error("truncated: " + std::to_string(bytes.size()) + " bytes where its header says " +
                std::to_string(kCheckpointHeaderBytes + meta_bytes + payload_bytes));
  }
  if (meta_bytes + payload_bytes != body) {
    throw error("corrupt: " + std::to_string(body - meta_bytes - payload_bytes) +
                " bytes after its end");
  }
  const std::string meta_text = bytes.substr(kCheckpointHeaderBytes, meta_bytes);
  const std::string payload = bytes.substr(kCheckpointHeaderBytes + meta_bytes);
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
  const int fd = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    throw UsageError("--checkpoint-dir " + dir_ + ": cannot write in it: " + system_error(errno));
  }
  ::close(fd);
  ::unlink(probe.c_str());
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
  const std::string path = file_for(epochs_done);
  const std::uint64_t written = write_checkpoint_file(path, checkpoint);
  if (bytes) *bytes = written;
  const auto files = list();
  for (std::size_t i = 0; i + kKeep < files.size(); ++i) ::unlink(files[i].second.c_str());
  // Temporary files a killed run left.
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(dir_, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() > 4 && name.compare(name.size() - 4, 4, kTmpSuffix) == 0 &&
        epoch_of(name.substr(0, name.size() - 4)) >= 0) {
      ::unlink(entry.path().c_str());
    }
  }
  return path;
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
