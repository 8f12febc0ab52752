"""Tests for scripts/experiments/bench_batchnorm.py without a GPU: its flags, and the clear error
(exit 1) when PyTorch, torchvision or a CUDA device is missing, each played by a stand-in package
first on PYTHONPATH.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_bench_batchnorm.py
(all tests: scripts/dev/python_tests.sh)
"""

import os
import sys
import unittest

from scripts.support.testutil import REPO, StandInPackagesCase

SCRIPT = os.path.join(REPO, "scripts", "experiments", "bench_batchnorm.py")


class BenchBatchnormTest(StandInPackagesCase):
    SCRIPT = SCRIPT

    def test_help_names_every_flag_without_importing_torch(self):
        self.package("torch", "raise RuntimeError('imported for --help')\n")
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in ("--steps", "--warmup", "--rounds", "--batch-size", "--no-kernels"):
            self.assertIn(flag, r.stdout)

    def test_bad_flags_are_usage_errors_naming_the_flag(self):
        for args, flag in (
            (("--steps", "0"), "--steps"),
            (("--rounds", "x"), "--rounds"),
            (("--batch-size=-2",), "--batch-size"),
            (("--bogus",), "--bogus"),
        ):
            r = self.run_script(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(flag, r.stderr)

    def test_missing_pytorch_is_named_with_the_interpreter(self):
        self.package("torch", "raise ImportError('no torch here')\n")
        r = self.run_script("--steps", "1")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PyTorch is not importable by %s" % sys.executable, r.stderr)
        self.assertNotIn("Traceback", r.stderr)

    def test_missing_torchvision_and_missing_cuda_are_named(self):
        self.package(
            "torch",
            "__version__ = '9.9'\nclass cuda:\n    @staticmethod\n"
            "    def is_available():\n        return False\n",
        )
        self.package("torch/nn", "")
        self.package("torch/nn/functional", "")
        self.package("torchvision", "raise ImportError('no torchvision here')\n")
        r = self.run_script()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("torchvision is not importable", r.stderr)
        self.package("torchvision", "")
        r = self.run_script()
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no CUDA device for PyTorch 9.9", r.stderr)
        self.assertNotIn("Traceback", r.stderr)


if __name__ == "__main__":
    unittest.main()
