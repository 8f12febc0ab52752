"""Tests for the analysis of a capture window across an epoch's end (train_resnet50 --epochs E
--capture-at N): its eval and checkpoint ranges, between torch_step ranges, are no training steps
and their nested batch_wait, h2d_submit and forward no training phases (the steps, the phase tables,
the GPU time and idle gaps by phase, copy_count, capture_cost); summary.json's epoch_boundary and
summary.md's "Epoch boundary" hold what each cost against a training step
(nsys_analysis.capture.epochs), beside the run report's training.epochs; a capture without them is
analysed as before. The known answers are those of nsys_exports.epoch_export().

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_analyze_epochs.py
"""

import importlib.util
import json
import os
import subprocess
import sys

from scripts.support.nsys_exports import (
    EPOCH_STEP_STARTS,
    MAIN,
    SCHEMA,
    STAGE,
    ExportBuilder,
    TempDirCase,
    basic_export,
    epoch_export,
    epoch_report,
    phase_export,
    simulated_run,
    write_json,
)
from scripts.support.testutil import REPO
from nsys_analysis.capture.checks import injected_stalls_check
from nsys_analysis.capture.markdown import render_markdown

SCRIPT = os.path.join(REPO, "scripts", "analyze.py")
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None

# epoch_export()'s epoch_boundary, with epoch_report() and without a report.
EVAL_ROW = {
    "start_ms": 9.5,
    "ms": 12.0,
    "after_step": 1,
    "epoch": 0,
    "eval_steps": 3,
    "eval_step_median_ms": 3.0,
    "eval_reduce_ms": 1.5,
    "h2d_copies": 6,
    "gpu_busy_pct": 55.0,
    "gpu_idle_ms": 5.4,
    "over_step_median": 3.0,
    "report": {"ms": 12.4, "steps": 3, "images": 96, "top1": 0.25},
}
CHECKPOINT_ROW = {
    "start_ms": 21.5,
    "ms": 8.0,
    "after_step": 1,
    "epoch": 0,
    "gpu_busy_pct": 12.5,
    "gpu_idle_ms": 7.0,
    "over_step_median": 2.0,
    "report": {"ms": 8.3, "bytes": 100_000_000, "path": "ckpt/epoch0.pt"},
}


def plain(value):
    """value with its OrderedDicts as dicts (JSON's round trip), for comparisons that show a
    readable diff."""
    return json.loads(json.dumps(value))


class EpochBoundaryTest(TempDirCase):
    def summary(self, report=True):
        """The summary of epoch_export(), with epoch_report() unless report is False."""
        return self.summarize(
            epoch_export(),
            epoch_report() if report else None,
            name="with_report.sqlite" if report else "alone.sqlite",
        )

    def test_only_torch_step_ranges_are_steps(self):
        s = self.summary()
        self.assertEqual((s["steps"], s["torch_step_ranges"], s["steps_outside_window"]), (4, 4, 0))
        self.assertEqual(s["step_ms"], [4.0] * 4)
        self.assertEqual(s["batch_wait_ms"], [0.5] * 4)
        self.assertEqual(
            (s["expected_steps"], s["expected_steps_source"]), (4, "run report capture.steps")
        )
        self.assertEqual(s["checks"]["step_count"], True)
        self.assertEqual(
            s["check_details"]["step_count"],
            "4 torch_step ranges in the window, expected 4 (run report capture.steps)",
        )
        # The evaluation's 6 input copies are not the steps' (2 a step).
        self.assertEqual(s["h2d_copies"], 8)
        self.assertTrue(s["checks"]["copy_count"], s["check_details"]["copy_count"])
        self.assertIn(
            "not counted: 6 enqueued inside 1 eval range", s["check_details"]["copy_count"]
        )
        self.assertTrue(s["all_checks_pass"], s["check_details"])
        self.assertEqual(
            {k: len(v) for k, v in s["gpu_time_by_phase_per_step_ms"].items()},
            dict.fromkeys(["data_load", "forward", "zero_grad", "backward", "optimizer_step"], 4),
        )

    def test_eval_ranges_are_not_training_phases(self):
        s = self.summary()
        counts, totals = s["phase_counts"], s["phase_totals_ms"]
        for name in ("batch_wait", "h2d_submit", "forward", "data_load"):
            self.assertEqual(counts[name], 4, name)
        self.assertEqual(
            (totals["forward"], totals["batch_wait"], totals["h2d_submit"]), (4.0, 2.0, 2.0)
        )
        self.assertEqual(
            {k: (counts[k], totals[k]) for k in counts if k.startswith("eval")},
            {
                "eval": (1, 12.0),
                "eval_step": (3, 9.5),
                "eval_reduce": (1, 1.5),
                "eval/forward": (3, 6.5),
                "eval/batch_wait": (3, 1.5),
                "eval/h2d_submit": (3, 1.5),
            },
        )
        self.assertEqual((counts["checkpoint"], totals["checkpoint"]), (1, 8.0))
        md = render_markdown(s)
        self.assertIn("| forward | 4 | 4.000 | 1.000 | 1.000 | 1.000 |", md)
        self.assertIn("| eval/forward | 3 | 6.500 | 2.167 | 1.500 | 3.000 |", md)
        self.assertIn("listed as eval/NAME", md)
        # The host-time rows of capture_cost: the training phases only, as the report's phase_ms has
        # them.
        self.assertEqual(
            [r["phase"] for r in s["capture_cost"]["phases"]["rows"]],
            [
                "torch_step",
                "data_load",
                "batch_wait",
                "h2d_submit",
                "forward",
                "zero_grad",
                "backward",
                "optimizer_step",
            ],
        )
        # By their names alone the evaluation's ranges would pass for training phases.
        ignored = self.summarize(epoch_export(boundary=False), name="ignored.sqlite")
        self.assertEqual(
            (ignored["phase_counts"]["forward"], ignored["phase_counts"]["batch_wait"]), (7, 7)
        )
        self.assertEqual(ignored["h2d_copies"], 14)

    def test_epoch_boundary_figures(self):
        s = self.summary()
        self.assertEqual(
            plain(s["epoch_boundary"]),
            {"step_median_ms": 4.0, "evals": [EVAL_ROW], "checkpoints": [CHECKPOINT_ROW]},
        )
        alone = self.summary(report=False)
        self.assertEqual(
            plain(alone["epoch_boundary"]),
            {
                "step_median_ms": 4.0,
                "evals": [dict(EVAL_ROW, epoch=None, report=None)],
                "checkpoints": [dict(CHECKPOINT_ROW, epoch=None, report=None)],
            },
        )

    def test_gpu_work_inside_eval_and_checkpoint_is_theirs(self):
        s = self.summary()
        self.assertEqual(
            plain(s["gpu_time_by_phase_ms"]),
            {
                "data_load": 0.8,
                "forward": 3.2,
                "zero_grad": 0.0,
                "backward": 4.8,
                "optimizer_step": 1.2,
                "eval": 6.6,
                "checkpoint": 1.0,
                "(outside phases)": 0.0,
                "(input pipeline)": 0.0,
                "(unattributed)": 0.0,
            },
        )
        self.assertEqual(
            s["gpu_activities_by_phase"]["eval"], 11
        )  # 6 copies, 3 forward kernels, reduce, D2H
        self.assertEqual(s["gpu_time_by_phase_main_thread_ms"]["eval"], 6.6)
        self.assertNotIn("eval", s["gpu_time_by_phase_per_step_ms"])
        md = render_markdown(s)
        self.assertIn("| eval | 11 | 6.600 | 37.5 |  | 6.600 | 12.000 |", md)
        self.assertIn(
            "`eval`, `checkpoint`: launched while the main thread was in the epoch boundary's", md
        )

    def test_idle_inside_checkpoint_is_the_checkpoints(self):
        s = self.summary()
        by_range = {
            k: (v["count"], v["total_ms"]) for k, v in s["idle_gaps"]["host_by_range"].items()
        }
        self.assertEqual(
            by_range,
            {
                "checkpoint": (2, 7.6),
                "eval": (8, 4.3),
                "optimizer_step": (3, 3.7),
                "(no range)": (1, 1.8),
                "forward": (8, 1.6),
                "backward": (4, 0.8),
            },
        )
        largest = s["idle_gaps"]["largest"][0]
        self.assertEqual(
            (largest["at_ms"], largest["gap_ms"], largest["cause"], largest["host_range"]),
            (22.8, 7.5, "host", "checkpoint"),
        )
        self.assertEqual(
            [(st["start_ms"], st["step"], st["phase"]) for st in s["host_stalls"]],
            [
                (0.0, 0, "data_load"),
                (8.9, None, "eval"),
                (19.85, None, "eval"),
                (22.8, None, "checkpoint"),
            ],
        )
        self.assertEqual(s["host_stalls"][3]["range"], "checkpoint")
        self.assertEqual(s["host_stalls"][3]["quiet_ms"], 7.849)
        # nsys's own overhead inside checkpoint is the checkpoint's, not "between steps".
        self.assertEqual(
            plain(s["capture_cost"]["profiler_overhead"]["by_phase"]),
            [{"phase": "checkpoint", "count": 1, "total_ms": 0.5}],
        )

    def test_capture_cost_leaves_the_boundary_out(self):
        s = self.summarize(epoch_export(), epoch_report(), untraced=[("u.json", epoch_report())])
        idle = s["capture_cost"]["idle_explained"]
        self.assertEqual(
            (idle["window_ms"], idle["epoch_boundary_ms"], idle["epoch_boundary_idle_ms"]),
            (40.0, 20.0, 12.4),
        )
        # 22.4 ms of the window without device activity, 12.4 of them in eval and checkpoint.
        self.assertEqual(s["no_activity_pct"], 56.0)
        # The untraced run's 800 images/s count its own eval (12.4 ms) and checkpoint (8.3 ms) too:
        # its 4 x 8 images take 40 - 20.7 = 19.3 ms, the traced window without its boundary 20 ms.
        self.assertEqual(
            (
                idle["no_activity_ms"],
                idle["untraced_epoch_boundary_ms"],
                idle["untraced_window_ms"],
                idle["tracer_extra_ms"],
                idle["explained_ms"],
            ),
            (10.0, 20.7, 19.3, 0.7, 0.7),
        )
        self.assertIn("without the epoch boundary's eval and checkpoint ranges", idle["method"])
        self.assertIn(
            "without the untraced runs' own evaluation and checkpoint time", idle["method"]
        )
        md = render_markdown(s)
        self.assertIn("less 20.000 ms of evaluation and checkpoint", md)
        self.assertIn(
            "less the untraced runs' 20.700 ms of evaluation and checkpoint, take 19.300 ms", md
        )
        # The median of the untraced runs' boundary times; a report without them does not count.
        runs = [
            ("u1.json", epoch_report(10.0, 8.0)),
            ("u2.json", epoch_report(14.0, 9.0)),
            ("u3.json", dict(epoch_report(), training=None)),
        ]
        idle = self.summarize(epoch_export(), epoch_report(), untraced=runs, name="median.sqlite")[
            "capture_cost"
        ]["idle_explained"]
        self.assertEqual(
            (idle["untraced_epoch_boundary_ms"], idle["untraced_window_ms"]), (20.5, 19.5)
        )
        # No untraced report gives them: the untraced window, and what the tracer explains, are
        # unknown.
        s = self.summarize(epoch_export(), epoch_report(), untraced=runs[2:], name="unknown.sqlite")
        idle = s["capture_cost"]["idle_explained"]
        self.assertIn(
            "less the untraced runs' evaluation and checkpoint (not in their reports), take n/a ms",
            render_markdown(s),
        )
        self.assertEqual(
            (idle["untraced_epoch_boundary_ms"], idle["untraced_window_ms"], idle["explained_ms"]),
            (None, None, None),
        )
        # The main thread's runtime calls a step: 4 a step and the drain's sync, none of the
        # evaluation's 12 or the checkpoint's 2.
        main = next(t for t in s["capture_cost"]["api_calls"]["threads"] if t["main"])
        self.assertEqual((main["tid"], main["calls"], main["calls_per_step"]), (MAIN, 17, 4.25))

    def test_calls_per_unit_of_work_leave_the_boundary_out(self):
        # The decode stage: a gpu_decode range with 3 calls before each training step, and two with
        # 5 calls each inside eval (the evaluation's batches): neither those calls nor those ranges
        # count.
        b = epoch_export()
        b.thread_name(STAGE, "loader/gpu")
        b.domain(1, "data_pipeline", tid=STAGE)
        for at in [s + 0.2 for s in EPOCH_STEP_STARTS] + [10.0, 14.0]:
            b.range("gpu_decode", at, at + 0.4, tid=STAGE, domain=1)
            for i in range(5 if at in (10.0, 14.0) else 3):
                b.api(
                    "cudaLaunchKernel_v7000", at + 0.05 + 0.05 * i, at + 0.06 + 0.05 * i, tid=STAGE
                )
        s = self.summarize(b, epoch_report(), untraced=[("u.json", epoch_report())])
        stage = next(
            t for t in s["capture_cost"]["api_calls"]["threads"] if t["thread"] == "loader/gpu"
        )
        self.assertEqual((stage["calls"], stage["calls_per_step"]), (12, 3.0))
        self.assertEqual(
            dict(stage["unit"]),
            {
                "range": "gpu_decode",
                "ranges": 4,
                "calls_per_range": 3.0,
                "calls_inside": 12,
                "inside_per_range": 3.0,
            },
        )

    def test_injected_stalls_check_ignores_the_boundary(self):
        s = self.summary()
        report = dict(epoch_report(), config={"steps": 4, "inject_stall": ["data_load@0:1.6"]})
        ok, detail = injected_stalls_check(s, report)
        self.assertTrue(ok, detail)
        self.assertIn("no other host stall >= 1 ms", detail)
        self.assertIn(
            "host stalls of the epoch boundary (not injected): eval 2.049 ms at 8.900 ms; eval "
            "1.740 ms at 19.850 ms; checkpoint 7.849 ms at 22.800 ms",
            detail,
        )

    def test_markdown_section(self):
        md = render_markdown(self.summary())
        heading = "## Epoch boundary (evaluation and checkpoint inside the window)"
        self.assertEqual(md.count(heading), 1)
        self.assertLess(md.index("## GPU time per phase"), md.index(heading))
        self.assertLess(md.index(heading), md.index("## Largest kernel groups"))
        section = md[md.index(heading) : md.index("## Largest kernel groups")]
        self.assertIn(
            "its median torch_step took 4.000 ms. The evaluation pass after captured step 1 (3 "
            "eval_step ranges, median 3.000 ms; eval_reduce, its device sync, 1.500 ms) took "
            "12.000 ms, 3.00x the median training step, with the GPU busy 55.0% of it. The "
            "checkpoint after captured step 1 took 8.000 ms, 2.00x the median training step, with "
            "the GPU busy 12.5% of it.",
            section,
        )
        self.assertIn(
            "| range | epoch | at ms | ms | x median step | eval steps | median eval_step ms | "
            "eval_reduce ms | GPU busy % | report ms | report x median step |",
            section,
        )
        self.assertIn(
            "| eval | 0 | 9.500 | 12.000 | 3.00x | 3 | 3.000 | 1.500 | 55.0 | 12.400 | 3.10x |",
            section,
        )
        self.assertIn(
            "| checkpoint | 0 | 21.500 | 8.000 | 2.00x |  |  |  | 12.5 | 8.300 | 2.08x |", section
        )
        self.assertIn(
            "epoch 0's evaluation: 96 images in 3 steps, top-1 0.2500; epoch 0's checkpoint: "
            "100.0 MB to `ckpt/epoch0.pt`.",
            section,
        )
        # The host stalls' table names the boundary range as the phase.
        self.assertIn("| checkpoint | checkpoint | [memcpy Host-to-Device] |", md)
        alone = render_markdown(self.summary(report=False))
        self.assertIn("| eval | n/a | 9.500 | 12.000 | 3.00x | 3 | 3.000 | 1.500 | 55.0 |\n", alone)
        self.assertNotIn("report ms", alone)

    def test_eval_before_the_first_step_without_device_data(self):
        # The window opens with the evaluation (an epoch's end just before the capture's first
        # step); the report's steps are epoch 1's, so the evaluation is epoch 0's. No CUDA tables:
        # no busy figures.
        b = ExportBuilder()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        b.range("capture_window", 0.0, 20.0)
        b.range("eval", 0.5, 4.5)
        for e in (1.0, 2.0, 3.0):
            b.range("eval_step", e, e + 0.75)
            b.range("forward", e + 0.25, e + 0.75)
        for s in (5.0, 10.0):
            b.range("torch_step", s, s + 5.0)
            b.range("forward", s + 1.0, s + 2.0)
        report = epoch_report()
        report["steps"] = [dict(st, epoch=1) for st in report["steps"][:2]]
        report["capture"]["steps"] = 2
        s = self.summarize(b, report)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["phase_counts"]["forward"], 2)
        self.assertEqual(s["phase_counts"]["eval/forward"], 3)
        self.assertEqual(
            plain(s["epoch_boundary"]),
            {
                "step_median_ms": 5.0,
                "checkpoints": [],
                "evals": [
                    {
                        "start_ms": 0.5,
                        "ms": 4.0,
                        "after_step": None,
                        "epoch": 0,
                        "eval_steps": 3,
                        "eval_step_median_ms": 0.75,
                        "eval_reduce_ms": None,
                        "h2d_copies": None,
                        "gpu_busy_pct": None,
                        "gpu_idle_ms": None,
                        "over_step_median": 0.8,
                        "report": EVAL_ROW["report"],
                    }
                ],
            },
        )
        self.assertIn("The evaluation pass before the first captured step", render_markdown(s))


class WithoutEpochBoundaryTest(TempDirCase):
    def test_no_epoch_boundary(self):
        for name, builder in (
            ("basic", basic_export()),
            ("phase", phase_export()),
            ("simulated", simulated_run(stalls={("backward", 2): 5.0})),
        ):
            with self.subTest(export=name):
                s = self.summarize(builder, name=name + ".sqlite")
                self.assertNotIn("epoch_boundary", s)
                self.assertNotIn("epoch_boundary_ms", s["capture_cost"]["idle_explained"])
                self.assertFalse({"eval", "checkpoint"} & set(s["gpu_time_by_phase_ms"]))
                md = render_markdown(s)
                self.assertNotIn("Epoch boundary", md)
                self.assertNotIn("eval/NAME", md)

    def test_ranges_outside_the_window_change_nothing(self):
        # An earlier epoch's evaluation and a checkpoint after the window: the summary is the
        # capture's alone.
        plain_builder, with_edges = basic_export(), basic_export()
        with_edges.range("eval", -5.0, -3.0)
        with_edges.range("eval_step", -4.5, -3.5)
        with_edges.range("forward", -4.4, -3.6)
        with_edges.range("checkpoint", 11.5, 12.5)
        s = self.summarize(plain_builder, name="plain.sqlite")
        t = self.summarize(with_edges, name="edges.sqlite")
        s["export"] = t["export"] = "export.sqlite"
        self.assertEqual(plain(t), plain(s))
        self.assertEqual(render_markdown(t), render_markdown(s))


class EpochCliTest(TempDirCase):
    def test_analyze_py_writes_the_epoch_boundary(self):
        export = self.build(epoch_export())
        report = write_json(os.path.join(self.tmp, "run.json"), epoch_report())
        out = os.path.join(self.tmp, "out")
        args = [sys.executable, SCRIPT, export, "--out", out, "--report", report, "--check"]
        r = subprocess.run(
            args + ([] if HAVE_MPL else ["--no-figures"]),
            capture_output=True,
            text=True,
            timeout=120,
        )
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual(s["epoch_boundary"]["evals"], [EVAL_ROW])
        self.assertEqual(s["epoch_boundary"]["checkpoints"], [CHECKPOINT_ROW])
        with open(os.path.join(out, "summary.md")) as f:
            self.assertIn("## Epoch boundary", f.read())
        if HAVE_MPL:
            self.assertTrue(os.path.getsize(os.path.join(out, "fig1_phases.png")) > 0)
            self.assertTrue(os.path.getsize(os.path.join(out, "fig6_gpu_phases.png")) > 0)
