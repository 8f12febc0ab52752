"""Tests for scripts/nsys_analysis/capture/repeats.py: the median capture (the lower middle one of
an even count), the spread of a figure, and repeats.json's figures and check counts over captures of
tracer_cost_export() with their reports.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_repeats.py
"""

import unittest

from scripts.support.nsys_exports import STAGE, TempDirCase, tracer_cost_export, tracer_cost_report
from nsys_analysis.capture.repeats import MAIN_THREAD, compute_repeats, median_capture, spread


def ips(*values):
    return [tracer_cost_report(v) for v in values]


class MedianTest(unittest.TestCase):
    def test_median_capture(self):
        self.assertEqual(median_capture(ips(320.0, 250.0, 300.0)), 2)
        self.assertEqual(
            median_capture(ips(300.0, 250.0, 320.0, 310.0)), 0
        )  # lower middle: 300 of 250 300 310 320
        self.assertEqual(median_capture(ips(300.0, 300.0)), 0)  # a tie: the earlier
        self.assertEqual(median_capture(ips(5.0)), 0)
        self.assertIsNone(median_capture(ips(300.0) + [{"capture": {"steps": 3}}]))
        self.assertIsNone(median_capture([]))

    def test_spread(self):
        self.assertEqual(
            dict(spread([3.0, None, 1.0, 2.0])),
            {"min": 1.0, "median": 2.0, "max": 3.0, "values": [3.0, None, 1.0, 2.0]},
        )
        self.assertEqual(spread([1.0, 2.0])["median"], 1.5)
        self.assertEqual(
            dict(spread([None])), {"min": None, "median": None, "max": None, "values": [None]}
        )


class ComputeRepeatsTest(TempDirCase):
    def test_figures_and_checks_across_captures(self):
        untraced = [
            ("u%d.json" % k, tracer_cost_report(v)) for k, v in ((1, 480.0), (2, 500.0), (3, 520.0))
        ]
        summaries = []
        for k, v in enumerate((320.0, 250.0, 470.0), 1):
            b = tracer_cost_export()
            if k == 2:  # one capture whose stage made one more call a step
                for step in range(3):
                    b.api("cudaStreamQuery_v3020", 10.0 * step + 1.3, 10.0 * step + 1.31, tid=STAGE)
            summaries.append(
                self.summarize(b, tracer_cost_report(v), untraced=untraced, name="c%d.sqlite" % k)
            )
        r = compute_repeats(
            summaries,
            ["c1", "c2", "c3"],
            ["r1", "r2", "r3"],
            [p for p, _ in untraced],
            [rep for _, rep in untraced],
            ["d1", "d2", "d3"],
            0,
            "median_dir",
        )
        self.assertEqual(
            (r["captures"], r["median_capture"], r["median_analysis"]), (3, 1, "median_dir")
        )
        self.assertEqual(
            dict(r["tracer_bound"]), {"count": 2, "of": 3, "values": [True, True, False]}
        )
        fig = {f["figure"]: f for f in r["figures"]}
        self.assertEqual(
            [f["figure"] for f in r["figures"]][:3],
            ["traced_images_per_s", "untraced_images_per_s", "traced_over_untraced"],
        )
        self.assertEqual(
            [fig["traced_images_per_s"][k] for k in ("min", "median", "max", "values")],
            [250.0, 320.0, 470.0, [320.0, 250.0, 470.0]],
        )
        self.assertEqual(fig["untraced_images_per_s"]["values"], [480.0, 500.0, 520.0])
        self.assertEqual(fig["traced_over_untraced"]["values"], [0.64, 0.5, 0.94])
        self.assertEqual(fig["no_activity_pct"]["values"], [29.0] * 3)
        self.assertEqual(fig["profiler_overhead_ms"]["values"], [3.4] * 3)
        self.assertEqual(fig["calls_per_step:loader/gpu"]["values"], [11.0, 12.0, 11.0])
        self.assertEqual(fig["calls_per_step:%s" % MAIN_THREAD]["median"], 2.0)
        # The extra call lies inside the stage's gpu_decode ranges: one more call per batch too.
        self.assertEqual(fig["calls_per_unit:loader/gpu:gpu_decode"]["values"], [11.0, 12.0, 11.0])
        self.assertEqual(
            fig["calls_per_unit:loader/gpu:gpu_decode"]["label"],
            "CUDA calls per gpu_decode, loader/gpu",
        )
        self.assertFalse(
            [f for f in fig if f.startswith("calls_per_unit:") and "gpu_decode" not in f]
        )
        self.assertEqual(fig["batch_wait_total_ms"]["values"], [3.0] * 3)
        checks = {c["check"]: c for c in r["checks"]}
        self.assertEqual(
            (checks["capture_cost"]["text"], checks["capture_cost"]["values"]),
            ("1 of 3", [False, False, True]),
        )
        self.assertEqual(checks["step_count"]["text"], "3 of 3")


if __name__ == "__main__":
    unittest.main()
