"""Tests for scripts/nsys_analysis/capture/phases.py: the step-level phases of the main thread, and
the device time of the work launched in each (from the main thread, autograd's thread, the GPU
decode stage) on a tiny export with known intervals and on the real nsys 2025.3 export in
tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_phases.py
"""

import unittest

from scripts.support.nsys_exports import (
    SCHEMA,
    ExportBuilder,
    RealFixtureCase,
    TempDirCase,
    basic_export,
    phase_export,
)
from nsys_analysis.capture.export import load_export
from nsys_analysis.capture.intervals import SpanIndex
from nsys_analysis.capture.markdown import render_markdown
from nsys_analysis.capture.phases import Phase, phase_names, step_phases
from nsys_analysis.capture.summary import find_window


class StepPhasesTest(TempDirCase):
    def test_children_of_torch_step_only(self):
        ex = load_export(self.build(phase_export()))
        window = find_window(ex.ranges)
        phases = step_phases(ex.ranges, window.steps)
        # batch_wait and h2d_submit (in data_load) and the layer range conv1 (in forward) are not
        # phases; step 1 has no zero_grad; capture_drain lies outside every step.
        self.assertEqual(
            [(p.step, p.name, p.start / 1e6, p.end / 1e6) for p in phases],
            [
                (0, "data_load", 1.0, 3.0),
                (0, "forward", 3.0, 5.0),
                (0, "zero_grad", 5.0, 5.2),
                (0, "backward", 5.2, 8.0),
                (0, "optimizer_step", 8.0, 9.5),
                (1, "data_load", 10.0, 11.0),
                (1, "forward", 11.0, 13.0),
                (1, "backward", 13.0, 16.0),
                (1, "optimizer_step", 16.0, 18.0),
            ],
        )
        self.assertEqual(
            phase_names(phases), ["data_load", "forward", "zero_grad", "backward", "optimizer_step"]
        )

    def test_phase_index(self):
        ms = 1_000_000
        # Given out of order: the index sorts them.
        index = SpanIndex(
            [Phase("b", 2 * ms, 5 * ms, 0), Phase("a", 0, 2 * ms, 0), Phase("c", 6 * ms, 7 * ms, 0)]
        )
        self.assertEqual(index.find(1 * ms).name, "a")
        self.assertEqual(index.find(2 * ms).name, "b")  # where two meet: the later
        self.assertEqual((index.index_of(2 * ms), index.index_of(7 * ms)), (1, 2))
        self.assertIsNone(index.find(int(5.5 * ms)))  # between phases
        self.assertIsNone(index.find(-1))
        self.assertIsNone(index.index_of(8 * ms))
        self.assertIsNone(SpanIndex([]).find(0))
        self.assertEqual(index.longest_overlap(1 * ms, 4 * ms).name, "b")
        self.assertEqual(
            index.longest_overlap(int(0.5 * ms), int(3.5 * ms)).name, "a"
        )  # a tie: the earlier
        self.assertEqual(index.longest_overlap(int(4.5 * ms), int(6.8 * ms)).name, "c")
        self.assertIsNone(index.longest_overlap(int(5.2 * ms), int(5.8 * ms)))
        self.assertEqual(index.longest_overlap_index(int(4.5 * ms), int(6.8 * ms)), 2)


class GpuTimeByPhaseTest(TempDirCase):
    def test_every_bucket(self):
        # Known answers in phase_export()'s docstring.
        s = self.summarize(phase_export())
        self.assertEqual(
            dict(s["gpu_time_by_phase_ms"]),
            {
                "data_load": 0.4,
                "forward": 1.6,
                "zero_grad": 0.0,
                "backward": 3.6,
                "optimizer_step": 1.6,
                "(outside phases)": 1.6,
                "(input pipeline)": 0.8,
                "(unattributed)": 0.1,
            },
        )
        self.assertEqual(
            list(s["gpu_time_by_phase_ms"])[:5],
            ["data_load", "forward", "zero_grad", "backward", "optimizer_step"],
        )
        self.assertEqual(
            {k: list(v) for k, v in s["gpu_time_by_phase_per_step_ms"].items()},
            {
                "data_load": [0.3, 0.1],
                "forward": [0.8, 0.8],
                "zero_grad": [0.0, None],
                "backward": [1.6, 2.0],
                "optimizer_step": [0.8, 0.8],
            },
        )
        # Only the loss gradient's seed of backward came from the main thread.
        self.assertEqual(
            dict(s["gpu_time_by_phase_main_thread_ms"]),
            {
                "data_load": 0.4,
                "forward": 1.6,
                "zero_grad": 0.0,
                "backward": 0.1,
                "optimizer_step": 1.6,
            },
        )
        self.assertEqual(
            dict(s["gpu_activities_by_phase"]),
            {
                "data_load": 2,
                "forward": 2,
                "zero_grad": 0,
                "backward": 4,
                "optimizer_step": 2,
                "(outside phases)": 3,
                "(input pipeline)": 2,
                "(unattributed)": 1,
            },
        )
        self.assertEqual(s["gpu_time_total_ms"], 9.7)
        self.assertAlmostEqual(
            sum(s["gpu_time_by_phase_ms"].values()), s["gpu_time_total_ms"], places=6
        )
        # The stage's kernel ran beside forward's: the sum counts it, the union does not.
        self.assertEqual(s["device_busy_ms"], 9.4)

    def test_basic_export(self):
        # basic_export(): copies and a memset without launch records (0.4 + 0.2 + 0.3 + 0.2 + 0.15 +
        # 0.1 ms), forward's kernels (1.0 + 0.3 in step 0; 1.4 in step 1, launched at 6.55 ms, just
        # after data_load), the autograd thread's kernel in step 1's backward (clipped to the
        # window's end: 0.5), a kernel launched before the steps (clipped to the window's start:
        # 0.5); the one after the window does not count.
        s = self.summarize(basic_export())
        self.assertEqual(
            dict(s["gpu_time_by_phase_ms"]),
            {
                "data_load": 0.0,
                "forward": 2.7,
                "backward": 0.5,
                "(outside phases)": 0.5,
                "(input pipeline)": 0.0,
                "(unattributed)": 1.35,
            },
        )
        self.assertEqual(s["gpu_time_total_ms"], 5.05)
        self.assertEqual(
            dict(s["gpu_time_by_phase_main_thread_ms"]),
            {"data_load": 0.0, "forward": 2.7, "backward": 0.0},
        )
        self.assertEqual(
            {k: list(v) for k, v in s["gpu_time_by_phase_per_step_ms"].items()},
            {"data_load": [0.0, 0.0], "forward": [1.3, 1.4], "backward": [0.0, 0.5]},
        )

    def test_markdown(self):
        md = render_markdown(self.summarize(phase_export()))
        self.assertIn("## GPU time per phase", md)
        self.assertIn("| backward | 4 | 3.600 | 37.1 | 1.800 | 0.100 | 5.800 |", md)
        self.assertIn("| (input pipeline) | 2 | 0.800 | 8.2 |  |  |  |", md)
        self.assertIn("| step | data_load | forward | zero_grad | backward | optimizer_step |", md)
        self.assertIn("| 1 | 0.100 | 0.800 | n/a | 2.000 | 0.800 |", md)

    def test_without_device_data_or_steps(self):
        b = phase_export()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        s = self.summarize(b)
        for key in (
            "gpu_time_by_phase_ms",
            "gpu_time_by_phase_per_step_ms",
            "gpu_time_by_phase_main_thread_ms",
            "gpu_activities_by_phase",
            "gpu_time_total_ms",
            "host_stalls",
        ):
            self.assertIsNone(s[key], key)
        self.assertNotIn("## GPU time per phase", render_markdown(s))
        b = ExportBuilder()
        b.range("capture_window", 0.0, 2.0)
        b.kernel(0.5, 1.0, launch_ms=0.1)
        s = self.summarize(b, name="nosteps.sqlite")
        self.assertEqual(
            dict(s["gpu_time_by_phase_ms"]),
            {"(outside phases)": 0.5, "(input pipeline)": 0.0, "(unattributed)": 0.0},
        )
        self.assertEqual(dict(s["gpu_time_by_phase_per_step_ms"]), {})


class RealFixturePhaseTest(RealFixtureCase):
    def test_backward_is_charged_to_backward(self):
        # The Python reference: forward's work is launched from the main thread, backward's from
        # autograd's thread while the main thread sits in backward. Charged by phase, backward holds
        # 61 % of the device time; the main thread itself launched almost none of it (what nsys's
        # nvtx_gpu_proj_sum attributes to backward), and all of forward's.
        s = self.s
        g = s["gpu_time_by_phase_ms"]
        self.assertEqual(
            list(g),
            [
                "data_load",
                "forward",
                "zero_grad",
                "backward",
                "optimizer_step",
                "(outside phases)",
                "(input pipeline)",
                "(unattributed)",
            ],
        )
        for name, want in (
            ("data_load", 11.700),
            ("forward", 121.049),
            ("zero_grad", 0.0),
            ("backward", 211.158),
            ("optimizer_step", 2.907),
        ):
            self.assertAlmostEqual(g[name], want, places=3, msg=name)
        for name in ("(outside phases)", "(input pipeline)", "(unattributed)"):
            self.assertEqual(g[name], 0.0, name)
        main = s["gpu_time_by_phase_main_thread_ms"]
        self.assertEqual(main["forward"], g["forward"])
        self.assertEqual(main["data_load"], g["data_load"])
        self.assertLess(main["backward"], 0.01)
        self.assertGreater(g["backward"] / s["gpu_time_total_ms"], 0.6)
        self.assertEqual(s["gpu_activities_by_phase"]["backward"], 3192)
        # Every step alike: about 26.4 ms of backward and 15.1 ms of forward on the device.
        per_step = s["gpu_time_by_phase_per_step_ms"]
        for name, lo, hi in (
            ("forward", 15.0, 15.3),
            ("backward", 26.3, 26.5),
            ("data_load", 1.4, 1.5),
        ):
            self.assertEqual(len(per_step[name]), 8)
            self.assertTrue(all(lo < v < hi for v in per_step[name]), (name, per_step[name]))
            self.assertAlmostEqual(sum(per_step[name]), g[name], places=4)

    def test_total_is_the_device_time_of_the_window(self):
        # The buckets add up to the summed device time of every activity, clipped to the window,
        # computed here independently; the union (device_busy_ms) is no larger.
        window = find_window(self.ex.ranges)
        clipped = sum(
            max(0, min(op.end, window.hi) - max(op.start, window.lo))
            for ops in (self.ex.kernels, self.ex.memcpys, self.ex.memsets)
            for op in ops
        )
        self.assertAlmostEqual(self.s["gpu_time_total_ms"], clipped / 1e6, places=5)
        self.assertAlmostEqual(
            sum(self.s["gpu_time_by_phase_ms"].values()), self.s["gpu_time_total_ms"], places=4
        )
        self.assertLessEqual(self.s["device_busy_ms"], self.s["gpu_time_total_ms"])
        self.assertEqual(
            sum(self.s["gpu_activities_by_phase"].values()),
            len(self.ex.kernels) + len(self.ex.memcpys) + len(self.ex.memsets),
        )


if __name__ == "__main__":
    unittest.main()
