"""Tests for scripts/experiments/nsys_signal_check.sh without a GPU: the usage errors that exit 2
before anything runs (the arguments, TRAIN_BIN not an executable file, nsys missing, a MODES word
that is neither app nor group, an OUT whose files cannot be written). What it measures needs nsys
and a CUDA build (docs/BENCHMARKS.md).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_nsys_signal_check.py
"""

import os
import shutil
import subprocess
import unittest

from scripts.support.testutil import REPO, ScratchCase

SCRIPT = os.path.join(REPO, "scripts", "experiments", "nsys_signal_check.sh")
BASH = shutil.which("bash") or "/bin/bash"


class NsysSignalCheckTest(ScratchCase):
    tmp_prefix = "nsys_signal_check_test_"

    def setUp(self):
        super().setUp()
        # Stand-ins that fail the test if the script gets as far as running them.
        self.fake("nsys", "import sys\nsys.exit('nsys ran')\n")
        self.train = self.fake("train_resnet50", "import sys\nsys.exit('train_resnet50 ran')\n")

    def run_sh(self, *args, **env):
        e = dict(os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"], TRAIN_BIN=self.train)
        e.pop("MODES", None)
        e.update(env)
        return subprocess.run(
            [BASH, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
            env=e,
            cwd=REPO,
        )

    def test_usage_errors_exit_2_before_anything_runs(self):
        afile = os.path.join(self.tmp, "afile")
        with open(afile, "w") as f:
            f.write("x")
        out = os.path.join(self.tmp, "out")
        os.makedirs(os.path.join(out, "sig_app.log"))
        data = self.tmp
        cases = [
            ((), {}, "usage: TRAIN_BIN="),
            ((data,), {}, "usage: TRAIN_BIN="),
            (
                (data, out),
                {"TRAIN_BIN": self.tmp},
                "TRAIN_BIN (%s) is not an executable file" % self.tmp,
            ),
            ((data, out), {"TRAIN_BIN": ""}, "TRAIN_BIN (unset) is not an executable file"),
            ((data, out), {"PATH": "/nonexistent"}, "nsys is not on PATH"),
            ((data, out), {"MODES": "app both"}, "MODES: expected app and/or group, got 'both'"),
            (
                (data, afile),
                {},
                "OUT %s: %s/sig_app.log: %s is not a directory" % (afile, afile, afile),
            ),
            ((data, out), {}, "OUT %s: %s/sig_app.log: is a directory" % (out, out)),
        ]
        for args, env, message in cases:
            with self.subTest(args=args, env=env):
                r = self.run_sh(*args, **env)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertNotIn(" ran", r.stderr)
                self.assertEqual(r.stdout, "")
        self.assertEqual(os.listdir(out), ["sig_app.log"])


if __name__ == "__main__":
    unittest.main()
