"""Tests for scripts/nsys_analysis/common/runner.py: the time limit holds (also while output
streams), a timeout stops every process the command started, output lines arrive as they are
written, and a command that cannot start is reported, not raised.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/common/test_runner.py
"""

import os
import shutil
import time
import unittest

from nsys_analysis.common import runner
from scripts.support.testutil import ScratchCase, alive

SH = shutil.which("sh") or "/bin/sh"


class RunnerCase(ScratchCase):
    tmp_prefix = "runner_test_"

    def setUp(self):
        super().setUp()
        self.log = os.path.join(self.tmp, "run.log")

    def pids(self, *names):
        """The pids the command wrote into tmp/NAME files, killed at the end of the test whatever
        happens."""
        out = []
        for name in names:
            with open(os.path.join(self.tmp, name)) as f:
                out.append(int(f.read()))
        return list(self.kill_at_end(*out))

    def sh(self, script):
        """sh -c script, run in tmp (the runner keeps the caller's working directory)."""
        return [SH, "-c", "cd '%s' || exit 99; %s" % (self.tmp, script)]

    def read_log(self):
        with open(self.log, newline="") as f:
            return f.read()


class ExitStatusTest(RunnerCase):
    def test_ok_failed_log_and_env(self):
        r = runner.run(
            [SH, "-c", "echo out; echo err >&2; echo $RUNNER_TEST_VALUE"],
            self.log,
            timeout=30,
            env=dict(os.environ, RUNNER_TEST_VALUE="from env"),
        )
        self.assertEqual((r.status, r.returncode, r.error), (runner.OK, 0, None))
        self.assertLess(r.seconds, 10)
        self.assertEqual(
            self.read_log().splitlines(),
            [
                "$ %s -c echo out; echo err >&2; echo $RUNNER_TEST_VALUE" % SH,
                "out",
                "err",
                "from env",
            ],
        )
        r = runner.run([SH, "-c", "exit 3"], self.log, timeout=30)
        self.assertEqual((r.status, r.returncode), (runner.FAILED, 3))

    def test_command_that_cannot_start(self):
        missing = os.path.join(self.tmp, "no_such_program")
        r = runner.run([missing, "--flag"], self.log, timeout=30)
        self.assertEqual((r.status, r.returncode), (runner.FAILED, None))
        self.assertIn("No such file", r.error)
        self.assertIn("cannot start:", self.read_log())

    def test_no_time_limit(self):
        r = runner.run([SH, "-c", "sleep 0.2; exit 5"], self.log)
        self.assertEqual((r.status, r.returncode), (runner.FAILED, 5))


class TimeoutTest(RunnerCase):
    def test_sleep_past_the_limit(self):
        r = runner.run(self.sh("echo $$ > leader; exec sleep 4"), self.log, timeout=1)
        self.assertEqual((r.status, r.returncode), (runner.TIMEOUT, None))
        self.assertGreaterEqual(r.seconds, 1.0)
        self.assertLess(r.seconds, 2.5)
        self.assertFalse(alive(self.pids("leader")[0]))

    def test_limit_holds_while_output_streams(self):
        # A line every 50 ms for 30 s: reading the output must not keep run() past the limit.
        t0 = time.monotonic()
        r = runner.run(
            self.sh("echo $$ > leader; while :; do echo tick; sleep 0.05; done"),
            self.log,
            timeout=1,
        )
        self.assertEqual(r.status, runner.TIMEOUT)
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertIn("tick\ntick\n", self.read_log())
        self.assertFalse(alive(self.pids("leader")[0]))

    def test_grandchildren_are_stopped_and_reaped(self):
        # sh starts two sleeps of its own; all three must be gone once run() returns.
        cmd = self.sh(
            "echo $$ > leader; sleep 30 & echo $! > child1; sleep 30 & echo $! > child2; wait"
        )
        r = runner.run(cmd, self.log, timeout=1)
        self.assertEqual(r.status, runner.TIMEOUT)
        self.assertLess(r.seconds, 2.5)
        for pid in self.pids("leader", "child1", "child2"):
            self.assertFalse(alive(pid), pid)

    def test_sigkill_after_the_grace_for_a_group_that_ignores_sigterm(self):
        grace = runner.TERM_GRACE_S
        runner.TERM_GRACE_S = 0.5
        self.addCleanup(setattr, runner, "TERM_GRACE_S", grace)
        # An ignored signal stays ignored across fork and exec: neither sh nor its sleep stops on
        # SIGTERM.
        cmd = self.sh("trap '' TERM; echo $$ > leader; sleep 30 & echo $! > child; wait")
        r = runner.run(cmd, self.log, timeout=1)
        self.assertEqual(r.status, runner.TIMEOUT)
        self.assertGreaterEqual(r.seconds, 1.5)
        self.assertLess(r.seconds, 3.5)
        for pid in self.pids("leader", "child"):
            self.assertFalse(alive(pid), pid)

    def test_interrupt_stops_the_group(self):
        def on_line(line):
            raise KeyboardInterrupt

        with self.assertRaises(KeyboardInterrupt):
            runner.run(
                self.sh("echo $$ > leader; echo hello; sleep 30"),
                self.log,
                timeout=60,
                on_line=on_line,
            )
        self.assertFalse(alive(self.pids("leader")[0]))


class StreamingTest(RunnerCase):
    def test_lines_arrive_as_they_are_written(self):
        seen = []
        t0 = time.monotonic()
        r = runner.run(
            [SH, "-c", "echo first; sleep 1; printf 'report /tmp/x\\r\\nlast without newline'"],
            self.log,
            timeout=30,
            on_line=lambda line: seen.append((time.monotonic() - t0, line)),
        )
        self.assertEqual(r.status, runner.OK)
        self.assertEqual(
            [line for _, line in seen], ["first", "report /tmp/x", "last without newline"]
        )
        self.assertLess(seen[0][0], 0.7)  # long before the command ends
        self.assertGreaterEqual(seen[1][0], 1.0)
        self.assertTrue(self.read_log().endswith("first\nreport /tmp/x\r\nlast without newline"))

    def test_exit_is_not_held_up_by_a_process_left_holding_the_output(self):
        # The command exits at once; the sleep it leaves behind keeps the pipe open for 30 s.
        r = runner.run(self.sh("sleep 30 & echo $! > child; echo done"), self.log, timeout=20)
        self.assertEqual((r.status, r.returncode), (runner.OK, 0))
        self.assertLess(r.seconds, 5)
        self.assertIn("done\n", self.read_log())
        self.pids(
            "child"
        )  # killed by the clean-up: run() leaves a command's leftovers alone on success


if __name__ == "__main__":
    unittest.main()
