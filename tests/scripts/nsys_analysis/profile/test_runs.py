"""Tests for scripts/nsys_analysis/profile/runs.py: a logged run (its output on the echo and in the
log, a log begun then appended to, a failure's status and message, a wrapped command's JSON lines,
a command that cannot start), the steps after it, the Python for analyze.py, the untraced run's
private checkpoint directory, and a stop signal while a child runs that ignores it (SIGKILL after
the grace, to what it started too). The flows end to end: tests/scripts/test_profile_sh.py.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_runs.py
(all tests: scripts/dev/python_tests.sh)
"""

import io
import os
import signal
import subprocess
import sys
import time
import unittest
from unittest import mock

from scripts.support.testutil import REPO, ScratchCase, alive

from nsys_analysis.common.exit_status import FAILURE
from nsys_analysis.profile.errors import ProfileError
from nsys_analysis.profile.cli import HELP
from nsys_analysis.profile.runs import (
    STOP_GRACE_S,
    Logs,
    UntracedCheckpoints,
    find_python,
    run_step,
    shell_status,
)

PRINT = [sys.executable, "-c"]


class LogsTest(ScratchCase):
    tmp_prefix = "profile_runs_test_"

    def setUp(self):
        super().setUp()
        self.echo = io.BytesIO()
        self.logs = Logs(self.echo)
        self.log = os.path.join(self.tmp, "x.log")

    def read_log(self):
        with open(self.log) as f:
            return f.read()

    def test_output_to_the_echo_and_the_log(self):
        code = "import sys; print('out'); print('err', file=sys.stderr); print('{\"a\": 1}')"
        lines = self.logs.run(self.log, "the profiled program", PRINT + [code])
        self.assertEqual(lines, [])  # not kept unless asked
        self.assertEqual(sorted(self.read_log().splitlines()), sorted(["out", "err", '{"a": 1}']))
        self.assertEqual(self.echo.getvalue().decode(), self.read_log())
        # The same log again: appended to; kept JSON lines come back.
        lines = self.logs.run(
            self.log,
            "the untraced run",
            PRINT + ["print('x'); print('  {\"b\": 2} ')"],
            keep_json=True,
        )
        self.assertEqual(lines, ['  {"b": 2} '])
        self.assertTrue(self.read_log().endswith('x\n  {"b": 2} \n'))
        self.assertIn("out", self.read_log())
        # A new Logs begins the log anew.
        Logs(io.BytesIO()).run(self.log, "it", PRINT + ["print('{\"c\": 3}', end='')"])
        self.assertEqual(self.read_log(), '{"c": 3}')

    def test_a_last_line_without_its_end(self):
        lines = self.logs.run(
            self.log, "it", PRINT + ["print('{\"c\": 3}', end='')"], keep_json=True
        )
        self.assertEqual(lines, ['{"c": 3}'])

    def test_a_failure_carries_the_programs_status(self):
        with self.assertRaises(ProfileError) as cm:
            self.logs.run(self.log, "the untraced run", PRINT + ["print('x'); exit(4)"])
        self.assertEqual(cm.exception.status, 4)
        self.assertEqual(
            cm.exception.message, "the untraced run failed (exit 4); output in %s" % self.log
        )
        self.assertEqual(self.read_log(), "x\n")
        with self.assertRaises(ProfileError) as cm:
            self.logs.run(self.log, "the profiled program", PRINT + ["exit(1)"], "from torchrun")
        self.assertEqual(
            cm.exception.message,
            "the profiled program failed (exit 1 from torchrun); output in %s" % self.log,
        )

    def test_a_command_that_cannot_start(self):
        with self.assertRaises(ProfileError) as cm:
            self.logs.run(self.log, "the untraced run", [os.path.join(self.tmp, "none")])
        self.assertEqual(cm.exception.status, 127)
        self.assertIn("cannot run %s" % os.path.join(self.tmp, "none"), self.read_log())

    def test_signals_as_a_shell_reports_them(self):
        self.assertEqual((shell_status(0), shell_status(3), shell_status(-9)), (0, 3, 137))
        with self.assertRaises(ProfileError) as cm:
            self.logs.run(self.log, "it", PRINT + ["import os; os.kill(os.getpid(), 15)"])
        self.assertEqual(cm.exception.status, 143)


class StepTest(ScratchCase):
    tmp_prefix = "profile_runs_test_"

    def test_run_step(self):
        run_step(PRINT + ["pass"], "nsys export of x")
        with self.assertRaises(ProfileError) as cm:
            run_step(PRINT + ["exit(5)"], "nsys stats of out/x")
        self.assertEqual(
            (cm.exception.status, cm.exception.message),
            (FAILURE, "nsys stats of out/x failed (exit 5)"),
        )
        with self.assertRaises(ProfileError) as cm:
            run_step([os.path.join(self.tmp, "none")], "analyze.py")
        self.assertEqual(cm.exception.message, "analyze.py failed (exit 127)")

    def test_find_python(self):
        with mock.patch.dict(os.environ, {"PYTHON": sys.executable}):
            self.assertEqual(find_python("json"), sys.executable)
            self.assertNotEqual(find_python("no_such_module_here"), sys.executable)
        with mock.patch.dict(os.environ, {"PYTHON": os.path.join(self.tmp, "none")}):
            self.assertIn(find_python("json"), (None, "python3", "/usr/bin/python3"))


class CheckpointsTest(ScratchCase):
    tmp_prefix = "profile_runs_test_"

    def setUp(self):
        super().setUp()
        self.given = os.path.join(self.tmp, "ck")
        os.makedirs(os.path.join(self.given, "checkpoint-e000009.ckpt.d"))
        for name in ("checkpoint-e000001.ckpt", "checkpoint-e000002.ckpt", "other.ckpt"):
            with open(os.path.join(self.given, name), "w") as f:
                f.write(name)

    def test_resumed(self):
        with mock.patch.dict(os.environ, {"TMPDIR": self.tmp}):
            c = UntracedCheckpoints.create(self.given, True)
            self.assertEqual(
                UntracedCheckpoints.placeholder(),
                os.path.join(self.tmp, "profile_sh_checkpoints.XXXXXXXX"),
            )
        self.assertTrue(os.path.basename(c.path).startswith("profile_sh_checkpoints."))
        self.assertEqual(os.path.dirname(c.path), self.tmp)
        with open(os.path.join(c.path, "stale"), "w") as f:
            f.write("x")
        c.prepare()
        self.assertEqual(os.listdir(c.path), ["checkpoint-e000002.ckpt"])
        c.remove()
        self.assertFalse(os.path.exists(c.path))
        c.remove()  # gone already: nothing

    def test_not_resumed_or_nothing_to_resume(self):
        c = UntracedCheckpoints(os.path.join(self.tmp, "private"), self.given, False)
        c.prepare()
        self.assertEqual(os.listdir(c.path), [])
        c = UntracedCheckpoints(c.path, os.path.join(self.tmp, "missing"), True)
        self.assertIsNone(c.newest())
        c.prepare()
        self.assertEqual(os.listdir(c.path), [])


# Logs.run() of argv[3:] into the log argv[2] in a process stopped as profile.sh is (its stop
# signals handled, exit_with()), with a grace of half a second.
STOPPED = r"""
import sys
sys.path.insert(0, sys.argv[1])
from nsys_analysis.common.exit_status import exit_with
from nsys_analysis.profile import runs
runs.STOP_GRACE_S = 0.5


def main():
    runs.handle_stop_signals()
    runs.Logs().run(sys.argv[2], "it", sys.argv[3:])
    return 0


exit_with(main, "stopped")
"""
# Ignores SIGINT and SIGTERM, as does a process it starts in a session of its own (out of its
# group); writes both pids to argv[1], then sleeps.
STUBBORN = r"""
import os, signal, subprocess, sys, time
for s in (signal.SIGINT, signal.SIGTERM):
    signal.signal(s, signal.SIG_IGN)
away = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"],
                        start_new_session=True)
with open(sys.argv[1] + ".tmp", "w") as f:
    f.write("%d %d" % (os.getpid(), away.pid))
os.rename(sys.argv[1] + ".tmp", sys.argv[1])
print("started", flush=True)
time.sleep(60)
"""


class StopTest(ScratchCase):
    tmp_prefix = "profile_runs_test_"

    def test_the_help_tells_the_grace(self):
        self.assertIn("gets %g s to end" % STOP_GRACE_S, " ".join(HELP.split()))

    def test_sigkill_after_the_grace(self):
        pids = os.path.join(self.tmp, "pids")
        log = os.path.join(self.tmp, "x.log")
        proc = subprocess.Popen(
            [sys.executable, "-c", STOPPED, os.path.join(REPO, "scripts"), log]
            + [sys.executable, "-c", STUBBORN, pids],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            start_new_session=True,
        )
        self.kill_at_end(proc.pid)
        for _ in range(600):
            if os.path.exists(pids) or proc.poll() is not None:
                break
            time.sleep(0.05)
        with open(pids) as f:
            child, away = self.kill_at_end(*(int(p) for p in f.read().split()))
        os.kill(proc.pid, signal.SIGTERM)
        out, err = proc.communicate(timeout=60)
        self.assertEqual(proc.returncode, 143, err)
        self.assertIn("profile.sh: still running 0.5 s after the signal: SIGKILL\n", err)
        self.assertTrue(err.endswith("stopped: terminated\n"), err)
        self.assertEqual(out, "started\n")  # the echo of the child's output
        self.assertFalse(alive(child))
        # Out of the child's group: SIGKILLed too, not waited for (it ends as it is scheduled).
        for _ in range(200):
            if not alive(away):
                break
            time.sleep(0.05)
        self.assertFalse(alive(away))


if __name__ == "__main__":
    unittest.main()
