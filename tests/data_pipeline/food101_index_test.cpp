// Tests for Food101Index: the layout, tolerated formatting, and a file:line error for each defect.
#include "data_pipeline/food101_index.h"

#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "data_pipeline/data_error.h"
#include "tests/support/test_util.h"

namespace data_pipeline {
namespace {

namespace fs = std::filesystem;
using test_util::TempDir;
using test_util::write_text;

// A minimal dataset: two classes, tiny placeholder image files (the index does not decode).
class Food101IndexTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = tmp_.path() / "food-101";
    write_text(dir_ / "meta" / "classes.txt", "apple_pie\nbaklava\n");
    write_text(dir_ / "meta" / "train.txt", "apple_pie/1\nbaklava/2\napple_pie/3\n");
    write_text(dir_ / "meta" / "test.txt", "baklava/4\n");
    for (const char* f : {"apple_pie/1", "baklava/2", "apple_pie/3", "baklava/4"}) {
      write_text(dir_ / "images" / (std::string(f) + ".jpg"), "x");
    }
  }
  // Expects load() to throw a DataError whose message contains every fragment.
  void expect_error(const std::vector<std::string>& fragments, const std::string& split = "train",
                    const fs::path& root = {}) {
    try {
      Food101Index::load(root.empty() ? tmp_.path() : root, split);
      FAIL() << "expected a DataError";
    } catch (const DataError& e) {
      for (const auto& f : fragments)
        EXPECT_NE(std::string(e.what()).find(f), std::string::npos)
            << "message '" << e.what() << "' lacks '" << f << "'";
    }
  }
  TempDir tmp_;
  fs::path dir_;
};

TEST_F(Food101IndexTest, ReadsSplitWithLabelsFromClassOrder) {
  const auto index = Food101Index::load(tmp_.path(), "train");
  ASSERT_EQ(index.size(), 3);
  EXPECT_EQ(index.num_classes(), 2);
  EXPECT_EQ(index[0].label, 0);
  EXPECT_EQ(index[1].label, 1);
  EXPECT_EQ(index[2].label, 0);
  EXPECT_EQ(index[1].path, dir_ / "images" / "baklava" / "2.jpg");
  EXPECT_EQ(Food101Index::load(tmp_.path(), "test").size(), 1);
}

TEST_F(Food101IndexTest, RootMayBeTheFood101DirectoryItself) {
  EXPECT_EQ(Food101Index::load(dir_, "train").size(), 3);
}

TEST_F(Food101IndexTest, ToleratesCrlfBlankLinesAndMissingFinalNewline) {
  write_text(dir_ / "meta" / "classes.txt", "\r\napple_pie\r\n\r\n  baklava  \r\n\n");
  write_text(dir_ / "meta" / "train.txt", "apple_pie/1\r\n\r\n\nbaklava/2\r\napple_pie/3");
  const auto index = Food101Index::load(tmp_.path(), "train");
  ASSERT_EQ(index.size(), 3);
  EXPECT_EQ(index.classes()[1], "baklava");
  EXPECT_EQ(index[1].label, 1);
}

TEST_F(Food101IndexTest, MissingRoot) {
  expect_error({(tmp_.path() / "nope").string(), "not found"}, "train", tmp_.path() / "nope");
}

TEST_F(Food101IndexTest, RootWithoutMetaDirectory) {
  TempDir empty;
  expect_error({empty.path().string(), "Food-101 layout"}, "train", empty.path());
}

TEST_F(Food101IndexTest, MissingClassesFile) {
  fs::remove(dir_ / "meta" / "classes.txt");
  expect_error({"meta/classes.txt", "not found"});
}

TEST_F(Food101IndexTest, MissingSplitFiles) {
  fs::remove(dir_ / "meta" / "train.txt");
  expect_error({"meta/train.txt", "not found"}, "train");
  fs::remove(dir_ / "meta" / "test.txt");
  expect_error({"meta/test.txt", "not found"}, "test");
}

TEST_F(Food101IndexTest, EmptySplit) {
  write_text(dir_ / "meta" / "train.txt", "\n\r\n  \n");
  expect_error({"meta/train.txt", "lists no images"});
}

TEST_F(Food101IndexTest, UnknownClassNamesFileAndLine) {
  write_text(dir_ / "meta" / "train.txt", "apple_pie/1\n\nsushi/9\n");
  expect_error({"meta/train.txt:3", "unknown class 'sushi'"});
}

TEST_F(Food101IndexTest, ImageListedButAbsent) {
  write_text(dir_ / "meta" / "train.txt", "apple_pie/1\napple_pie/404\n");
  expect_error({"meta/train.txt:2", "image not found", "apple_pie/404.jpg"});
}

TEST_F(Food101IndexTest, DirectoryWhereAnImageShouldBe) {
  fs::create_directories(dir_ / "images" / "apple_pie" / "5.jpg");
  write_text(dir_ / "meta" / "train.txt", "apple_pie/5\n");
  expect_error({"meta/train.txt:1", "directory", "apple_pie/5.jpg"});
}

TEST_F(Food101IndexTest, MalformedLine) {
  write_text(dir_ / "meta" / "train.txt", "apple_pie/1\njust_a_name\n");
  expect_error({"meta/train.txt:2", "expected '<class>/<image id>'"});
}

TEST_F(Food101IndexTest, DuplicateAndEmptyClassList) {
  write_text(dir_ / "meta" / "classes.txt", "apple_pie\nbaklava\napple_pie\n");
  expect_error({"meta/classes.txt:3", "duplicate class"});
  write_text(dir_ / "meta" / "classes.txt", "\n\n");
  expect_error({"meta/classes.txt", "no classes"});
}

TEST_F(Food101IndexTest, MetaFileThatIsADirectory) {
  fs::remove(dir_ / "meta" / "train.txt");
  fs::create_directories(dir_ / "meta" / "train.txt");
  expect_error({"meta/train.txt", "directory"});
}

// Ends the test binary (SIGALRM) if it is still running after `seconds`: a regression that blocks
// in open() fails within a minute, not at CTest's TIMEOUT.
struct HangGuard {
  explicit HangGuard(unsigned seconds) { alarm(seconds); }
  ~HangGuard() { alarm(0); }
};

TEST_F(Food101IndexTest, MetaFileThatIsAFifoIsRefusedWithoutWaitingForAWriter) {
  const HangGuard guard(60);
  for (const char* meta : {"classes.txt", "train.txt"}) {
    const fs::path file = dir_ / "meta" / meta;
    const std::string kept =
        meta == std::string("classes.txt") ? "apple_pie\nbaklava\n" : "apple_pie/1\nbaklava/2\n";
    fs::remove(file);
    ASSERT_EQ(mkfifo(file.c_str(), 0600), 0) << std::strerror(errno);
    expect_error({"meta/" + std::string(meta), ": expected a regular file, got a FIFO"});
    fs::remove(file);
    write_text(file, kept);
  }
  EXPECT_EQ(Food101Index::load(tmp_.path(), "train").size(), 2);
}

// A list file far larger than any (a 30 GB file of nothing here, sparse) is refused before it is
// read, not read whole.
TEST_F(Food101IndexTest, AListLargerThanAnyIsRefusedUnread) {
  const HangGuard guard(60);
  const fs::path file = dir_ / "meta" / "train.txt";
  fs::resize_file(file, std::uintmax_t{30} << 30);
  expect_error(
      {"meta/train.txt: 32212254720 bytes, more than the 268435456 a split or class list "
       "holds"});
}

TEST_F(Food101IndexTest, UnknownSplitName) {
  expect_error({"split", "'validation'"}, "validation");
}

TEST_F(Food101IndexTest, ClassCountComesFromClassesFile) {
  write_text(dir_ / "meta" / "classes.txt", "apple_pie\nbaklava\nc3\nc4\nc5\n");
  EXPECT_EQ(Food101Index::load(tmp_.path(), "train").num_classes(), 5);
}

}  // namespace
}  // namespace data_pipeline
