// Output files of a run (--report, --torch-profiler-trace): checked before the run, written at its
// end without ever replacing what is not a regular file.
#pragma once

#include <filesystem>
#include <string>

namespace workload {

/// Checks, before a run, that the output of `flag` can be written at `path` at its end. A symlink
/// at `path` is followed (what is written is its target). The target may be absent or a regular
/// file (in a writable directory: it is replaced atomically), or a character device such as
/// /dev/null (written in place, never replaced). \throws UsageError naming `flag` and the path for
/// an empty path, a missing or unwritable directory, a directory, a FIFO, a socket, a block device,
/// an unwritable file or a symlink loop.
void check_output_file(const std::string& flag, const std::string& path);

/// The file an output at `path` is written to: absolute, its symlinks followed (a dangling one's
/// target included), `.` and `..` resolved. Empty when that cannot be told (a symlink loop).
std::filesystem::path output_target(const std::string& path);

/// True when the outputs at `a` and `b` would be the same file (after symlinks, `.` and `..`).
bool same_output_file(const std::string& a, const std::string& b);

/// One output file being written: a staging file to write first (by this program, or by a library
/// that takes a path, as Kineto's save does), then commit() puts it in place. For a regular or
/// absent target the staging file is a new file beside the target (so the rename stays on one file
/// system), fsynced and renamed over it; for a character device it is a temporary file whose bytes
/// are then written into the device in place. A staging file never collides with another file
/// (created exclusively, under a hidden unique name). Not copyable; one thread.
class OutputFile {
 public:
  /// Resolves `path` and creates the staging file. \throws UsageError as check_output_file();
  /// std::runtime_error naming `flag` and the path when the staging file cannot be created.
  OutputFile(std::string flag, std::string path);
  /// Removes the staging file unless committed.
  ~OutputFile();
  OutputFile(const OutputFile&) = delete;
  OutputFile& operator=(const OutputFile&) = delete;

  /// Where to write the contents before commit().
  const std::string& staging_path() const { return staging_; }
  /// The file the contents end up in (the path given, or its symlink's target).
  const std::string& target() const { return target_; }
  /// Puts the staging file's contents in place. \throws std::runtime_error naming `flag` and the
  /// path (with the system's reason) when it cannot.
  void commit();

 private:
  [[noreturn]] void fail(const std::string& what) const;

  std::string flag_;
  std::string path_;
  std::string target_;
  std::string staging_;
  bool device_ = false;
  bool committed_ = false;
};

/// Writes `contents` to the output file of `flag` at `path` as OutputFile does.
/// \throws as OutputFile, and std::runtime_error naming the path when the write fails.
void write_output_file(const std::string& flag, const std::string& path,
                       const std::string& contents);

}  // namespace workload
