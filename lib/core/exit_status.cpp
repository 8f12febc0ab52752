// Exit statuses (lib/core/exit_status.h).
#include "lib/core/exit_status.h"

#include <c10/util/Exception.h>

#include <csignal>

#include <iostream>

#include "data_pipeline/data_error.h"
#include "lib/core/usage_error.h"

namespace workload {

int exit_status(Ending ending, int signal) {
  switch (ending) {
    case Ending::kCompleted:
      return kExitOk;
    case Ending::kFailed:
      return kExitFailure;
    case Ending::kUsage:
      return kExitUsage;
    case Ending::kPeerLost:
      return kExitPeerLost;
    case Ending::kStopped:
      return 128 + signal;
  }
  return kExitFailure;
}

const std::vector<ExitStatusRow>& exit_status_table() {
  static const std::vector<ExitStatusRow> rows = {
      {"0", "every program and script", "success (also `--help`, `--version`, `--dry-run`)"},
      {"1", "every program and script",
       "a failure: bad data (the file and line named), a runtime error, a failed step or run, an "
       "output that could not be written at its turn; `sweep.py`: a run that failed, timed out "
       "twice or failed a check; `benchmarks.py`: a run, a check, a tool or a result file; "
       "`scripts/dev/check_*.sh`: what the check found"},
      {"2", "every program and script",
       "a usage error: a flag, an environment variable, an input or an output path that cannot "
       "be used, named in one line, before any work; `train_resnet50` under torchrun: also a "
       "rendezvous that cannot complete (the store unreachable or silent, a rank that never "
       "joins)"},
      {"3", "`train_resnet50` (a rank of a data-parallel run)",
       "a peer rank was lost (dead, frozen, failed, or its store gone): the run stopped, its "
       "report "
       "says which"},
      {"3", "`analyze.py --check`", "a capture check failed or could not be evaluated (named)"},
      {"4", "`sweep.py --deadline`",
       "the deadline passed before every run of the plan was made (`--resume` finishes it)"},
      {"128 + N",
       "`train_resnet50`, `get_food101.sh`, `launch_local.sh`, `profile.sh`; the Python scripts "
       "(130 on Ctrl-C)",
       "stopped by signal N: 130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP (`train_resnet50` "
       "drains the device, finishes the checkpoint of an epoch whose training is done and writes "
       "its report first; `launch_local.sh` forwards the signal to its ranks' process groups, "
       "`profile.sh` to nsys's; a Python script removes what it had half written and says "
       "`interrupted`, or `terminated` for SIGTERM, in one line, no traceback)"},
      {"the child's", "`profile.sh`, `launch_local.sh`, `run.sh`, `python_tests.sh`, `test.sh`",
       "the status of the program they ran (`profile.sh`: the profiled program's or torchrun's; "
       "`launch_local.sh`: the rank that failed first, not those it then stopped)"},
  };
  return rows;
}

int run_main(const std::string& program, const std::function<int()>& body,
             const std::string& who_arg) {
  const std::string& who = who_arg.empty() ? program : who_arg;
  std::signal(SIGPIPE, SIG_IGN);
  try {
    return body();
  } catch (const UsageError& e) {
    std::cerr << who << ": " << e.what() << "\nTry '" << program << " --help'.\n";
    return exit_status(Ending::kUsage);
  } catch (const data_pipeline::DataError& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return exit_status(Ending::kFailed);
  } catch (const c10::Error& e) {
    // LibTorch's messages carry a C++ backtrace; the user needs the first line.
    std::cerr << who << ": error: " << e.what_without_backtrace() << "\n";
    return exit_status(Ending::kFailed);
  } catch (const std::exception& e) {
    std::cerr << who << ": error: " << e.what() << "\n";
    return exit_status(Ending::kFailed);
  }
}

}  // namespace workload
