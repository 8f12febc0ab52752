// Tests for the exit statuses' one home: each way of ending has its status, and the table of
// docs/failures.md (section "Exit statuses") is this unit's table, row for row.
#include "lib/core/exit_status.h"

#include <gtest/gtest.h>

#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "data_pipeline/data_error.h"
#include "lib/core/usage_error.h"

namespace workload {
namespace {

TEST(ExitStatusTest, EachEndingHasItsStatus) {
  EXPECT_EQ(exit_status(Ending::kCompleted), 0);
  EXPECT_EQ(exit_status(Ending::kFailed), 1);
  EXPECT_EQ(exit_status(Ending::kUsage), 2);
  EXPECT_EQ(exit_status(Ending::kPeerLost), 3);
  EXPECT_EQ(exit_status(Ending::kStopped, SIGINT), 130);
  EXPECT_EQ(exit_status(Ending::kStopped, SIGTERM), 143);
}

TEST(ExitStatusTest, RunMainMapsWhatEscapesToTheStatuses) {
  std::signal(SIGPIPE, SIG_DFL);
  EXPECT_EQ(run_main("p", [] { return 7; }), 7);
  // SIGPIPE is ignored from then on: a write to a closed pipe fails with EPIPE, and the program
  // goes on to write its report.
  struct sigaction now {};
  ASSERT_EQ(::sigaction(SIGPIPE, nullptr, &now), 0);
  EXPECT_EQ(now.sa_handler, SIG_IGN);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);
  errno = 0;
  EXPECT_EQ(::write(fds[1], "x", 1), -1);
  EXPECT_EQ(errno, EPIPE);
  ::close(fds[1]);
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main("p", []() -> int { throw UsageError("--x: bad"); }), 2);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "p: --x: bad\nTry 'p --help'.\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main(
                "p", []() -> int { throw data_pipeline::DataError("a.jpg: bad"); }, "p (rank 1)"),
            1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "p (rank 1): error: a.jpg: bad\n");
  testing::internal::CaptureStderr();
  EXPECT_EQ(run_main("p", []() -> int { throw std::runtime_error("boom"); }), 1);
  EXPECT_EQ(testing::internal::GetCapturedStderr(), "p: error: boom\n");
}

// The rows of the page's table under "## Exit statuses": "| status | who | meaning |".
std::vector<std::vector<std::string>> page_rows() {
  std::ifstream in(WORKLOAD_EXIT_STATUS_PAGE);
  if (!in) throw std::runtime_error(std::string("cannot read ") + WORKLOAD_EXIT_STATUS_PAGE);
  std::vector<std::vector<std::string>> rows;
  std::string line;
  bool section = false;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) section = line == "## Exit statuses";
    if (!section || line.rfind("| ", 0) != 0 || line.rfind("|---", 0) == 0) continue;
    std::vector<std::string> cells;
    std::stringstream cut(line.substr(1));
    std::string cell;
    while (std::getline(cut, cell, '|')) {
      const auto a = cell.find_first_not_of(' ');
      const auto b = cell.find_last_not_of(' ');
      cells.push_back(a == std::string::npos ? "" : cell.substr(a, b - a + 1));
    }
    rows.push_back(cells);
  }
  return rows;
}

TEST(ExitStatusTest, ThePagesTableIsThisTable) {
  auto rows = page_rows();
  ASSERT_FALSE(rows.empty()) << "no table under '## Exit statuses' in "
                             << WORKLOAD_EXIT_STATUS_PAGE;
  EXPECT_EQ(rows.front(), (std::vector<std::string>{"status", "who", "meaning"}));
  rows.erase(rows.begin());
  const std::vector<ExitStatusRow>& table = exit_status_table();
  ASSERT_EQ(rows.size(), table.size())
      << "rows in " << WORKLOAD_EXIT_STATUS_PAGE << " vs lib/core/exit_status.cpp";
  for (std::size_t i = 0; i < table.size(); ++i) {
    EXPECT_EQ(rows[i], (std::vector<std::string>{table[i].status, table[i].who, table[i].meaning}))
        << "row " << i + 1;
  }
}

}  // namespace
}  // namespace workload
