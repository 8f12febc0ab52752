// Tests for checkpoint files: the round trip, atomic replacement, and every way a file can be bad;
// the names a checkpoint directory keeps.
#include "lib/run/checkpoint.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "lib/core/usage_error.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

namespace fs = std::filesystem;

Checkpoint sample() {
  Checkpoint c;
  c.meta["epochs_done"] = 2;
  c.meta["fingerprint"] = {{"seed", 7}, {"batch_size", 4}};
  c.tensors.emplace_back("param/w", torch::arange(12, torch::kFloat32).view({3, 4}));
  // channels_last, as the model's convolution weights are
  c.tensors.emplace_back("param/conv",
                         torch::randn({2, 3, 2, 2}).contiguous(torch::MemoryFormat::ChannelsLast));
  c.tensors.emplace_back("buffer/n", torch::tensor({5}, torch::kInt64));
  return c;
}

std::string read_all(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}
void write_all(const fs::path& p, const std::string& bytes) {
  std::ofstream out(p, std::ios::binary | std::ios::trunc);
  out << bytes;
}

// The message of the CheckpointError `f` throws (fails when it throws nothing or another type).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const CheckpointError& e) {
    return e.what();
  }
  ADD_FAILURE() << "no CheckpointError";
  return {};
}

TEST(CheckpointFile, RoundTripKeepsMetaNamesValuesAndLayout) {
  test_util::TempDir tmp;
  const std::string path = (tmp.path() / "c.ckpt").string();
  const Checkpoint c = sample();
  EXPECT_GT(write_checkpoint_file(path, c), kCheckpointHeaderBytes);
  EXPECT_FALSE(fs::exists(path + ".tmp"));
  const Checkpoint back = read_checkpoint_file(path);
  EXPECT_EQ(back.meta, c.meta);
  ASSERT_EQ(back.tensors.size(), c.tensors.size());
  for (std::size_t i = 0; i < c.tensors.size(); ++i) {
    EXPECT_EQ(back.tensors[i].first, c.tensors[i].first);
    EXPECT_TRUE(torch::equal(back.tensors[i].second, c.tensors[i].second)) << i;
    EXPECT_EQ(back.tensors[i].second.strides(), c.tensors[i].second.strides()) << i;
  }
}

TEST(CheckpointFile, TruncatedCorruptForeignAndOtherVersionAreNamed) {
  test_util::TempDir tmp;
  const fs::path good = tmp.path() / "good.ckpt";
  write_checkpoint_file(good.string(), sample());
  const std::string bytes = read_all(good);

  const fs::path cut = tmp.path() / "cut.ckpt";
  write_all(cut, bytes.substr(0, bytes.size() / 2));
  std::string m = error_of([&] { read_checkpoint_file(cut.string()); });
  EXPECT_NE(m.find(cut.string()), std::string::npos) << m;
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;

  const fs::path header_only = tmp.path() / "header.ckpt";
  write_all(header_only, bytes.substr(0, 10));
  m = error_of([&] { read_checkpoint_file(header_only.string()); });
  EXPECT_NE(m.find("truncated"), std::string::npos) << m;

  const fs::path flipped = tmp.path() / "flipped.ckpt";
  std::string corrupt = bytes;
  corrupt[corrupt.size() - 100] ^= 0x40;
  write_all(flipped, corrupt);
  m = error_of([&] { read_checkpoint_file(flipped.string()); });
  EXPECT_NE(m.find(flipped.string()), std::string::npos) << m;
  EXPECT_NE(m.find("corrupt"), std::string::npos) << m;

  const fs::path foreign = tmp.path() / "foreign.ckpt";
  write_all(foreign, "PK\x03\x04 a zip file, or a PyTorch checkpoint, but not ours");
  m = error_of([&] { read_checkpoint_file(foreign.string()); });
  EXPECT_NE(m.find("not a train_resnet50 checkpoint"), std::string::npos) << m;

  const fs::path empty = tmp.path() / "empty.ckpt";
  write_all(empty, "");
  m = error_of([&] { read_checkpoint_file(empty.string()); });
  EXPECT_NE(m.find("not a train_resnet50 checkpoint"), std::string::npos) << m;

  const fs::path future = tmp.path() / "future.ckpt";
  std::string other = bytes;
  other[8] = 9;  // the version's low byte
  write_all(future, other);
  m = error_of([&] { read_checkpoint_file(future.string()); });
  EXPECT_NE(m.find("version 9"), std::string::npos) << m;

  m = error_of([&] { read_checkpoint_file((tmp.path() / "missing.ckpt").string()); });
  EXPECT_NE(m.find("cannot open"), std::string::npos) << m;
}

TEST(CheckpointFile, AFailedWriteLeavesThePreviousFileIntact) {
  test_util::TempDir tmp;
  const fs::path path = tmp.path() / "c.ckpt";
  write_checkpoint_file(path.string(), sample());
  const std::string before = read_all(path);
  // A full disk: the temporary file (this process's, NAME.tmp.PID) is /dev/full, whose writes fail
  // with ENOSPC.
  if (!fs::exists("/dev/full")) GTEST_SKIP() << "no /dev/full on this machine";
  fs::create_symlink("/dev/full", path.string() + ".tmp." + std::to_string(::getpid()));
  Checkpoint bigger = sample();
  bigger.tensors.emplace_back("param/big", torch::zeros({1 << 16}));
  const std::string m = error_of([&] { write_checkpoint_file(path.string(), bigger); });
  EXPECT_NE(m.find("No space left"), std::string::npos) << m;
  EXPECT_NE(m.find("is left as it was"), std::string::npos) << m;
  EXPECT_EQ(read_all(path), before);
  for (const auto& entry : fs::directory_iterator(path.parent_path())) {
    EXPECT_EQ(entry.path().filename().string().find(".tmp"), std::string::npos) << entry.path();
  }
}

TEST(CheckpointDir, NewestIgnoresTemporaryAndForeignNamesAndKeepsTwo) {
  test_util::TempDir tmp;
  const CheckpointDir dir((tmp.path() / "ckpt").string());
  EXPECT_FALSE(dir.newest());
  for (int e = 1; e <= 3; ++e) dir.write(e, sample());
  EXPECT_EQ(dir.newest(), dir.file_for(3));
  EXPECT_FALSE(fs::exists(dir.file_for(1)));  // all but the newest two removed
  EXPECT_TRUE(fs::exists(dir.file_for(2)));
  // A write killed half way leaves only its temporary file: never taken for a checkpoint (an older
  // build's NAME.tmp, this one's NAME.tmp.PID).
  write_all(dir.file_for(4) + ".tmp", read_all(dir.file_for(3)).substr(0, 50));
  write_all(dir.file_for(4) + ".tmp.4242", read_all(dir.file_for(3)).substr(0, 50));
  write_all(tmp.path() / "ckpt" / "checkpoint-e000009.ckpt.bak", "x");
  write_all(tmp.path() / "ckpt" / "checkpoint-eX.ckpt", "x");
  EXPECT_EQ(dir.newest(), dir.file_for(3));
  dir.write(4, sample());  // and the next write clears it
  EXPECT_EQ(dir.newest(), dir.file_for(4));
  EXPECT_FALSE(fs::exists(dir.file_for(4) + ".tmp"));
  EXPECT_FALSE(fs::exists(dir.file_for(4) + ".tmp.4242"));
  EXPECT_TRUE(fs::exists(tmp.path() / "ckpt" / "checkpoint-e000009.ckpt.bak")) << "not ours";
  EXPECT_EQ(dir.files(), (std::vector<std::string>{dir.file_for(3), dir.file_for(4)}));
  // --start-over: every checkpoint and temporary file of one goes, nothing else.
  write_all(dir.file_for(5) + ".tmp.77", "x");
  EXPECT_EQ(dir.remove_all(), 2);
  EXPECT_FALSE(dir.newest());
  EXPECT_FALSE(fs::exists(dir.file_for(5) + ".tmp.77"));
  EXPECT_TRUE(fs::exists(tmp.path() / "ckpt" / "checkpoint-eX.ckpt"));
}

// The header is checked against the file's size before anything else is read: a huge file that is
// no checkpoint (sparse here: 30 GB of holes) is refused at once, not read whole.
TEST(CheckpointDir, TheNamesItKeepsAreTold) {
  for (const char* kept : {"checkpoint-e000001.ckpt", "checkpoint-e123456789012.ckpt", ".lock",
                           "checkpoint-e000002.ckpt.tmp", "checkpoint-e000002.ckpt.tmp.4242"}) {
    EXPECT_TRUE(is_checkpoint_dir_file(kept)) << kept;
  }
  for (const char* other :
       {"report.json", "checkpoint-e.ckpt", "checkpoint-e0001x.ckpt",
        "checkpoint-e000001.ckpt.json", "checkpoint-e000001.ckpt.tmp.x", ".lock2", "lock", ""}) {
    EXPECT_FALSE(is_checkpoint_dir_file(other)) << other;
  }
}

TEST(CheckpointFile, AHugeFileIsRefusedFromItsHeaderAlone) {
  test_util::TempDir tmp;
  const fs::path huge = tmp.path() / "checkpoint-e000009.ckpt";
  write_all(huge, "");
  fs::resize_file(huge, std::uintmax_t{30} << 30);
  std::string m = error_of([&] { read_checkpoint_file(huge.string()); });
  EXPECT_NE(m.find("checkpoint " + huge.string() + ": not a train_resnet50 checkpoint"),
            std::string::npos)
      << m;
  // A real header whose facts claim more than any checkpoint holds, backed by as many bytes.
  const fs::path path = tmp.path() / "c.ckpt";
  write_checkpoint_file(path.string(), sample());
  std::string bytes = read_all(path);
  const std::uint64_t meta = (std::uint64_t{1} << 30) - 64;  // a GiB of facts
  for (int i = 0; i < 8; ++i) bytes[12 + i] = static_cast<char>((meta >> (8 * i)) & 0xFF);
  for (int i = 0; i < 8; ++i) bytes[20 + i] = 0;  // and no payload
  write_all(path, bytes.substr(0, kCheckpointHeaderBytes));
  fs::resize_file(path, kCheckpointHeaderBytes + meta);
  m = error_of([&] { read_checkpoint_file(path.string()); });
  EXPECT_NE(m.find("more than the 67108864 any checkpoint holds"), std::string::npos) << m;
  // A directory under a checkpoint's name: not a file.
  fs::create_directory(tmp.path() / "dir.ckpt");
  m = error_of([&] { read_checkpoint_file((tmp.path() / "dir.ckpt").string()); });
  EXPECT_NE(m.find("not a regular file"), std::string::npos) << m;
}

// One run writes into a directory: a second is refused at once, naming the holder; the lock goes
// with its holder.
TEST(CheckpointLock, ASecondRunIsRefusedNamingTheFirst) {
  test_util::TempDir tmp;
  const std::string dir = tmp.path().string();
  {
    const CheckpointLock first(dir);
    try {
      CheckpointLock second(dir);
      FAIL() << "no UsageError";
    } catch (const UsageError& e) {
      const std::string m = e.what();
      EXPECT_NE(
          m.find("--checkpoint-dir " + dir + ": another run is writing checkpoints there (pid " +
                 std::to_string(::getpid()) + ": "),
          std::string::npos)
          << m;
      EXPECT_NE(m.find("checkpoint_test"), std::string::npos) << "its command line: " << m;
    }
  }
  EXPECT_NO_THROW(CheckpointLock{dir}) << "released with its holder";
}

TEST(CheckpointDir, ANonFileUnderACheckpointsNameIsRefusedAtTheStart) {
  test_util::TempDir tmp;
  fs::create_directories(tmp.path() / "checkpoint-e000003.ckpt");
  try {
    CheckpointDir{tmp.path().string()};
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("checkpoint-e000003.ckpt is named as a checkpoint but is "
                                         "not a file"),
              std::string::npos)
        << e.what();
  }
}

// --print-config and profile.sh's --dry-run check the directory without making it.
TEST(CheckpointDir, TheCheckMakesNothing) {
  test_util::TempDir tmp;
  const fs::path missing = tmp.path() / "a" / "b";
  EXPECT_NO_THROW(check_checkpoint_dir(missing.string()));
  EXPECT_FALSE(fs::exists(tmp.path() / "a"));
  const fs::path file = tmp.path() / "file";
  write_all(file, "x");
  EXPECT_THROW(check_checkpoint_dir(file.string()), UsageError);
  EXPECT_THROW(check_checkpoint_dir((file / "sub").string()), UsageError);
}

TEST(CheckpointDir, AnUnusableDirectoryIsAUsageErrorNamingTheFlag) {
  test_util::TempDir tmp;
  const fs::path file = tmp.path() / "file";
  write_all(file, "x");
  try {
    CheckpointDir((file / "sub").string());
    FAIL() << "no UsageError";
  } catch (const UsageError& e) {
    EXPECT_NE(std::string(e.what()).find("--checkpoint-dir " + (file / "sub").string()),
              std::string::npos)
        << e.what();
  }
  EXPECT_THROW(CheckpointDir(file.string()), UsageError);  // a file, not a directory
  if (::geteuid() != 0) {                                  // root writes anywhere
    const fs::path locked = tmp.path() / "locked";
    fs::create_directory(locked);
    fs::permissions(locked, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THROW(CheckpointDir(locked.string()), UsageError);
    fs::permissions(locked, fs::perms::owner_all);
  }
}

TEST(CheckpointFingerprint, NamesEveryFieldThatDiffers) {
  const nlohmann::ordered_json run = {{"seed", 7}, {"batch_size", 4}, {"classes", 3}};
  EXPECT_EQ(fingerprint_mismatch(run, run), "");
  const nlohmann::ordered_json other = {{"seed", 8}, {"batch_size", 4}};
  const std::string m = fingerprint_mismatch(other, run);
  EXPECT_NE(m.find("seed: checkpoint 8, run 7"), std::string::npos) << m;
  EXPECT_NE(m.find("classes: checkpoint none, run 3"), std::string::npos) << m;
  EXPECT_EQ(m.find("batch_size"), std::string::npos) << m;
}

}  // namespace
}  // namespace workload
