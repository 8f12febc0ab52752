"""Tests for scripts/nsys_analysis/capture/cost.py: summary.json's capture_cost on
tracer_cost_export(), whose known answers its docstring gives: throughput traced vs untraced, host
time per phase with and without the reports' phase_ms, runtime calls per named thread and step, the
profiler's overhead by name, thread and phase, and the idle time the tracer explains, computed by
hand.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_cost.py
"""

import unittest

from scripts.support.nsys_exports import (
    AUTOGRAD,
    CUPTI,
    LOADER,
    MAIN,
    STAGE,
    TempDirCase,
    basic_export,
    tracer_cost_export,
    tracer_cost_report,
)
from nsys_analysis.capture.cost import BETWEEN_STEPS
from nsys_analysis.capture.report import FROM_NOTHING, FROM_PHASE_MS, FROM_STEP_FIELDS

TRACED = tracer_cost_report(400.0)
UNTRACED = [
    ("u1.json", tracer_cost_report(480.0, 8.0, 2.4, 2.95)),
    ("u2.json", tracer_cost_report(520.0, 8.2, 2.6, 2.95)),
]


class CaptureCostTest(TempDirCase):
    def cost(self, report=TRACED, untraced=UNTRACED, builder=None, **kw):
        """(summary, its capture_cost) of tracer_cost_export() (or builder's) with those reports."""
        self.exports = getattr(self, "exports", 0) + 1
        s = self.summarize(
            builder or tracer_cost_export(),
            report,
            untraced=untraced,
            name="export%d.sqlite" % self.exports,
            **kw,
        )
        return s, s["capture_cost"]

    def test_calls_per_step_per_named_thread_inside_the_window_only(self):
        _, c = self.cost()
        calls = c["api_calls"]
        self.assertEqual(calls["steps"], 3)
        threads = [
            (t["thread"], t["tid"], t["main"], t["calls"], t["calls_per_step"])
            for t in calls["threads"]
        ]
        # loader/gpu's two calls outside the window do not count; sorted by calls.
        self.assertEqual(
            threads,
            [
                ("loader/gpu", STAGE, False, 33, 11.0),
                ("train_resnet50", MAIN, True, 6, 2.0),
                ("pt_autograd_0", AUTOGRAD, False, 3, 1.0),
                ("tid 200", LOADER, False, 1, 0.333),
            ],
        )
        stage = calls["threads"][0]
        self.assertEqual(
            [(x["name"], x["calls"], x["per_step"]) for x in stage["top"]],
            [
                ("cudaLaunchKernel", 15, 5.0),
                ("cudaEventSynchronize", 12, 4.0),
                ("cudaMemcpyAsync", 6, 2.0),
            ],
        )
        self.assertEqual((stage["traced_ms"], stage["traced_ms_per_step"]), (0.276, 0.092))
        self.assertEqual(calls["calls"], 43)

    def test_calls_per_unit_of_work_of_the_helper_threads(self):
        _, c = self.cost()
        units = {t["thread"]: t["unit"] for t in c["api_calls"]["threads"]}
        # loader/gpu: its 3 gpu_decode ranges hold its 33 window calls; the others have no range.
        self.assertEqual(
            dict(units["loader/gpu"]),
            {
                "range": "gpu_decode",
                "ranges": 3,
                "calls_per_range": 11.0,
                "calls_inside": 33,
                "inside_per_range": 11.0,
            },
        )
        self.assertEqual(
            [units[t] for t in ("train_resnet50", "pt_autograd_0", "tid 200")], [None, None, None]
        )
        # A stage one batch ahead: a fourth gpu_decode inside the window with the same 11 calls, one
        # nested range, an empty range, and a range across the window's end that holds a call. Per
        # step 45 / 3; inside the units still 11 a unit (the range across the end is not counted,
        # its call is still the thread's: 45 / 4 per unit in all).
        b = tracer_cost_export()
        b.range("gpu_decode", 10.0, 10.9, tid=STAGE, domain=1)
        b.range("resize_normalize", 10.5, 10.85, tid=STAGE, domain=1)
        b.range("reuse_fence", 10.92, 10.95, tid=STAGE, domain=1)
        for i in range(11):
            b.api("cudaLaunchKernel_v7000", 10.05 + 0.07 * i, 10.06 + 0.07 * i, tid=STAGE)
        b.range("gpu_decode", 29.95, 31.5, tid=STAGE, domain=1)
        b.api("cudaLaunchKernel_v7000", 29.96, 29.97, tid=STAGE)
        _, c = self.cost(builder=b)
        stage = c["api_calls"]["threads"][0]
        self.assertEqual(
            (stage["thread"], stage["calls"], stage["calls_per_step"]), ("loader/gpu", 45, 15.0)
        )
        self.assertEqual(
            dict(stage["unit"]),
            {
                "range": "gpu_decode",
                "ranges": 4,
                "calls_per_range": 11.25,
                "calls_inside": 44,
                "inside_per_range": 11.0,
            },
        )

    def test_profiler_overhead_charged_to_threads_and_phases(self):
        _, c = self.cost()
        o = c["profiler_overhead"]
        self.assertEqual((o["count"], o["total_ms"]), (5, 3.4))
        self.assertEqual(
            [(x["name"], x["count"], x["total_ms"]) for x in o["by_name"]],
            [("TLS allocation", 2, 2.5), ("CUPTI Buffer flush", 2, 0.9), ("Unknown", 1, 0.0)],
        )
        self.assertEqual(
            {
                (x["thread"], x["tid"], x["main"]): (x["count"], x["total_ms"])
                for x in o["by_thread"]
            },
            {
                ("loader/gpu", STAGE, False): (1, 2.0),
                ("CUPTI worker thread", CUPTI, False): (2, 0.5),
                ("pt_autograd_0", AUTOGRAD, False): (1, 0.5),
                ("train_resnet50", MAIN, True): (1, 0.4),
            },
        )
        self.assertEqual(
            [(x["phase"], x["count"], x["total_ms"]) for x in o["by_phase"]],
            [
                (BETWEEN_STEPS, 2, 1.5),
                ("data_load", 1, 1.0),
                ("optimizer_step", 0, 0.5),
                ("backward", 1, 0.3),
                ("forward", 1, 0.1),
            ],
        )
        self.assertEqual(dict(o["outside_window"]), {"count": 1, "total_ms": 10.0})

    def test_idle_the_tracer_explains_by_hand(self):
        s, c = self.cost()
        self.assertEqual(s["no_activity_pct"], 29.0)  # 21.3 ms busy of 30
        idle = c["idle_explained"]
        # W = 30 ms, S = 3, B = 4, U = 500 images/s: W_u = 12 / 500 s = 24 ms; the tracer added 6 ms
        # of the 8.7 ms without device activity.
        self.assertEqual(
            (idle["window_ms"], idle["steps"], idle["batch_size"], idle["untraced_images_per_s"]),
            (30.0, 3, 4, 500.0),
        )
        self.assertEqual(
            (
                idle["untraced_window_ms"],
                idle["tracer_extra_ms"],
                idle["no_activity_ms"],
                idle["explained_ms"],
                idle["explained_share"],
            ),
            (24.0, 6.0, 8.7, 6.0, 0.689655),
        )
        rows = {r["host_range"]: r for r in idle["by_host_range"]}
        # backward's gaps: 3 x 0.1 ms; its host time grew 3.0 - 2.95 = 0.05 ms a step, 0.15 ms in 3
        # steps.
        self.assertEqual((rows["backward"]["gaps"], rows["backward"]["host_idle_ms"]), (3, 0.3))
        self.assertEqual(
            (
                rows["backward"]["inflation_per_step_ms"],
                rows["backward"]["inflation_ms"],
                rows["backward"]["explained_ms"],
                rows["backward"]["explained_share"],
            ),
            (0.05, 0.15, 0.15, 0.5),
        )
        self.assertEqual(
            (rows["h2d_submit"]["host_idle_ms"], rows["h2d_submit"]["explained_ms"]), (1.2, 0.0)
        )
        self.assertIsNone(
            rows["(no range)"]["explained_ms"]
        )  # no host range, no phase time to compare
        # The untraced run as fast as the traced one: the tracer explains nothing.
        _, c = self.cost(untraced=[("u.json", tracer_cost_report(400.0))])
        self.assertEqual(
            (c["idle_explained"]["tracer_extra_ms"], c["idle_explained"]["explained_ms"]),
            (0.0, 0.0),
        )

    def test_throughput_and_tracer_bound(self):
        s, c = self.cost()
        t = c["throughput"]
        self.assertEqual(
            (t["traced_images_per_s"], t["untraced_images_per_s"], t["traced_over_untraced"]),
            (400.0, 500.0, 0.8),
        )
        self.assertEqual(
            [(r["report"], r["images_per_s"]) for r in t["untraced_runs"]],
            [("u1.json", 480.0), ("u2.json", 520.0)],
        )
        self.assertTrue(c["tracer_bound"])
        self.assertIn("the untraced 500.0 images/s", c["trust"][0])
        self.assertEqual(
            c["trust"][1],
            "order and overlap: the capture (what ran where, in which phase, beside what)",
        )
        _, c = self.cost(max_slowdown=0.25)
        self.assertIs(c["tracer_bound"], False)

    def test_without_untraced_runs_only_the_traced_figure(self):
        s = self.summarize(tracer_cost_export(), TRACED)
        c = s["capture_cost"]
        self.assertEqual(
            (
                c["throughput"]["traced_images_per_s"],
                c["throughput"]["untraced_images_per_s"],
                c["throughput"]["traced_over_untraced"],
                c["throughput"]["untraced_runs"],
            ),
            (400.0, None, None, []),
        )
        self.assertIn("no untraced run was given", c["throughput"]["note"])
        self.assertIsNone(c["tracer_bound"])
        self.assertIsNone(c["idle_explained"]["explained_ms"])
        self.assertEqual(c["api_calls"]["threads"][0]["calls_per_step"], 11.0)  # still reported
        self.assertNotIn("capture_cost", s["checks"])

    def test_phases_traced_vs_untraced_pooled(self):
        _, c = self.cost()
        p = c["phases"]
        self.assertEqual(
            (p["traced_source"], p["untraced_source"], p["unknown"]),
            (FROM_PHASE_MS, FROM_PHASE_MS, []),
        )
        rows = {r["phase"]: r for r in p["rows"]}
        self.assertEqual(
            [r["phase"] for r in p["rows"]],
            [
                "torch_step",
                "data_load",
                "batch_wait",
                "h2d_submit",
                "forward",
                "backward",
                "optimizer_step",
            ],
        )
        # Untraced: the median of both reports' six steps pooled.
        self.assertEqual(
            [
                rows["torch_step"][k]
                for k in (
                    "traced_ms",
                    "untraced_ms",
                    "difference_ms",
                    "ratio",
                    "traced_steps",
                    "untraced_steps",
                )
            ],
            [9.0, 8.1, 0.9, 1.111111, 3, 6],
        )
        self.assertEqual(
            [rows["forward"][k] for k in ("traced_ms", "untraced_ms", "difference_ms", "ratio")],
            [3.0, 2.5, 0.5, 1.2],
        )

    def test_phases_without_phase_ms(self):
        old = [("old.json", tracer_cost_report(500.0, 8.0, phase_ms=False))]
        _, c = self.cost(untraced=old)
        p = c["phases"]
        self.assertEqual(
            (p["traced_source"], p["untraced_source"]), (FROM_PHASE_MS, FROM_STEP_FIELDS)
        )
        self.assertEqual(p["unknown"], ["data_load", "forward", "backward", "optimizer_step"])
        rows = {r["phase"]: r for r in p["rows"]}
        self.assertEqual(
            (
                rows["torch_step"]["untraced_ms"],
                rows["batch_wait"]["untraced_ms"],
                rows["h2d_submit"]["untraced_ms"],
                rows["forward"]["untraced_ms"],
            ),
            (8.0, 1.0, 1.0, None),
        )
        # seed_workload.py's line has no per-step records at all: every phase unknown, the
        # throughput kept.
        line = {"steps": 3, "images_per_s": 300.0, "batch_wait_s": 0.1}
        _, c = self.cost(report=line, untraced=[("u.json", {"steps": 3, "images_per_s": 500.0})])
        self.assertEqual(
            (c["phases"]["traced_source"], c["phases"]["untraced_source"]),
            (FROM_NOTHING, FROM_NOTHING),
        )
        self.assertEqual(c["phases"]["unknown"], [r["phase"] for r in c["phases"]["rows"]])
        self.assertEqual(c["throughput"]["traced_over_untraced"], 0.6)
        self.assertIsNone(c["idle_explained"]["explained_ms"])  # no batch size in the line

    def test_exports_without_thread_names_overhead_or_runtime_table(self):
        b = tracer_cost_export()
        b.omit.update(("ThreadNames", "PROFILER_OVERHEAD"))
        _, c = self.cost(builder=b)
        self.assertEqual(
            [t["thread"] for t in c["api_calls"]["threads"]],
            ["tid 400", "tid 100", "tid 300", "tid 200"],
        )
        self.assertIsNone(c["profiler_overhead"])
        b = basic_export()
        b.omit.add("CUPTI_ACTIVITY_KIND_RUNTIME")
        _, c = self.cost(builder=b, report=None)
        self.assertIsNone(c["api_calls"])
        self.assertEqual(c["profiler_overhead"]["count"], 0)


if __name__ == "__main__":
    unittest.main()
