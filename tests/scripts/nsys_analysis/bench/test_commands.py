"""Tests for scripts/nsys_analysis/bench/commands.py: the commands that need no GPU program to be
tested (loader_bench and ncu output, with stand-ins for both); the GPU runs themselves are measured,
not tested.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/bench/test_commands.py
"""

import contextlib
import io
import json
import os
import unittest
from unittest import mock

from .test_ncu import NCU_OUTPUT
from scripts.support.testutil import ScratchCase

from nsys_analysis.bench.commands import BenchSettings, run_loader, run_ncu
from nsys_analysis.bench.runs import BenchmarkError

# Stand-ins for loader_bench (JSON after some noise; stuck with --workers 2) and ncu (prints
# $FAKE_NCU_OUTPUT's file).
FAKE_LOADER_BENCH = r"""
import json, sys, time
workers = int(sys.argv[sys.argv.index("--workers") + 1])
if workers == 2:
    time.sleep(30)
print("loader_bench: warming up", flush=True)
print("note: on stderr", file=sys.stderr, flush=True)
print(json.dumps({"threads": workers, "fused_images_per_s_per_thread": 1000.0,
                  "full_images_per_s_per_thread": 500.0,
                  "decode_only_images_per_s_per_thread": 700.0}))
"""
FAKE_NCU = r"""
import os, sys
sys.stdout.write(open(os.environ["FAKE_NCU_OUTPUT"]).read())
"""


class CommandTest(ScratchCase):
    tmp_prefix = "bench_commands_test_"

    def test_loader_keeps_going_after_a_timeout(self):
        self.fake("loader_bench", FAKE_LOADER_BENCH)
        train = self.fake("train_resnet50", "")
        out = os.path.join(self.tmp, "out")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            rc = run_loader(
                BenchSettings(out=out, data=self.tmp, binary=train, workers=[1, 2], timeout=1)
            )
        self.assertEqual(rc, 0)
        with open(os.path.join(out, "loader.json")) as f:
            self.assertEqual([r["threads"] for r in json.load(f)["rows"]], [1])
        self.assertIn("failed (timeout", printed.getvalue())
        self.assertTrue(os.path.isfile(os.path.join(out, "loader", "workers_2.log")))

    def test_ncu_output_is_kept_and_grouped(self):
        self.fake("ncu", FAKE_NCU)
        train = self.fake("train_resnet50", "")
        output = os.path.join(self.tmp, "ncu_output.txt")
        with open(output, "w") as f:
            f.write(NCU_OUTPUT)
        out = os.path.join(self.tmp, "out")
        env = {"PATH": self.bin + os.pathsep + os.environ["PATH"], "FAKE_NCU_OUTPUT": output}
        with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(run_ncu(BenchSettings(out=out, binary=train)), 0)
        with open(os.path.join(out, "ncu", "ncu.csv")) as f:
            self.assertEqual(f.read(), NCU_OUTPUT)
        with open(os.path.join(out, "ncu.json")) as f:
            doc = json.load(f)
        self.assertEqual(
            (doc["kernels"], [g["kind"] for g in doc["groups"]]),
            (3, ["ReLU bwd", "BN fwd", "ReLU fwd"]),
        )

    def test_ncu_needs_ncu_on_path(self):
        train = self.fake("train_resnet50", "")
        with mock.patch.dict(os.environ, {"PATH": self.bin}):
            with self.assertRaisesRegex(BenchmarkError, "ncu \\(Nsight Compute\\) is not on PATH"):
                run_ncu(BenchSettings(out=os.path.join(self.tmp, "out"), binary=train))


if __name__ == "__main__":
    unittest.main()
