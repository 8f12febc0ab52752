"""Tests for scripts/kernel_families.py: two summaries side by side, from a real analysis and from
hand-written families (one it does not know given a row of its own), the inputs it refuses (a FIFO,
a device or an oversized file before reading it), and --out (a symlink followed, a FIFO refused,
/dev/null kept).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_kernel_families.py
(all tests: scripts/dev/python_tests.sh)
"""

import contextlib
import io
import json
import os
import resource
import stat
import subprocess
import sys
import unittest
from unittest import mock

from scripts.support.nsys_exports import TempDirCase, basic_export
from scripts.support.testutil import SCRIPTS_DIR
import kernel_families


def _summary(families, steps=2, images_per_s=100.0):
    return {"kernel_families": families, "steps": steps, "images_per_s": images_per_s}


def _fam(name, ms, pct, steps=2):
    return {"family": name, "launches": 1, "total_ms": ms, "pct": pct, "ms_per_step": ms / steps}


class KernelFamiliesTest(TempDirCase):
    def write(self, name, obj):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = kernel_families.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_side_by_side_in_family_order(self):
        eager = self.write(
            "eager.json",
            _summary(
                [
                    _fam("batch norm", 4.0, 40.0),
                    _fam("ReLU", 2.0, 20.0),
                    _fam("convolution", 4.0, 40.0),
                ],
                images_per_s=3000.0,
            ),
        )
        fused = self.write(
            "fused.json",
            _summary(
                [_fam("BN+ReLU (fused)", 3.0, 42.86), _fam("convolution", 4.0, 57.14)],
                images_per_s=3500.0,
            ),
        )
        out_md = os.path.join(self.tmp, "t.md")
        rc, out, _ = self.run_main(eager, fused, "--names", "eager", "fused", "--out", out_md)
        self.assertEqual(rc, 0)
        lines = out.strip().splitlines()
        self.assertEqual(lines[0], "| family | eager % | eager ms/step | fused % | fused ms/step |")
        self.assertEqual(lines[2], "| batch norm | 40.0 | 2.00 | 0.0 | 0.00 |")
        self.assertEqual(lines[3], "| BN+ReLU (fused) | 0.0 | 0.00 | 42.9 | 1.50 |")
        self.assertEqual(lines[4], "| ReLU | 20.0 | 1.00 | 0.0 | 0.00 |")
        self.assertEqual(lines[5], "| convolution | 40.0 | 2.00 | 57.1 | 2.00 |")
        self.assertEqual(lines[6], "| all kernels | 100.0 | 5.00 | 100.0 | 3.50 |")
        self.assertEqual(lines[7], "| images/s | 3000.0 |  | 3500.0 |  |")
        with open(out_md) as f:
            self.assertEqual(f.read(), out)

    def test_what_other_holds_is_named_per_run(self):
        other = _fam("other", 2.0, 20.0)
        other["parts"] = [
            {"label": "NLL loss fwd", "launches": 2, "total_ms": 1.5, "pct": 15.0},
            {"label": "mean", "launches": 2, "total_ms": 0.5, "pct": 5.0},
        ]
        a = self.write("a.json", _summary([_fam("convolution", 8.0, 80.0), other]))
        b = self.write("b.json", _summary([_fam("convolution", 8.0, 100.0)]))
        rc, out, _ = self.run_main(a, b, "--names", "a", "b")
        self.assertEqual(rc, 0)
        self.assertIn(
            "\n\nLargest in other, a: NLL loss fwd 0.75 ms/step (15.0%); mean 0.25 ms/step "
            "(5.0%)\n",
            out,
        )
        self.assertNotIn("Largest in other, b", out)

    def test_a_real_analysis(self):
        from nsys_analysis.capture.export import load_export
        from nsys_analysis.capture.summary import compute_summary

        s = compute_summary(load_export(self.build(basic_export())), None, 2)
        path = self.write("s.json", s)
        rc, out, _ = self.run_main(path)
        self.assertEqual(rc, 0)
        self.assertIn("| batch norm | 22.8 | 0.65 |", out)
        self.assertIn("| convolution | 24.6 | 0.70 |", out)
        self.assertIn("| all kernels | 100.0 | 2.85 |", out)

    def test_refusals_name_the_file_or_flag(self):
        good = self.write("good.json", _summary([_fam("ReLU", 1.0, 100.0)]))
        cases = [
            ((os.path.join(self.tmp, "missing.json"),), "missing.json: no such file"),
            ((self.write("bad.json", "{not json"),), "bad.json: not JSON"),
            ((self.write("old.json", {"steps": 2}),), "old.json: no kernel_families"),
            ((good, good, "--names", "one"), "--names: expected 2 names (one per summary), got 1"),
            (
                (self.write("shape.json", {"kernel_families": [{"family": "ReLU"}]}),),
                "shape.json: kernel_families is not a list of families as analyze.py writes them",
            ),
            (
                (self.write("fams.json", {"kernel_families": 5}),),
                "fams.json: kernel_families is not a list",
            ),
            (
                (self.write("parts.json", _summary([dict(_fam("other", 1.0, 100.0), parts=[3])])),),
                "parts.json: kernel_families is not a list",
            ),
            (
                (self.write("steps.json", _summary([_fam("ReLU", 1.0, 100.0)], steps="two")),),
                "steps.json: steps is 'two', expected a count of steps",
            ),
            (
                (good, "--out", self.tmp),
                "--out %s: is a directory, expected a regular file" % self.tmp,
            ),
            (
                (good, "--out", os.path.join(good, "t.md")),
                "--out %s: %s is not a directory" % (os.path.join(good, "t.md"), good),
            ),
            (
                (good, "--out", os.path.join(self.tmp, "no", "t.md")),
                "its directory %s does not exist" % os.path.join(self.tmp, "no"),
            ),
        ]
        for argv, message in cases:
            rc, out, err = self.run_main(*argv)
            self.assertEqual(rc, 2, argv)
            self.assertIn(message, err)
            self.assertEqual(out, "")

    def test_a_family_it_does_not_know_has_a_row_of_its_own_and_the_rows_add_up(self):
        path = self.write(
            "new.json",
            _summary(
                [_fam("ReLU", 1.0, 40.0), _fam("mystery", 1.5, 60.0), _fam("other", 0.0, 0.0)]
            ),
        )
        rc, out, err = self.run_main(path, "--names", "new")
        self.assertEqual(rc, 0, err)
        lines = out.strip().splitlines()
        self.assertEqual(
            lines[2:6],
            [
                "| ReLU | 40.0 | 0.50 |",
                "| mystery | 60.0 | 0.75 |",  # before other, the catch-all
                "| other | 0.0 | 0.00 |",
                "| all kernels | 100.0 | 1.25 |",
            ],
        )

    def test_a_family_given_twice_is_refused_naming_the_file_and_the_family(self):
        path = self.write(
            "twice.json", _summary([_fam("ReLU", 1.0, 50.0), _fam("ReLU", 1.0, 50.0)])
        )
        rc, out, err = self.run_main(path)
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("twice.json: kernel_families holds the family ReLU twice", err)

    def test_steps_must_be_a_count_of_steps(self):
        fams = [_fam("ReLU", 1.0, 100.0)]
        for name, steps, shown in (
            ("neg.json", "-8", "-8"),
            ("nan.json", "NaN", "nan"),
            ("inf.json", "Infinity", "inf"),
            ("half.json", "2.5", "2.5"),
            ("bool.json", "true", "True"),
        ):
            with self.subTest(steps=steps):
                text = json.dumps(_summary(fams)).replace('"steps": 2', '"steps": %s' % steps)
                rc, out, err = self.run_main(self.write(name, text))
                self.assertEqual((rc, out), (2, ""))
                self.assertIn(
                    "%s: steps is %s, expected a count of steps (0 or more) or null"
                    % (name, shown),
                    err,
                )
        # analyze.py writes 0 for a capture without torch_step ranges (and no ms_per_step): the
        # shares are still compared, ms per step is n/a.
        none = self.write(
            "none.json", _summary([{"family": "ReLU", "total_ms": 1.0, "pct": 100.0}], 0)
        )
        rc, out, err = self.run_main(none)
        self.assertEqual(rc, 0, err)
        self.assertIn("| all kernels | 100.0 | n/a |", out)

    def test_a_family_without_pct_is_refused_naming_the_file_and_the_family(self):
        row = _fam("ReLU", 1.0, 100.0)
        del row["pct"]
        rc, out, err = self.run_main(self.write("nopct.json", _summary([row])))
        self.assertEqual((rc, out), (2, ""))
        self.assertIn(
            "nopct.json: kernel_families is not a list of families as analyze.py writes them: "
            "kernel_families[0] (ReLU) lacks pct",
            err,
        )

    def test_a_fifo_a_device_or_an_oversized_file_is_refused_before_it_is_read(self):
        fifo = os.path.join(self.tmp, "summary.fifo")
        os.mkfifo(fifo)

        def limit_memory():
            resource.setrlimit(resource.RLIMIT_AS, (1 << 30, 1 << 30))

        for path, why in ((fifo, "is a FIFO"), ("/dev/zero", "is a character device")):
            with self.subTest(path=path):
                # A subprocess, time- and memory-limited: a reader that blocks or reads without end
                # fails the test instead of hanging it.
                p = subprocess.run(
                    [sys.executable, os.path.join(SCRIPTS_DIR, "kernel_families.py"), path],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    preexec_fn=limit_memory,
                )
                self.assertEqual((p.returncode, p.stdout), (2, ""), p.stderr)
                self.assertIn(
                    "kernel_families.py: error: summary %s: %s, expected analyze.py's summary.json"
                    % (path, why),
                    p.stderr,
                )
        big = self.write("big.json", _summary([_fam("ReLU", 1.0, 100.0)]))
        with mock.patch.object(kernel_families, "MAX_SUMMARY_BYTES", 16, create=True):
            rc, out, err = self.run_main(big)
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("big.json: more than the 16 bytes a summary.json holds", err)

    def test_json_nested_too_deeply_is_not_json_it_can_read(self):
        deep = self.write("deep.json", "[" * 100000 + "]" * 100000)
        rc, out, err = self.run_main(deep)
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("deep.json: not JSON it can read (nested too deeply)", err)

    def test_out_follows_a_symlink_and_never_replaces_a_fifo_or_dev_null(self):
        good = self.write("good.json", _summary([_fam("ReLU", 1.0, 100.0)]))
        os.mkdir(os.path.join(self.tmp, "real"))
        target = os.path.join(self.tmp, "real", "t.md")
        link = os.path.join(self.tmp, "t.md")
        os.symlink(target, link)
        rc, out, err = self.run_main(good, "--out", link)
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.islink(link))
        with open(target) as f:
            self.assertEqual(f.read(), out)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "real")), ["t.md"])
        fifo = os.path.join(self.tmp, "t.fifo")
        os.mkfifo(fifo)
        rc, out, err = self.run_main(good, "--out", fifo)
        self.assertEqual(rc, 2)
        self.assertIn("kernel_families.py: error: --out %s: is a FIFO" % fifo, err)
        self.assertEqual(out, "")  # refused before anything is read or printed
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        rc, out, err = self.run_main(good, "--out", os.devnull)
        self.assertEqual((rc, err), (0, ""))
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))


if __name__ == "__main__":
    unittest.main()
