"""Tests for scripts/nsys_analysis/capture/markdown.py's capture-cost parts: summary.md opens with
the tracer-bound paragraph only when the capture is tracer-bound, and always has its "Capture cost"
section; its top says whether the input pipeline starved the GPU; repeats.md of several captures.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_markdown.py
"""

import unittest

from scripts.support.nsys_exports import (
    SCHEMA,
    TempDirCase,
    simulated_run,
    tracer_cost_export,
    tracer_cost_report,
)
from nsys_analysis.capture.markdown import render_markdown, starved_line, tracer_bound_paragraph

UNTRACED = [
    ("u1.json", tracer_cost_report(480.0, 8.0, 2.4, 2.95)),
    ("u2.json", tracer_cost_report(520.0, 8.2, 2.6, 2.95)),
]
PARAGRAPH = (
    "**The capture is tracer-bound:** traced 400 images/s, 0.80x the untraced 500 images/s (median "
    "of 2 untraced runs; the allowed slowdown is 10%). Nsight Systems' CUDA tracing, not the input "
    "pipeline, set this run's pace: trust the untraced figures for throughput and the capture for "
    "order and overlap. The tracer explains about 6.0 ms (69%) of the window's 8.7 ms without "
    "device activity. In the window, thread loader/gpu made 11 CUDA runtime calls a step (0.092 ms "
    "inside them, traced), the main thread (train_resnet50) 2 (0.002 ms), thread pt_autograd_0 1 "
    "(0.001 ms). The profiler's own overhead inside the window: 3.4 ms in 5 rows."
)


class CaptureCostMarkdownTest(TempDirCase):
    def markdown(self, name, untraced=UNTRACED, **kw):
        s = self.summarize(
            tracer_cost_export(),
            tracer_cost_report(400.0),
            untraced=untraced,
            name=name + ".sqlite",
            **kw,
        )
        return s, render_markdown(s)

    def test_the_tracer_bound_paragraph_opens_the_summary(self):
        s, md = self.markdown("bound")
        self.assertEqual(tracer_bound_paragraph(s), [PARAGRAPH, ""])
        self.assertTrue(
            md.startswith("# Nsight Systems capture summary\n\n" + PARAGRAPH + "\n\n- export:"),
            md[:600],
        )
        self.assertIn("## Capture cost (what the tracing itself cost)", md)
        self.assertIn(
            "| loader/gpu | 11 | 0.092 | 11 per gpu_decode (3 in the window, 11 inside them) | "
            "cudaLaunchKernel 5, cudaEventSynchronize 4, cudaMemcpyAsync 2 |",
            md,
        )
        self.assertIn("| train_resnet50 (main thread) | 2 | 0.002 |  | cudaLaunchKernel 2 |", md)
        self.assertIn("compare captures by calls per unit, not per step.", md)
        self.assertIn("| forward | 3.000 | 2.500 | 0.500 | 1.200 |", md)
        self.assertIn("| between steps | 2 | 1.500 |", md)
        self.assertIn("| backward | 3 | 0.300 | 0.050 | 0.150 | 0.150 | 50.0% |", md)
        self.assertIn(
            "of the window's 8.700 ms without device activity it explains 6.000 ms (69.0%)", md
        )
        self.assertLess(md.index("## Capture cost"), md.index("## Where the device sat idle"))

    def test_no_paragraph_when_not_tracer_bound_but_the_section_stays(self):
        for name, kw in (("looser", {"max_slowdown": 0.25}), ("none", {"untraced": []})):
            with self.subTest(name):
                s, md = self.markdown(name, **kw)
                self.assertEqual(tracer_bound_paragraph(s), [])
                self.assertNotIn("tracer-bound:**", md)
                self.assertIn("## Capture cost (what the tracing itself cost)", md)
                self.assertIn("| loader/gpu | 11 |", md)
        self.assertIn("No untraced run was given", md)
        self.assertIn("Tracer-bound: unknown.", md)


class StarvedLineTest(TempDirCase):
    def test_the_answer_follows_the_idle_share(self):
        for stalls, line in (
            (
                {("batch_wait", 1): 3.0},
                "- GPU starved by the input pipeline: **yes**: idle waiting on it 9.28% of the "
                "window (3.800 ms, most of it in batch_wait; starved from 5%)",
            ),
            (
                {},
                "- GPU starved by the input pipeline: **no**: idle waiting on it 2.11% of the "
                "window (0.800 ms, most of it in h2d_submit; starved from 5%)",
            ),
        ):
            with self.subTest(stalls=stalls):
                s = self.summarize(simulated_run(stalls=stalls), name="r%d.sqlite" % len(stalls))
                self.assertEqual(starved_line(s), line)
                lines = render_markdown(s).splitlines()
                at = next(i for i, x in enumerate(lines) if x.startswith("- no recorded kernel"))
                self.assertEqual(lines[at + 1], line)

    def test_unknown_without_device_data(self):
        b = simulated_run()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        self.assertEqual(
            starved_line(self.summarize(b)),
            "- GPU starved by the input pipeline: unknown (no device activity in the export)",
        )

    def test_a_tracer_bound_capture_says_so(self):
        s = self.summarize(
            tracer_cost_export(), tracer_cost_report(400.0), untraced=UNTRACED, name="t.sqlite"
        )
        self.assertTrue(
            starved_line(s).endswith(
                "; the capture is tracer-bound: read the untraced throughput below"
            ),
            starved_line(s),
        )


if __name__ == "__main__":
    unittest.main()
