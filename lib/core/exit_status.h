// The one home of exit statuses: how each way of ending maps to a status, the table of every status
// any program (app/) or script (scripts/) of the project exits with, and the top-level catch of the
// programs' mains.
#pragma once

#include <functional>
#include <string>
#include <vector>

namespace workload {

/// How a program ended, as far as its exit status tells.
enum class Ending {
  kCompleted,  ///< 0
  kFailed,     ///< 1: bad data (the file named), a runtime error, a failed step
  kUsage,      ///< 2: a flag, a variable or the environment cannot run (named)
  kPeerLost,   ///< 3: a rank of a data-parallel run ended because a peer was lost
  kStopped,    ///< 128 + the signal that stopped it (130 SIGINT, 143 SIGTERM)
};

inline constexpr int kExitOk = 0;
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;
inline constexpr int kExitPeerLost = 3;

/// The status of `ending`; `signal` is the signal's number for Ending::kStopped (0 for a stop
/// requested without one gives 128).
int exit_status(Ending ending, int signal = 0);

/// One row of the table: the status as docs/failures.md writes it ("0", "128 + N", "the child's"),
/// who exits with it, and what it means.
struct ExitStatusRow {
  const char* status;
  const char* who;
  const char* meaning;
};

/// Every exit status of every program and script, in the order of docs/failures.md's table (section
/// "Exit statuses"), which a test checks against this one.
const std::vector<ExitStatusRow>& exit_status_table();

/// Runs a program's `body` and maps what escapes it to an exit status: UsageError prints
/// "<who>: <message>" and a "Try '<program> --help'." hint and returns 2; data_pipeline::DataError
/// and every other exception print "<who>: error: <message>" on one line and return 1 (LibTorch's
/// errors without their C++ backtrace). `who` defaults to `program` (a rank of a distributed run
/// names itself there). SIGPIPE is ignored from then on, as CPython does: a closed stdout (`|
/// head`, a `tee` that died) fails the write with EPIPE instead of killing the run before its
/// report and checkpoints are written.
int run_main(const std::string& program, const std::function<int()>& body,
             const std::string& who = {});

}  // namespace workload
