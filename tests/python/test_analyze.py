"""Tests for scripts/analyze.py, the command line: exit codes and one-line errors for unusable inputs,
--check, and its outputs on the real nsys 2025.3 export in tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import importlib.util
import json
import os
import subprocess
import sys
import unittest

# nsys_exports first: it puts scripts/ on sys.path.
from nsys_exports import FIXTURE_DIR, REPO, SCHEMA, RealFixtureCase, TempDirCase, basic_export


SCRIPT = os.path.join(REPO, "scripts", "analyze.py")
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


class CliTest(TempDirCase):
    def run_cli(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=120)

    def test_missing_file(self):
        r = self.run_cli(os.path.join(self.tmp, "nope.sqlite"), "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_not_sqlite(self):
        path = os.path.join(self.tmp, "capture.sqlite")
        with open(path, "w") as f:
            f.write("this is a text file, not a database\n" * 10)
        r = self.run_cli(path, "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not an SQLite database", r.stderr)
        xz = os.path.join(FIXTURE_DIR, "py_reuse8.sqlite.xz")
        r = self.run_cli(xz, "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("decompress it first", r.stderr)

    def test_no_nvtx_table(self):
        b = basic_export()
        b.omit.add("NVTX_EVENTS")
        r = self.run_cli(self.build(b), "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no NVTX_EVENTS", r.stderr)

    def test_no_cuda_tables_nvtx_only(self):
        b = basic_export()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        out = os.path.join(self.tmp, "out")
        r = self.run_cli(self.build(b), "--out", out, "--no-figures", "--expected-steps", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertFalse(s["device_data"])
        for key in ("no_activity_pct", "h2d_copies", "sync_calls_in_steps", "layout_conversion_kernels",
                    "top_kernels", "api_calls"):
            self.assertIsNone(s[key], key)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["checks"], {"step_count": True, "copy_count": None, "capture_boundary": True,
                                       "no_sync_in_steps": None, "no_layout_conversions": None})
        self.assertIn("not evaluable", s["check_details"]["copy_count"])
        r = self.run_cli(self.build(b, "again.sqlite"), "--out", out, "--no-figures", "--check")
        self.assertEqual(r.returncode, 3)
        self.assertIn("copy_count", r.stderr)

    def test_check_mode(self):
        path = self.build(basic_export())
        out = os.path.join(self.tmp, "out")
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "2", "--check")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "3", "--strict")
        self.assertEqual(r.returncode, 3)
        self.assertIn("step_count", r.stderr)
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "3")
        self.assertEqual(r.returncode, 0)  # without --check a failing check is reported, not fatal
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()
        self.assertIn("| step_count | FAIL |", md)
        self.assertIn("## Ranges of other NVTX domains", md)


class RealFixtureCliTest(RealFixtureCase):
    def test_cli_with_python_report(self):
        report = os.path.join(self.tmp, "py_reuse8.json")
        with open(report, "w") as f:
            f.write('{"workers": 8, "prefetch": 2, "pin": true, "steps": 8, "reuse": true, "seed": 2026, '
                    '"images_per_s": 2864.1, "batch_wait_s": 0.0014, "max_wait_ms": 0.35, "h2d_submit_s": 0.0058}\n')
        out = os.path.join(self.tmp, "cli")
        args = [sys.executable, SCRIPT, self.export, "--report", report, "--out", out, "--check"]
        if not HAVE_MPL:
            args.append("--no-figures")
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual(s["images_per_s"], 2864.1)
        self.assertEqual(s["expected_steps_source"], "run report steps")
        self.assertEqual(s["stats_crosscheck"]["nvtx_sum"]["mismatches"], [])
        if HAVE_MPL:
            for name in ("fig1_phases.png", "fig2_top_kernels.png", "fig3_timeline.png", "fig5_batch_wait.png"):
                path = os.path.join(out, name)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
                self.assertGreater(os.path.getsize(path), 20000, name)


if __name__ == "__main__":
    unittest.main()
