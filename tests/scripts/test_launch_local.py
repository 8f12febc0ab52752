"""Tests for scripts/launch_local.sh's command line, with small shell programs as ranks: N read in
base 10 (leading zeros included) and used the same way everywhere, the environment each rank gets,
the usage errors (a flag without its value, an N out of range or too long for shell arithmetic, a
program that cannot be run, a rank log that is a FIFO or a directory) that must exit 2 before
anything is launched, the rank logs written through a symlink, and the ranks still running --grace
seconds after one failed (SIGTERM, then SIGKILL). The ranks of a real training run are tested by
tests/lib/distributed/distributed_test.cpp and tests/e2e/dist_liveness_test.cpp.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_launch_local.py
(all tests: scripts/dev/python_tests.sh)
"""

import os
import shutil
import stat
import subprocess
import time
import unittest

from scripts.support.testutil import REPO, ScratchCase

SCRIPT = os.path.join(REPO, "scripts", "launch_local.sh")
BASH = shutil.which("bash") or "/bin/bash"
SH = shutil.which("sh") or "/bin/sh"
# A rank: one line with the variables torchrun would give it.
PRINT_ENV = 'echo "$RANK $LOCAL_RANK $WORLD_SIZE $LOCAL_WORLD_SIZE $MASTER_PORT"'


class LaunchLocalTest(ScratchCase):
    tmp_prefix = "launch_local_test_"

    def launch(self, *args, timeout=20):
        # A bug that loops must fail the test, not hang it.
        return subprocess.run(
            [BASH, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=timeout,
            stdin=subprocess.DEVNULL,
            cwd=self.tmp,
        )

    def ranks(self, r):
        """The ranks' lines (PRINT_ENV), sorted by rank:
        [(rank, local_rank, world, local_world, port)]."""
        return sorted(tuple(int(v) for v in line.split()) for line in r.stdout.splitlines())

    def assert_usage_error(self, r, message):
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("launch_local.sh: error: " + message, r.stderr)
        self.assertEqual(r.stdout, "")  # no rank ran

    def test_every_rank_gets_torchruns_environment(self):
        r = self.launch("3", "--port", "29512", "--", SH, "-c", PRINT_ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ranks(r), [(k, k, 3, 3, 29512) for k in range(3)])

    def test_leading_zeros_count_in_base_10_everywhere(self):
        # 010 once launched 8 ranks told WORLD_SIZE=010; 08 and 09 launched none and exited 0.
        for n, count in (("010", 10), ("08", 8), ("09", 9), ("0002", 2)):
            with self.subTest(n=n):
                r = self.launch(n, "--port", "029512", "--", SH, "-c", PRINT_ENV)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertEqual(self.ranks(r), [(k, k, count, count, 29512) for k in range(count)])

    def test_n_out_of_range_is_a_usage_error(self):
        for n in ("0", "000", "65", "-1", "+2", "2.0", "two", "", "12345678901234567890", "1" * 40):
            with self.subTest(n=n):
                r = self.launch(n, "--", SH, "-c", PRINT_ENV)
                self.assert_usage_error(r, "N: expected 1..64, got '%s'" % n)
                # The script's own message and usage only: no shell error before it.
                self.assertTrue(r.stderr.startswith("launch_local.sh: error: "), r.stderr)
                self.assertIn("usage: scripts/launch_local.sh N", r.stderr)

    def test_a_flag_without_its_value_is_a_usage_error(self):
        # As the last argument these once looped forever at 100% CPU.
        cases = [
            (["--port"], "--port: expected a value"),
            (["--log-dir"], "--log-dir: expected a value"),
            (
                ["--port", "--log-dir", "logs", "--", "true"],
                "--port: expected a value, got the flag '--log-dir'",
            ),
            (["--log-dir", "--", "true"], "--log-dir: expected a value, got the flag '--'"),
            (["--port", "", "--", "true"], "--port: expected a value, got ''"),
            (["--log-dir", "", "--", "true"], "--log-dir: expected a value, got ''"),
            (["--port", "70000", "--", "true"], "--port: expected 1..65535, got '70000'"),
            (
                ["--port", "123456789012345678901", "--", "true"],
                "--port: expected 1..65535, got '123456789012345678901'",
            ),
            (["--grace"], "--grace: expected a value"),
            (["--grace", "soon", "--", "true"], "--grace: expected seconds, 0..9999, got 'soon'"),
            (["--grace", "10000", "--", "true"], "--grace: expected seconds, 0..9999, got '10000'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.launch("2", *args, timeout=10)
                self.assert_usage_error(r, message)
                self.assertIn("usage: scripts/launch_local.sh N", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "logs")))

    def test_a_program_that_cannot_run_is_named_before_any_launch(self):
        not_exe = os.path.join(self.tmp, "notes.txt")
        with open(not_exe, "w") as f:
            f.write("echo hi\n")
        cases = [
            (
                "no_such_program_for_launch_local",
                "PROGRAM: 'no_such_program_for_launch_local' is not on PATH",
            ),
            (
                os.path.join(self.tmp, "missing"),
                "PROGRAM: no such file '%s'" % os.path.join(self.tmp, "missing"),
            ),
            (self.tmp, "PROGRAM: '%s' is a directory" % self.tmp),
            (not_exe, "PROGRAM: '%s' is not executable" % not_exe),
        ]
        for program, message in cases:
            with self.subTest(program=program):
                r = self.launch("2", "--log-dir", "logs", "--", program)
                self.assert_usage_error(r, message)
                self.assertEqual(
                    len(r.stderr.splitlines()), 1, r.stderr
                )  # not the shell's, not twice
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "logs")))  # nothing started

    def test_a_program_on_path_and_the_rank_logs(self):
        r = self.launch("2", "--log-dir", "logs", "--", "sh", "-c", PRINT_ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        for k in range(2):
            with open(os.path.join(self.tmp, "logs", "rank%d.log" % k)) as f:
                self.assertEqual(f.read().split()[:4], [str(k), str(k), "2", "2"])

    def test_rank_logs_follow_symlinks_and_a_fifo_or_directory_is_refused(self):
        logs = os.path.join(self.tmp, "logs")
        os.makedirs(os.path.join(self.tmp, "real"))
        os.makedirs(logs)
        os.symlink(os.path.join(self.tmp, "real", "r0.log"), os.path.join(logs, "rank0.log"))
        r = self.launch("2", "--log-dir", "logs", "--", "sh", "-c", PRINT_ENV)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(logs, "rank0.log")))
        with open(os.path.join(self.tmp, "real", "r0.log")) as f:
            self.assertEqual(f.read().split()[:2], ["0", "0"])
        os.remove(os.path.join(logs, "rank1.log"))
        os.mkfifo(os.path.join(logs, "rank1.log"))
        os.mkdir(os.path.join(logs, "rank2.log"))
        r = self.launch("2", "--log-dir", "logs", "--", "sh", "-c", PRINT_ENV)
        self.assert_usage_error(r, "--log-dir: logs/rank1.log: is a FIFO")
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(logs, "rank1.log")).st_mode))
        os.remove(os.path.join(logs, "rank1.log"))
        r = self.launch("3", "--log-dir", "logs", "--", "sh", "-c", PRINT_ENV)
        self.assert_usage_error(r, "--log-dir: logs/rank2.log: is a directory")
        self.assertTrue(os.path.isdir(os.path.join(logs, "rank2.log")))

    def test_the_first_failing_ranks_status(self):
        r = self.launch("3", "--", SH, "-c", "exit $((RANK == 0 ? 0 : 3 + RANK))")
        self.assertEqual(r.returncode, 4, r.stderr)

    def test_ranks_still_running_after_one_failed_get_sigterm_then_sigkill(self):
        # Rank 0 fails at once; rank 1 ignores SIGTERM (as a frozen rank would), rank 2 does not.
        rank = (
            'case $RANK in 0) exit 5 ;; 1) trap "" TERM; exec sleep 60 ;; *) exec sleep 60 ;; esac'
        )
        start = time.monotonic()
        r = self.launch("3", "--grace", "1", "--", SH, "-c", rank)
        self.assertLess(time.monotonic() - start, 10)
        self.assertEqual(r.returncode, 5, r.stderr)  # the first failing rank's, as before
        self.assertEqual(
            r.stderr.splitlines(),
            [
                "launch_local.sh: rank 0 exited 5; 2 rank(s) still running 1 s later: SIGTERM",
                "launch_local.sh: 1 rank(s) still running 1 s after SIGTERM: SIGKILL",
            ],
        )

    def test_ranks_that_end_within_the_grace_are_left_alone(self):
        start = time.monotonic()
        r = self.launch("2", "--grace", "5", "--", SH, "-c", '[ "$RANK" = 0 ] || sleep 0.5; exit 3')
        self.assertLess(time.monotonic() - start, 4)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assertEqual(r.stderr, "")


if __name__ == "__main__":
    unittest.main()
