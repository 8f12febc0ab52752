"""Tests for scripts/nsys_analysis/profile/outputs.py: every output's name (per capture, per rank),
the checks before anything runs (directories, FIFOs, a file in the way, /dev/null fine), stale
outputs removed through symlinks, the reports copied or saved from a JSON line, and the listing.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_outputs.py
(all tests: scripts/dev/python_tests.sh)
"""

import json
import os
import stat
import unittest

from scripts.support.testutil import ScratchCase

from nsys_analysis.common.exit_status import FAILURE, USAGE
from nsys_analysis.profile.errors import ProfileError
from nsys_analysis.profile.outputs import (
    capture_outputs,
    check_outputs,
    copy_report,
    prepare,
    ranks_listing,
    ranks_outputs,
    ranks_stale_outputs,
    save_report_line,
    single_listing,
    single_outputs,
    stale_outputs,
)

CSVS = [
    "_nvtx_sum.csv",
    "_cuda_gpu_kern_sum.csv",
    "_cuda_gpu_mem_time_sum.csv",
    "_cuda_api_sum.csv",
]


class NamesTest(unittest.TestCase):
    def test_capture_outputs(self):
        self.assertEqual(
            capture_outputs("o/x.2"),
            ["o/x.2.nsys-rep", "o/x.2.sqlite", "o/x.2.json"] + ["o/x.2" + c for c in CSVS],
        )

    def test_one_capture(self):
        self.assertEqual(
            single_outputs("o", ["o"], True, True),
            ["o.log", "o.untraced.log"] + capture_outputs("o") + ["o.untraced.json", "o_analysis/"],
        )
        self.assertEqual(single_outputs("o", ["o"], False, False), ["o.log"] + capture_outputs("o"))

    def test_several_captures(self):
        out = single_outputs("o", ["o.1", "o.2"], True, True)
        self.assertEqual(out[:2], ["o.log", "o.untraced.log"])
        self.assertEqual(out[2:11], capture_outputs("o.1") + ["o.1.untraced.json", "o.1_analysis/"])
        self.assertEqual(
            out[-4:], ["o.2_analysis/", "o_analysis/", "o_repeats.json", "o_repeats.md"]
        )
        self.assertNotIn("o_repeats.md", single_outputs("o", ["o.1", "o.2"], True, False))

    def test_ranks(self):
        out = ranks_outputs("o", 2, True, True)
        self.assertEqual(out[:2], ["o.log", "o.untraced.log"])
        self.assertEqual(
            out[2:11],
            capture_outputs("o.rank0") + ["o.untraced.rank0.json", "o.rank0_analysis/"],
        )
        self.assertEqual(out[-1], "o_ranks_analysis/")
        self.assertEqual(
            ranks_outputs("o", 1, False, False), ["o.log"] + capture_outputs("o.rank0")
        )

    def test_stale(self):
        csvs = ["_nvtx_sum.csv", "_cuda_gpu_kern_sum.csv", "_cuda_gpu_mem_time_sum.csv"]
        csvs.append("_cuda_api_sum.csv")  # the stats CSVs too: nsys stats may write none
        self.assertEqual(
            stale_outputs(["o.1", "o.2"], True),
            ["o.1.nsys-rep", "o.1.sqlite", "o.1.untraced.json"]
            + ["o.1" + csv for csv in csvs]
            + ["o.1.json"]
            + ["o.2.nsys-rep", "o.2.sqlite", "o.2.untraced.json"]
            + ["o.2" + csv for csv in csvs]
            + ["o.2.json"],
        )
        self.assertEqual(
            stale_outputs(["o"], False),
            ["o.nsys-rep", "o.sqlite", "o.untraced.json"] + ["o" + csv for csv in csvs],
        )
        self.assertEqual(
            ranks_stale_outputs("o", 1, True),
            ["o.rank0.nsys-rep", "o.rank0.sqlite", "o.untraced.rank0.json"]
            + ["o.rank0" + csv for csv in csvs]
            + ["o.rank0.json"],
        )


class FilesTest(ScratchCase):
    tmp_prefix = "profile_outputs_test_"

    def path(self, name):
        return os.path.join(self.tmp, name)

    def refused(self, prefix, paths):
        with self.assertRaises(ProfileError) as cm:
            check_outputs(prefix, paths)
        self.assertEqual(cm.exception.status, USAGE)
        return cm.exception.message

    def test_check_outputs(self):
        p = self.path("out/x")
        # Missing directories are made later; /dev/null is written in place.
        check_outputs(p, [p + ".log", p + "_analysis/", os.devnull])
        os.makedirs(p + ".sqlite")
        self.assertTrue(
            self.refused(p, [p + ".log", p + ".sqlite"]).startswith(
                "--prefix %s: %s.sqlite: is a directory" % (p, p)
            )
        )
        os.mkfifo(p + ".log")
        self.assertIn("%s.log: is a FIFO" % p, self.refused(p, [p + ".log", p + ".sqlite"]))
        with open(p + "_analysis", "w") as f:
            f.write("x")
        self.assertEqual(
            self.refused(p, [p + "_analysis/"]),
            "--prefix %s: %s_analysis: is not a directory (--analyze writes there)" % (p, p),
        )
        q = os.path.join(p + "_analysis", "y")
        self.assertIn("%s_analysis is not a directory" % p, self.refused(q, [q + ".json"]))

    def test_prepare_removes_stale_outputs_through_symlinks(self):
        elsewhere = self.path("elsewhere.json")
        with open(elsewhere, "w") as f:
            f.write("{}")
        os.makedirs(self.path("out"))
        link = self.path("out/x.json")
        os.symlink(elsewhere, link)
        fifo = self.path("out/x.sqlite")
        os.mkfifo(fifo)
        prepare(self.path("new/dir/x"), [link, fifo, self.path("out/none")])
        self.assertTrue(os.path.isdir(self.path("new/dir")))
        self.assertTrue(os.path.islink(link))  # the link kept, its target removed
        self.assertFalse(os.path.exists(elsewhere))
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))  # never removed
        prepare("x", [])  # a prefix in the working directory: nothing to make

    def test_copy_report(self):
        src = self.path("mine.json")
        with open(src, "w") as f:
            f.write('{"a": 1}')
        target = self.path("elsewhere/x.json")
        os.makedirs(os.path.dirname(target))
        link = self.path("x.json")
        os.symlink(target, link)
        copy_report(src, link)
        self.assertTrue(os.path.islink(link))
        with open(target) as f:
            self.assertEqual(f.read(), '{"a": 1}')
        copy_report(src, src)  # one file: nothing to do
        with open(src) as f:
            self.assertEqual(f.read(), '{"a": 1}')
        with self.assertRaises(ProfileError) as cm:
            copy_report(self.path("missing.json"), link)
        self.assertEqual(cm.exception.status, FAILURE)
        self.assertIn("cannot copy %s to %s" % (self.path("missing.json"), link), str(cm.exception))

    def test_save_report_line(self):
        path = self.path("r.json")
        lines = ['{"images_per_s": 1}', '  {"images_per_s": 2}  ', "{not json}", "[1]"]
        self.assertTrue(save_report_line(lines, path))
        with open(path) as f:
            self.assertEqual(json.load(f), {"images_per_s": 2})
        self.assertFalse(save_report_line(["loading...", "{broken"], self.path("none.json")))
        self.assertFalse(os.path.exists(self.path("none.json")))
        os.mkdir(self.path("dir.json"))
        with self.assertRaises(ProfileError) as cm:
            save_report_line(lines, self.path("dir.json"))
        self.assertIn("cannot write the run report", str(cm.exception))

    def test_listings(self):
        p = self.path("x")
        names = ["x.1.json", "x.2.untraced.json"]
        for pfx in ("x.1", "x.2", "x", "x.rank0", "x.rank1"):
            names += [pfx + ".nsys-rep", pfx + ".sqlite", pfx + "_nvtx_sum.csv"]
            names.append(pfx + "_cuda_gpu_kern_sum.csv")
        for name in names:
            with open(self.path(name), "w") as f:
                f.write("{}")
        lines = single_listing(p, [p + ".1", p + ".2"], True, True)
        self.assertEqual(lines[:3], ["", "capture 1:", "capture:     %s.1.nsys-rep" % p])
        self.assertIn("nvtx_sum:    %s.1_nvtx_sum.csv" % p, lines)
        self.assertIn("cuda_gpu_kern_sum: %s.1_cuda_gpu_kern_sum.csv" % p, lines)
        # Only what is there: nsys stats wrote no cuda_api_sum CSV.
        self.assertFalse([line for line in lines if line.startswith("cuda_api_sum:")])
        self.assertIn("run report:  %s.1.json" % p, lines)
        self.assertNotIn("run report:  %s.2.json" % p, lines)
        self.assertIn("untraced:    %s.2.untraced.json" % p, lines)
        self.assertIn("summary:     %s.2_analysis/summary.md" % p, lines)
        self.assertEqual(
            lines[-4:],
            [
                "log:         %s.log" % p,
                "untraced log: %s.untraced.log" % p,
                "analysis:    %s_analysis/summary.md" % p,
                "repeats:     %s_repeats.md" % p,
            ],
        )
        lines = single_listing(p, [p], False, False)
        self.assertEqual(lines[1], "capture:     %s.nsys-rep" % p)
        self.assertEqual(lines[-1], "log:         %s.log" % p)
        lines = ranks_listing(p, 2, True, True)
        self.assertEqual(lines[1:3], ["rank 0:", "capture:     %s.rank0.nsys-rep" % p])
        self.assertIn("analysis:    %s.rank1_analysis/summary.md" % p, lines)
        self.assertEqual(lines[-1], "ranks:       %s_ranks_analysis/ranks.md" % p)


if __name__ == "__main__":
    unittest.main()
