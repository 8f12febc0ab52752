"""Tests for scripts/nsys_analysis/profile/runs.py: a logged run (its output on the echo and in the
log, a log begun then appended to, a failure's status and message, a wrapped command's JSON lines,
a command that cannot start), the steps after it, the Python for analyze.py, and the untraced
run's private checkpoint directory. The flows end to end: tests/scripts/test_profile_sh.py.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_runs.py
(all tests: scripts/dev/python_tests.sh)
"""

import io
import os
import sys
import unittest
from unittest import mock

from scripts.support.testutil import ScratchCase

from nsys_analysis.common.exit_status import FAILURE
from nsys_analysis.profile.errors import ProfileError
from nsys_analysis.profile.runs import (
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


if __name__ == "__main__":
    unittest.main()
