"""Tests for scripts/experiments/benchmarks.py, the command line: --help of every command from
another directory, usage errors, a missing program, an --out that cannot be written, `table`
printing the package's tables and naming a result file it cannot read. The package's benchmark
modules have their own tests (nsys_analysis/bench/: test_runs.py, test_commands.py, test_ncu.py,
test_tables.py).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_benchmarks.py
(all tests: scripts/dev/python_tests.sh)
"""

import contextlib
import io
import json
import os
import subprocess
import sys
import tempfile
import unittest

from scripts.support.testutil import REPO, ScratchCase

import benchmarks
from nsys_analysis.bench.tables import render_tables

SCRIPT = os.path.join(REPO, "scripts", "experiments", "benchmarks.py")

COMMANDS = ("checks", "compare", "scan", "loader", "experiments", "ncu", "table")


class CliTest(ScratchCase):
    tmp_prefix = "benchmarks_test_"

    def run_cli(self, *args):
        return subprocess.run(
            [sys.executable, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tempfile.gettempdir(),
        )

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
        r = self.run_cli(
            "scan",
            "--data",
            self.tmp,
            "--out",
            self.tmp,
            "--binary",
            os.path.join(self.tmp, "nope"),
        )
        self.assertEqual(r.returncode, 1)
        self.assertEqual(
            r.stderr,
            "benchmarks.py: error: train_resnet50 not found at %s (build it, or pass "
            "--binary)\n" % os.path.join(self.tmp, "nope"),
        )

    def test_table_prints_the_tables(self):
        with open(os.path.join(self.tmp, "scan.json"), "w") as f:
            json.dump(
                {
                    "ceiling": [3000.0, 3010.0],
                    "steps": 64,
                    "rows": [
                        {"name": "synthetic_0", "images_per_s": 3000.0, "batch_wait_total_ms": 0.0},
                        {
                            "name": "w4_p2_batch",
                            "images_per_s": 1502.5,
                            "batch_wait_total_ms": 10.0,
                        },
                    ],
                },
                f,
            )
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(benchmarks.main(["table", "--out", self.tmp]), 0)
        self.assertEqual(out.getvalue(), render_tables(self.tmp))
        self.assertIn("| w4_p2_batch | 1502.5 | 50.0% | 10.0 ms |", out.getvalue())

    def test_table_of_result_files_it_cannot_read(self):
        cases = [
            ("checks", "{", "checks.json is not JSON"),
            (
                "checks",
                "[]",
                "checks.json holds list, expected the JSON object benchmarks.py checks writes",
            ),
            (
                "checks",
                '{"runs": 5}',
                "checks.json: not the results benchmarks.py checks writes (TypeError",
            ),
            (
                "scan",
                '{"rows": []}',
                "scan.json: not the results benchmarks.py scan writes (KeyError: 'ceiling')",
            ),
        ]
        for name, text, message in cases:
            with self.subTest(text=text):
                for old in os.listdir(self.tmp):
                    os.remove(os.path.join(self.tmp, old))
                with open(os.path.join(self.tmp, name + ".json"), "w") as f:
                    f.write(text)
                r = self.run_cli("table", "--out", self.tmp)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertTrue(
                    r.stderr.startswith("benchmarks.py: error: " + os.path.join(self.tmp, message)),
                    r.stderr,
                )
                self.assertEqual(len(r.stderr.splitlines()), 1)
        missing = os.path.join(self.tmp, "missing")
        r = self.run_cli("table", "--out", missing)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--out %s: no such directory" % missing, r.stderr)

    def test_out_that_cannot_be_written_stops_before_any_run(self):
        afile = os.path.join(self.tmp, "afile")
        with open(afile, "w") as f:
            f.write("x")
        os.makedirs(os.path.join(self.tmp, "o", "scan.json"))
        cases = [
            (afile, "--out %s: is a regular file, expected a directory" % afile),
            (
                os.path.join(afile, "x"),
                "--out %s: %s is not a directory" % (os.path.join(afile, "x"), afile),
            ),
            (
                os.path.join(self.tmp, "o"),
                "--out %s: is a directory, expected a regular file"
                % os.path.join(self.tmp, "o", "scan.json"),
            ),
        ]
        for out, message in cases:
            with self.subTest(out=out):
                # The missing binary would be exit 1: the --out check comes first.
                r = self.run_cli(
                    "scan",
                    "--data",
                    self.tmp,
                    "--out",
                    out,
                    "--binary",
                    os.path.join(self.tmp, "nope"),
                )
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("benchmarks.py: error: " + message, r.stderr)
        r = self.run_cli("ncu", "--out", self.tmp, "--binary", self.tmp)
        self.assertEqual(r.returncode, 1)
        self.assertIn("train_resnet50 expected at %s, found a directory" % self.tmp, r.stderr)


if __name__ == "__main__":
    unittest.main()
