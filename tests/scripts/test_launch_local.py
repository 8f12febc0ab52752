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
import signal
import stat
import subprocess
import time
import unittest

from scripts.support.testutil import REPO, ScratchCase, alive

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

    def test_master_port_from_the_environment_is_named_as_such(self):
        r = subprocess.run(
            [BASH, SCRIPT, "2", "--", "true"],
            capture_output=True,
            text=True,
            timeout=10,
            stdin=subprocess.DEVNULL,
            cwd=self.tmp,
            env=dict(os.environ, MASTER_PORT="abc"),
        )
        self.assert_usage_error(r, "MASTER_PORT: expected 1..65535, got 'abc'")

    def test_flag_equals_value_forms(self):
        r = self.launch(
            "2", "--port=29513", "--grace=3", "--log-dir=logs", "--", SH, "-c", PRINT_ENV
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.ranks(r), [(k, k, 2, 2, 29513) for k in range(2)])
        self.assertTrue(os.path.isfile(os.path.join(self.tmp, "logs", "rank1.log")))
        for args, message in (
            (["--port="], "--port: expected a value, got ''"),
            (["--grace=x", "--", "true"], "--grace: expected seconds, 0..9999, got 'x'"),
        ):
            with self.subTest(args=args):
                self.assert_usage_error(self.launch("2", *args), message)

    def test_a_flag_given_twice_is_refused(self):
        for args, message in (
            (["--port", "1", "--port", "2"], "--port: given twice ('1', then '2')"),
            (["--grace=1", "--grace", "1"], "--grace: given twice ('1', then '1')"),
            (["--log-dir", "a", "--log-dir=b"], "--log-dir: given twice ('a', then 'b')"),
        ):
            with self.subTest(args=args):
                self.assert_usage_error(self.launch("2", *args, "--", "true"), message)

    def test_help_anywhere_before_the_program(self):
        for args in (
            ["--help"],
            ["-h"],
            ["1", "--help"],
            ["2", "--port", "5", "-h", "--", "x"],
            ["x", "--help"],
        ):
            with self.subTest(args=args):
                r = self.launch(*args)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(r.stdout.startswith("usage: scripts/launch_local.sh N"), r.stdout)
                self.assertIn("--grace S", r.stdout)
        # After --, --help is the program's.
        r = self.launch("1", "--", SH, "-c", 'echo "$1"', "sh", "--help")
        self.assertEqual((r.returncode, r.stdout), (0, "--help\n"), r.stderr)

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

    def test_the_status_of_the_rank_that_failed_first(self):
        # Rank 2 fails at once, rank 1 a second later: rank 2's status, not the first by rank order.
        rank = "case $RANK in 0) exit 0 ;; 1) sleep 1; exit 4 ;; *) exit 5 ;; esac"
        r = self.launch("3", "--grace", "30", "--", SH, "-c", rank)
        self.assertEqual(r.returncode, 5, r.stderr)

    def test_ranks_the_launcher_stopped_do_not_mask_the_failure(self):
        # Rank 1 exits 3; rank 0, SIGTERMed by the launcher, ends 143: the run's status is 3.
        r = self.launch(
            "2", "--grace", "1", "--", SH, "-c", '[ "$RANK" = 1 ] && exit 3; exec sleep 30'
        )
        self.assertEqual(r.returncode, 3, r.stderr)

    def descendants(self, n):
        """The pids the ranks of a RANK_WITH_CHILD run wrote (rank order), once all are written;
        SIGKILLed at the end of the test if still running."""
        deadline = time.monotonic() + 30
        files = [os.path.join(self.tmp, "child%d" % k) for k in range(n)]
        while not all(os.path.exists(f) and os.path.getsize(f) for f in files):
            self.assertLess(time.monotonic(), deadline, "the ranks did not start their children")
            time.sleep(0.05)
        pids = []
        for f in files:
            with open(f) as fh:
                pids.append(int(fh.read()))
        return self.kill_at_end(*pids)

    def assert_gone(self, pids):
        # SIGKILLed processes may take a moment to go on a busy machine: a generous bound.
        deadline = time.monotonic() + 10
        while any(alive(p) for p in pids) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertEqual(
            [p for p in pids if alive(p)], [], "processes the ranks started outlived them"
        )

    def test_a_failure_stops_the_other_ranks_whole_process_group(self):
        # Rank 0 waits on a child (as nsys waits on train_resnet50); rank 1 fails. The launcher's
        # SIGTERM must reach the child too, not only rank 0's shell.
        rank = (
            'if [ "$RANK" = 1 ]; then while [ ! -s child0 ]; do sleep 0.05; done; exit 3; fi; '
            "sleep 30 >/dev/null 2>&1 & echo $! > child0; wait"
        )
        r = self.launch("2", "--grace", "1", "--", SH, "-c", rank, timeout=40)
        self.assertEqual(r.returncode, 3, r.stderr)
        self.assert_gone(self.descendants(1))

    def test_a_signal_to_the_launcher_reaches_every_ranks_process_group(self):
        # Each rank's shell waits on a child; SIGTERM to the launcher must end both, and a rank's
        # last words after the signal still reach its log (tee is not stopped with it).
        rank = (
            "sleep 31 >/dev/null 2>&1 & echo $! > child$RANK; "
            "trap 'echo rank $RANK stopping; exit 7' TERM; wait"
        )
        launcher = subprocess.Popen(
            [BASH, SCRIPT, "2", "--log-dir", "logs", "--", SH, "-c", rank],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=self.tmp,
        )
        self.kill_at_end(launcher.pid)
        children = self.descendants(2)
        launcher.send_signal(signal.SIGTERM)
        out, err = launcher.communicate(timeout=30)
        self.assertEqual(launcher.returncode, 7, err)
        self.assert_gone(children)
        for k in range(2):
            with open(os.path.join(self.tmp, "logs", "rank%d.log" % k)) as f:
                self.assertIn("rank %d stopping" % k, f.read())

    def test_processes_left_behind_by_a_rank_are_stopped(self):
        # Rank 0 ends at once, leaving a child that ignores SIGTERM: SIGTERM, then SIGKILL --grace
        # seconds later, and the launcher says so.
        rank = (
            '[ "$RANK" = 0 ] || exit 0; '
            "(trap '' TERM; exec sleep 32) >/dev/null 2>&1 & echo $! > child0"
        )
        r = self.launch("2", "--grace", "1", "--", SH, "-c", rank, timeout=40)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_gone(self.descendants(1))
        self.assertIn("still hold processes: SIGTERM", r.stderr)
        self.assertIn("SIGKILL", r.stderr)

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
