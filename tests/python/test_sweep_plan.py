"""Tests for scripts/nsys_analysis/sweep_plan.py: the article's configurations, one run's train_resnet50
arguments and the shuffled plan.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import os
import sys
import unittest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
from nsys_analysis.sweep_plan import (DEFAULT_CONFIGS, changes_from_baseline, expected_steps,  # noqa: E402
                                      make_plan, run_args)


class PlanTest(unittest.TestCase):
    def test_default_configs_are_the_articles(self):
        c = DEFAULT_CONFIGS
        self.assertEqual(list(c), ["reset_8", "reuse_8", "reuse_64", "workers_4", "workers_12", "prefetch_1",
                                   "prefetch_4", "no_pin"])
        self.assertEqual(dict(c["reuse_64"]), {"steps": 64, "warmup": 3, "batch_size": 128, "workers": 8,
                                               "prefetch_factor": 2, "pin_memory": True, "reuse_iterator": True})
        self.assertEqual(changes_from_baseline(c["reset_8"]), "steps=8, reuse_iterator=false")
        self.assertEqual(changes_from_baseline(c["no_pin"]), "pin_memory=false")
        self.assertEqual(changes_from_baseline(c["reuse_64"]), "baseline")

    def test_shuffled_plan_is_reproducible(self):
        plan = make_plan(DEFAULT_CONFIGS, [2026, 2027], 1)
        self.assertEqual(sorted(plan), sorted((n, s) for n in DEFAULT_CONFIGS for s in (2026, 2027)))
        self.assertEqual(plan, make_plan(DEFAULT_CONFIGS, [2026, 2027], 1))
        self.assertNotEqual(plan, [(n, s) for n in DEFAULT_CONFIGS for s in (2026, 2027)])
        self.assertNotEqual(plan, make_plan(DEFAULT_CONFIGS, [2026, 2027], 2))

    def test_run_args(self):
        cfg = DEFAULT_CONFIGS["no_pin"]
        args = run_args(cfg, 2027, "/data/food", ["--device", "cpu", "--batch-size", "4", "--steps=2"])
        self.assertEqual(args, ["--data", "/data/food", "--warmup", "3", "--workers", "8", "--prefetch-factor", "2",
                                "--pin-memory=false", "--reuse-iterator=true", "--seed", "2027",
                                "--device", "cpu", "--batch-size", "4", "--steps=2"])
        self.assertEqual(expected_steps(cfg, ["--steps=2"]), 2)
        self.assertEqual(expected_steps(cfg, ["--synthetic"]), 64)


if __name__ == "__main__":
    unittest.main()
