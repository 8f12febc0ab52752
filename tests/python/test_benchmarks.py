"""Tests for scripts/benchmarks.py, the command line: `table` printing the package's tables. The
package's benchmark modules have their own tests (test_bench_runs.py, test_bench_commands.py,
test_ncu.py, test_bench_tables.py).

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import contextlib
import io
import json
import os
import shutil
import sys
import tempfile
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import benchmarks  # noqa: E402
from nsys_analysis.bench_tables import render_tables  # noqa: E402


class CliTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="benchmarks_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

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
