"""Tests for scripts/experiments/reference_epochs.py without a GPU: its flags, its schedule against
train_resnet50's formula, and the clear error (exit 1) when PyTorch or a CUDA device is missing,
played by stand-in packages first on PYTHONPATH.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_reference_epochs.py
(all tests: scripts/dev/python_tests.sh)
"""

import math
import os
import sys
import unittest

from scripts.support.testutil import REPO, StandInPackagesCase
import reference_epochs

SCRIPT = os.path.join(REPO, "scripts", "experiments", "reference_epochs.py")


class ReferenceEpochsTest(StandInPackagesCase):
    SCRIPT = SCRIPT

    def test_the_schedule_is_train_resnet50s(self):
        # 10 epochs of 94 steps: 235 warm-up steps, then the cosine (lib/model/lr_schedule.h).
        total = 940
        warm = reference_epochs.warmup_steps(0.25, total)
        self.assertEqual(warm, 235)
        self.assertEqual(
            reference_epochs.warmup_steps(0.25, 26), 7
        )  # 6.5 rounds up, as std::llround
        self.assertEqual(reference_epochs.warmup_steps(0.25, 1), 1)
        self.assertAlmostEqual(reference_epochs.lr_factor(0, warm, total), 1 / 235)
        self.assertAlmostEqual(reference_epochs.lr_factor(234, warm, total), 1.0)
        self.assertAlmostEqual(reference_epochs.lr_factor(235, warm, total), 1.0)
        s = 600
        self.assertAlmostEqual(
            reference_epochs.lr_factor(s, warm, total),
            (1 + math.cos(math.pi * (s - warm) / (total - warm))) / 2,
        )
        self.assertAlmostEqual(
            reference_epochs.lr_factor(5000, warm, total),
            reference_epochs.lr_factor(total - 1, warm, total),
        )

    def test_help_and_bad_flags_without_importing_torch(self):
        self.package("torch", "raise RuntimeError('imported for --help')\n")
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        for flag in (
            "--epochs",
            "--batch-size",
            "--workers",
            "--precision",
            "--lr",
            "--warmup-share",
            "--report",
        ):
            self.assertIn(flag, r.stdout)
        self.assertIn("fp16", r.stdout)  # a choice of --precision, GradScaler's
        for args, flag in (
            (("/d", "--epochs", "0"), "--epochs"),
            (("/d", "--precision", "fp8"), "--precision"),
            (("/d", "--warmup-share", "2"), "--warmup-share"),
            ((), "root"),
        ):
            r = self.run_script(*args)
            self.assertEqual(r.returncode, 2, (args, r.stderr))
            self.assertIn(flag, r.stderr)
        r = self.run_script("/d", "--report", self.tmp)  # a directory
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--report", r.stderr)

    def test_missing_pytorch_or_cuda_is_named(self):
        self.package("torch", "raise ImportError('no torch here')\n")
        r = self.run_script("/d")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("PyTorch or torchvision is not importable by %s" % sys.executable, r.stderr)
        self.assertNotIn("Traceback", r.stderr)
        self.package(
            "torch",
            "__version__ = '9.9'\nclass cuda:\n    @staticmethod\n"
            "    def is_available():\n        return False\n",
        )
        self.package("torchvision", "")
        self.package("torchvision/datasets", "")
        self.package("torchvision/transforms", "")
        r = self.run_script("/d")
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("no CUDA device for PyTorch 9.9", r.stderr)


if __name__ == "__main__":
    unittest.main()
