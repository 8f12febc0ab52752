// Tests for a run's output files: a regular file is replaced atomically (its permissions kept, no
// staging file left), a new one gets the umask's permissions, a symlink is followed, a character
// device is written in place and stays one, a FIFO, a socket or a directory is refused up front and
// left as it was, a `PATH.tmp` in the way changes nothing, an output's target is told through
// symlinks, and two paths naming one file are recognised.
#include "lib/core/output_file.h"

#include <gtest/gtest.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "lib/core/usage_error.h"
#include "tests/support/test_util.h"

namespace workload {
namespace {

namespace fs = std::filesystem;

std::string read(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

std::size_t entries(const fs::path& dir) {
  return static_cast<std::size_t>(std::distance(fs::directory_iterator(dir), {}));
}

std::string refusal(const std::string& path) {
  try {
    check_output_file("--report", path);
  } catch (const UsageError& e) {
    return e.what();
  }
  return "";
}

TEST(OutputFileTest, ARegularFileIsReplacedWithItsPermissionsAndNoStagingLeft) {
  test_util::TempDir tmp;
  const fs::path p = tmp / "r.json";
  write_output_file("--report", p.string(), "one");
  EXPECT_EQ(read(p), "one");
  ::chmod(p.c_str(), 0640);
  write_output_file("--report", p.string(), "two");
  EXPECT_EQ(read(p), "two");
  struct stat st {};
  ASSERT_EQ(::stat(p.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u);
  EXPECT_EQ(entries(tmp.path()), 1u);
}

TEST(OutputFileTest, ANewFileGetsTheUmasksPermissions) {
  test_util::TempDir tmp;
  const mode_t old = ::umask(027);
  write_output_file("--report", (tmp / "new.json").string(), "one");
  ::umask(old);
  struct stat st {};
  ASSERT_EQ(::stat((tmp / "new.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0640u) << "0666 less the umask 027, as open() would create it";
}

TEST(OutputFileTest, AnOutputsTargetFollowsEvenADanglingLinkAndIsAbsolute) {
  test_util::TempDir tmp;
  fs::create_directories(tmp / "d");
  fs::create_symlink("d/later.json", tmp / "link.json");  // relative, and not there yet
  EXPECT_EQ(output_target((tmp / "link.json").string()),
            fs::canonical(tmp.path()) / "d" / "later.json");
  EXPECT_EQ(output_target((tmp / "d" / ".." / "x.json").string()),
            fs::canonical(tmp.path()) / "x.json");
  EXPECT_TRUE(output_target("x.json").is_absolute());
  fs::create_symlink("loop", tmp / "loop");
  EXPECT_TRUE(output_target((tmp / "loop").string()).empty());
}

TEST(OutputFileTest, ASymlinkIsFollowedAndStaysALink) {
  test_util::TempDir tmp;
  fs::create_directory(tmp / "real");
  test_util::write_text(tmp / "real" / "r.json", "old");
  fs::create_symlink(tmp / "real" / "r.json", tmp / "link.json");
  fs::create_symlink("real/new.json", tmp / "dangling.json");  // relative, to a file not yet there
  write_output_file("--report", (tmp / "link.json").string(), "new");
  write_output_file("--report", (tmp / "dangling.json").string(), "made");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(tmp / "link.json")));
  EXPECT_EQ(read(tmp / "real" / "r.json"), "new");
  EXPECT_TRUE(fs::is_symlink(fs::symlink_status(tmp / "dangling.json")));
  EXPECT_EQ(read(tmp / "real" / "new.json"), "made");
  EXPECT_EQ(entries(tmp / "real"), 2u) << "the staging files went beside the targets and are gone";
  EXPECT_TRUE(same_output_file((tmp / "link.json").string(), (tmp / "real" / "r.json").string()));
}

TEST(OutputFileTest, ACharacterDeviceIsWrittenInPlaceAndStaysADevice) {
  EXPECT_EQ(refusal("/dev/null"), "");
  write_output_file("--report", "/dev/null", "into the void");
  struct stat st {};
  ASSERT_EQ(::stat("/dev/null", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode)) << "/dev/null must never be replaced by a file";
  try {
    write_output_file("--report", "/dev/full", "no room");
    FAIL() << "/dev/full takes no bytes";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("--report /dev/full: write failed"), std::string::npos)
        << e.what();
  }
  ASSERT_EQ(::stat("/dev/full", &st), 0);
  EXPECT_TRUE(S_ISCHR(st.st_mode));
}

TEST(OutputFileTest, AFifoASocketOrADirectoryIsRefusedAndLeftAlone) {
  test_util::TempDir tmp;
  const fs::path fifo = tmp / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_NE(refusal(fifo.string()).find("is a named pipe"), std::string::npos);
  EXPECT_THROW(OutputFile("--report", fifo.string()), UsageError);
  EXPECT_TRUE(fs::is_fifo(fifo));

  const fs::path sock = tmp / "sock";
  const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::snprintf(addr.sun_path, sizeof(addr.sun_path), "%s", sock.c_str());
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_NE(refusal(sock.string()).find("is a socket"), std::string::npos);
  ::close(fd);

  EXPECT_EQ(refusal(tmp.path().string()), "--report: " + tmp.path().string() + " is a directory");
  EXPECT_NE(refusal((tmp / "no" / "r.json").string()).find("does not exist"), std::string::npos);
  EXPECT_EQ(refusal(""), "--report: expected a file path, got ''");
  fs::create_symlink("loop", tmp / "loop");
  EXPECT_NE(refusal((tmp / "loop").string()).find("too many levels of symlinks"),
            std::string::npos);
}

TEST(OutputFileTest, ADirectoryNamedLikeATemporaryFileIsNoObstacle) {
  test_util::TempDir tmp;
  const fs::path p = tmp / "r.json";
  fs::create_directory(tmp / "r.json.tmp");
  EXPECT_EQ(refusal(p.string()), "");
  write_output_file("--report", p.string(), "fine");
  EXPECT_EQ(read(p), "fine");
  EXPECT_TRUE(fs::is_directory(tmp / "r.json.tmp"));
}

TEST(OutputFileTest, AStagingFileNotCommittedIsRemoved) {
  test_util::TempDir tmp;
  const fs::path p = tmp / "trace.json";
  {
    OutputFile out("--torch-profiler-trace", p.string());
    EXPECT_EQ(fs::path(out.staging_path()).parent_path(), tmp.path());
    test_util::write_text(out.staging_path(), "half");
  }
  EXPECT_EQ(entries(tmp.path()), 0u);
  EXPECT_FALSE(fs::exists(p));
}

TEST(OutputFileTest, TwoPathsToOneFileAreTheSame) {
  test_util::TempDir tmp;
  EXPECT_TRUE(same_output_file((tmp / "a.json").string(), (tmp / "." / "a.json").string()));
  EXPECT_TRUE(same_output_file((tmp / "a.json").string(), (tmp / "x" / ".." / "a.json").string()));
  EXPECT_FALSE(same_output_file((tmp / "a.json").string(), (tmp / "b.json").string()));
}

TEST(OutputFileTest, AnUnwritableDirectoryIsNamed) {
  if (::geteuid() == 0) GTEST_SKIP() << "root writes anywhere";
  test_util::TempDir tmp;
  fs::create_directory(tmp / "ro");
  ::chmod((tmp / "ro").c_str(), 0500);
  EXPECT_NE(refusal((tmp / "ro" / "r.json").string()).find("is not writable"), std::string::npos);
  ::chmod((tmp / "ro").c_str(), 0700);
}

}  // namespace
}  // namespace workload
