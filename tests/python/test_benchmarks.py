"""Tests for scripts/benchmarks.py, the command line: --help of every command from another directory,
usage errors, a missing program, and `table` printing the package's tables. The package's benchmark
modules have their own tests (test_bench_runs.py, test_bench_commands.py, test_ncu.py,
test_bench_tables.py).

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

from testutil import ScratchCase

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO, "scripts", "benchmarks.py")
sys.path.insert(0, os.path.join(REPO, "scripts"))
import benchmarks  # noqa: E402
from nsys_analysis.bench_tables import render_tables  # noqa: E402

COMMANDS = ("checks", "compare", "scan", "loader", "experiments", "ncu", "table")


class CliTest(ScratchCase):
    tmp_prefix = "benchmarks_test_"

    def run_cli(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=60,
                              cwd=tempfile.gettempdir())

    def test_help_of_every_command_from_another_cwd(self):
        for args in [("--help",)] + [(c, "--help") for c in COMMANDS]:
            r = self.run_cli(*args)
            self.assertEqual(r.returncode, 0, (args, r.stderr))
            self.assertIn("{checks,compare,scan,loader,experiments,ncu,table}", r.stdout)
            self.assertIn("GPU benchmarks of the workload", r.stdout)

    def test_usage_errors_exit_2(self):
        r = self.run_cli("checks", "--out", self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("error: --data is required for checks", r.stderr)
        r = self.run_cli("bogus", "--out", self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("invalid choice: 'bogus'", r.stderr)

    def test_missing_binary_exits_1_with_one_line(self):
        r = self.run_cli("scan", "--data", self.tmp, "--out", self.tmp, "--binary", os.path.join(self.tmp, "nope"))
        self.assertEqual(r.returncode, 1)
        self.assertEqual(r.stderr, "benchmarks.py: error: train_resnet50 not found at %s (build it, or pass "
                                   "--binary)\n" % os.path.join(self.tmp, "nope"))

    def test_table_prints_the_tables(self):
        with open(os.path.join(self.tmp, "scan.json"), "w") as f:
            json.dump({"ceiling": [3000.0, 3010.0], "steps": 64,
                       "rows": [{"name": "synthetic_0", "images_per_s": 3000.0, "batch_wait_total_ms": 0.0},
                                {"name": "w4_p2_batch", "images_per_s": 1502.5, "batch_wait_total_ms": 10.0}]}, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(benchmarks.main(["table", "--out", self.tmp]), 0)
        self.assertEqual(out.getvalue(), render_tables(self.tmp))
        self.assertIn("| w4_p2_batch | 1502.5 | 50.0% | 10.0 ms |", out.getvalue())


if __name__ == "__main__":
    unittest.main()
