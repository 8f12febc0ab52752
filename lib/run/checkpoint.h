// Checkpoint files: what an --epochs run writes at an epoch's end and resumes from, written
// atomically and read back with every way a file can be wrong named.
#pragma once

#include <torch/types.h>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "lib/core/unique_fd.h"

namespace workload {

/// A checkpoint file that cannot be used: truncated, corrupt, foreign, of another version, or one
/// that does not match the run (its message names the file and what is wrong). Exit status 1.
class CheckpointError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/// What a checkpoint holds: a JSON object of facts (the run's fingerprint, its position, its
/// records) and named tensors (on the CPU once read).
struct Checkpoint {
  nlohmann::ordered_json meta = nlohmann::ordered_json::object();
  std::vector<std::pair<std::string, torch::Tensor>> tensors;
};

/// The file layout, version 1: "RN50CKPT", u32 version, u64 meta bytes, u64 payload bytes, u64
/// digest (hash64 of meta then payload), the meta JSON, then the tensors serialized by LibTorch
/// (torch::serialize::OutputArchive). Little-endian.
inline constexpr char kCheckpointMagic[8] = {'R', 'N', '5', '0', 'C', 'K', 'P', 'T'};
inline constexpr std::uint32_t kCheckpointVersion = 1;
inline constexpr std::size_t kCheckpointHeaderBytes = 8 + 4 + 8 + 8 + 8;
/// The most meta JSON a checkpoint holds (its facts and every epoch's record: kilobytes); a header
/// that says more is corrupt, and is refused before anything is allocated for it.
inline constexpr std::uint64_t kCheckpointMaxMetaBytes = std::uint64_t{64} << 20;

/// Writes `checkpoint` to `path` atomically: into `path`.tmp.PID (this process's), flushed to the
/// disk (fsync), renamed over `path`, the directory flushed. A failure (a full disk, an unwritable
/// directory) leaves `path` as it was and removes the temporary file; a process killed meanwhile
/// leaves at most the temporary file, which no reader takes for a checkpoint. Returns the bytes
/// written. \throws CheckpointError naming the file and the system's reason.
std::uint64_t write_checkpoint_file(const std::string& path, const Checkpoint& checkpoint);

/// Reads `path`, its header first: nothing more is read or allocated until the header (magic,
/// version, sizes) agrees with the file's size. \throws CheckpointError naming the file: missing,
/// unreadable or not a regular file, shorter than its header says (truncated), without the magic
/// (not a checkpoint), of another version, whose digest does not match (corrupt), or whose meta or
/// tensors cannot be parsed.
Checkpoint read_checkpoint_file(const std::string& path);

/// Checks, without creating or writing anything, that `dir` can be a --checkpoint-dir: a directory
/// this process may write in, or a path whose nearest existing parent is one.
/// \throws UsageError naming --checkpoint-dir and what is wrong.
void check_checkpoint_dir(const std::string& dir);

/// True for a file name a checkpoint directory keeps: a checkpoint (checkpoint-eNNNNNN.ckpt), a
/// temporary file of one, or the lock (.lock). An output of the run may not take such a name there.
bool is_checkpoint_dir_file(const std::string& name);

/// The one run that writes into a checkpoint directory: an exclusive lock (flock) on DIR/.lock,
/// which holds its owner's pid and command line. The kernel releases it when the owner's process
/// ends however it ends, so a killed run leaves no stale lock. Thread-safety: none needed.
class CheckpointLock {
 public:
  /// \throws UsageError naming --checkpoint-dir and the holder (pid, command) when another process
  /// holds it, or the reason it cannot be created.
  explicit CheckpointLock(const std::string& dir);

 private:
  UniqueFd fd_;
};

/// A run's checkpoint directory: checkpoint-eNNNNNN.ckpt after epoch NNNNNN (1-based: the epochs
/// done). Thread-safety: none needed (one trainer thread).
class CheckpointDir {
 public:
  /// The newest two are kept: the one being replaced stays until its successor is complete, and
  /// one more survives a corruption found only on reading.
  static constexpr int kKeep = 2;

  /// Creates `dir` when missing and checks that a file can be created in it, and that nothing
  /// named as a checkpoint in it is other than a regular file.
  /// \throws UsageError naming --checkpoint-dir and the reason.
  explicit CheckpointDir(std::string dir);

  const std::string& path() const { return dir_; }
  /// The file of the checkpoint after `epochs_done` epochs.
  std::string file_for(std::int64_t epochs_done) const;
  /// Writes the checkpoint after `epochs_done` epochs (write_checkpoint_file), then removes all but
  /// the newest kKeep and any stale temporary file. Returns its path.
  std::string write(std::int64_t epochs_done, const Checkpoint& checkpoint,
                    std::uint64_t* bytes = nullptr) const;
  /// The newest complete checkpoint (the highest epoch of a file named as file_for names them;
  /// temporary files and other names ignored), or nullopt when there is none.
  std::optional<std::string> newest() const;
  /// The checkpoints it holds, oldest first.
  std::vector<std::string> files() const;
  /// Deletes every checkpoint it holds and every temporary file of one (--start-over). Returns how
  /// many checkpoints went. \throws UsageError naming the file that could not be deleted.
  int remove_all() const;

 private:
  std::vector<std::pair<std::int64_t, std::string>> list() const;  // (epoch, path), ascending
  std::string dir_;
};

/// Fields of `expected` that `found` lacks or holds differently, as "name: checkpoint X, run Y"
/// lines joined by "; " (empty when they match): what a resumed run must share with its checkpoint.
std::string fingerprint_mismatch(const nlohmann::ordered_json& found,
                                 const nlohmann::ordered_json& expected);

}  // namespace workload
