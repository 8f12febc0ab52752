"""Tests for scripts/nsys_analysis/sweep/figures.py: figures 4 and 5 of a sweep, with runs missing a
metric and a panel without runs.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/sweep/test_figures.py
"""

import importlib.util
import os
import sys
import unittest

from scripts.support.testutil import ScratchCase
from nsys_analysis.sweep.figures import plot_sweep, plot_sweep_batch_wait

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


@unittest.skipUnless(HAVE_MPL, "matplotlib not installed for %s" % sys.executable)
class SweepFigureTest(ScratchCase):
    def test_sweep_figures_and_empty_inputs(self):
        rows = [
            {
                "config": "reuse_8",
                "runs": [
                    {"seed": 2026, "images_per_s": 4236.0, "no_activity_pct": 3.1},
                    {"seed": 2027, "images_per_s": 4210.0, "no_activity_pct": 2.9},
                ],
            },
            {
                "config": "no_pin",
                "runs": [{"seed": 2026, "images_per_s": 2000.0, "no_activity_pct": None}],
            },
        ]
        p4 = plot_sweep(rows, os.path.join(self.tmp, "fig4.png"))
        p5 = plot_sweep_batch_wait(
            [("reset_8 seed 2026", [671.0, 1.0, 0.5]), ("reuse_8 seed 2026", [3.7, 0.4, 0.3])],
            [],
            os.path.join(self.tmp, "fig5.png"),
        )
        for p in (p4, p5):
            self.assertGreater(os.path.getsize(p), 10000)


if __name__ == "__main__":
    unittest.main()
