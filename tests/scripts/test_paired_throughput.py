"""Tests for scripts/dev/paired_throughput.sh without a GPU or a build: the usage errors that must
exit 2 before anything is built or run (a flag without its value, which once looped forever; a bad
--old-tree, --rounds or --steps; an --out whose logs cannot be written), and the help text.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_paired_throughput.py
"""

import os
import shutil
import stat
import subprocess
import unittest

from scripts.support.testutil import REPO, ScratchCase

SCRIPT = os.path.join(REPO, "scripts", "dev", "paired_throughput.sh")
BASH = shutil.which("bash") or "/bin/bash"


class PairedThroughputTest(ScratchCase):
    tmp_prefix = "paired_throughput_test_"

    def setUp(self):
        super().setUp()
        self.old = os.path.join(self.tmp, "old")
        os.mkdir(self.old)
        with open(os.path.join(self.old, "CMakeLists.txt"), "w") as f:
            f.write("project(old)\n")
        # No binary in this build dir: a run that got past the checks would stop at it, exit 2.
        self.env = dict(os.environ, BUILD_DIR=os.path.join(self.tmp, "no_build"))

    def run_sh(self, *args):
        # A bug that loops must fail the test, not hang it.
        return subprocess.run(
            [BASH, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=20,
            stdin=subprocess.DEVNULL,
            env=self.env,
        )

    def test_help(self):
        r = self.run_sh("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(
            r.stdout.startswith("usage: scripts/dev/paired_throughput.sh --old-tree DIR"), r.stdout
        )

    def test_usage_errors_exit_2(self):
        afile = os.path.join(self.tmp, "afile")
        with open(afile, "w") as f:
            f.write("x")
        out = os.path.join(self.tmp, "out")
        os.makedirs(os.path.join(out, "new_ceiling_1.log"))
        fifo_out = os.path.join(self.tmp, "fifo_out")
        os.mkdir(fifo_out)
        os.mkfifo(os.path.join(fifo_out, "old_build.log"))
        cases = [
            (["--old-tree"], "--old-tree: expected a value"),
            (["--old-tree", self.old, "--out"], "--out: expected a value"),
            (["--old-tree", self.old, "--rounds"], "--rounds: expected a value"),
            (["--bogus"], "unknown argument '--bogus'"),
            (["--old-tree", self.tmp], "--old-tree: expected a source tree, got '%s'" % self.tmp),
            (
                ["--old-tree", self.old, "--rounds", "0"],
                "--rounds and --steps: expected positive integers",
            ),
            (
                ["--old-tree", self.old, "--steps", "x"],
                "--rounds and --steps: expected positive integers",
            ),
            (["--old-tree", self.old, "--out", ""], "--out: expected a value, got ''"),
            (
                ["--old-tree", self.old, "--out", afile],
                "--out %s: %s/old_build.log: %s is not a directory" % (afile, afile, afile),
            ),
            (
                ["--old-tree", self.old, "--out", out],
                "--out %s: %s/new_ceiling_1.log: is a directory" % (out, out),
            ),
            (
                ["--old-tree", self.old, "--out", fifo_out],
                "--out %s: %s/old_build.log: is a FIFO" % (fifo_out, fifo_out),
            ),
            (["--old-tree", self.old, "--out", os.path.join(self.tmp, "new")], "not built"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.run_sh(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("paired_throughput.sh: error: ", r.stderr)
                self.assertIn(message, r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(fifo_out, "old_build.log")).st_mode))
        self.assertFalse(
            os.path.exists(os.path.join(self.old, "build-paired"))
        )  # nothing was built


if __name__ == "__main__":
    unittest.main()
