"""Tests for scripts/nsys_analysis/bench/runs.py: how benchmarks.py runs the GPU programs (time
limits, the report line, a capture through profile.sh), with stand-ins for nsys and train_resnet50;
the GPU runs themselves are measured, not tested.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/bench/test_runs.py
(all tests: scripts/dev/python_tests.sh)
"""

import os
import sys
import time
import unittest

from scripts.support.testutil import ANSWER_PRINT_CONFIG, ScratchCase, alive

from nsys_analysis.bench.runs import KILLED, BenchmarkError, profile, run_direct, train_binary

# Stand-ins for nsys (runs the program, records its own pid) and train_resnet50 (answers
# --print-config for profile.sh, then, run, records its pid and outlives any time limit).
FAKE_NSYS = r"""
import os, subprocess, sys
open(os.path.join(os.environ["FAKE_PIDS"], "nsys"), "w").write(str(os.getpid()))
args = sys.argv[1:]
i = 1
while args[i].startswith("--"):
    i += 1
sys.exit(subprocess.call(args[i:]))
"""
FAKE_TRAIN = (
    ANSWER_PRINT_CONFIG
    + r"""
import os, time
open(os.path.join(os.environ["FAKE_PIDS"], "train"), "w").write(str(os.getpid()))
time.sleep(30)
"""
)


class RunTest(ScratchCase):
    tmp_prefix = "benchmarks_run_test_"

    def read_pids(self, *names):
        """The pids the stand-ins wrote into tmp/NAME, killed at the end of the test if still
        running."""
        pids = []
        for name in names:
            with open(os.path.join(self.tmp, name)) as f:
                pids.append(int(f.read()))
        return list(self.kill_at_end(*pids))

    def test_run_direct_stops_at_the_time_limit(self):
        t0 = time.monotonic()
        rc, secs, tail = run_direct(["sleep", "4"], os.path.join(self.tmp, "log"), 1)
        self.assertEqual((rc, tail), (KILLED, None))
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertLess(secs, 2.5)

    def test_run_direct_times_from_the_report_line(self):
        rc, secs, tail = run_direct(
            ["sh", "-c", "echo step; echo '  report   /tmp/r.json'; sleep 1"],
            os.path.join(self.tmp, "log"),
            30,
        )
        self.assertEqual(rc, 0)
        self.assertGreaterEqual(tail, 0.9)
        self.assertLess(tail, secs)

    def test_profile_timeout_stops_nsys_and_the_program(self):
        self.fake("nsys", FAKE_NSYS)
        train = self.fake("train_resnet50", FAKE_TRAIN, self.tmp)
        env = {"PATH": self.bin + os.pathsep + os.environ["PATH"], "FAKE_PIDS": self.tmp}
        # The limit leaves room for profile.sh, the stand-in nsys and the stand-in program, three
        # interpreters, to start on a busy machine: at 2 s, beside other suites on CI's 2 cores,
        # the limit once passed before the stand-in nsys had written its pid.
        limit = 10
        t0 = time.monotonic()
        summary, rc = profile(
            os.path.join(self.tmp, "out", "run"), ["--binary", train], limit, extra_env=env
        )
        self.assertEqual((summary, rc), (None, KILLED))
        self.assertLess(time.monotonic() - t0, limit + 5)
        for name, pid in zip(("nsys", "train"), self.read_pids("nsys", "train")):
            self.assertFalse(alive(pid), name)
        with open(os.path.join(self.tmp, "out", "run.runlog")) as f:
            self.assertIn("profile.sh --prefix", f.readline())

    def test_run_direct_records_a_command_that_cannot_start(self):
        run = run_direct([os.path.join(self.tmp, "nope")], os.path.join(self.tmp, "log"), 5)
        self.assertEqual((run.exit_code, run.after_report_s), (None, None))


class HelpersTest(unittest.TestCase):
    def test_train_binary_must_be_executable(self):
        with self.assertRaisesRegex(
            BenchmarkError, "train_resnet50 not found at /nonexistent/train"
        ):
            train_binary("/nonexistent/train")
        self.assertEqual(train_binary(sys.executable), sys.executable)


if __name__ == "__main__":
    unittest.main()
