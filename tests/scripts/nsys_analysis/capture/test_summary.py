"""Tests for scripts/nsys_analysis/capture/summary.py: every summary.json number of a tiny export
built with known intervals, and known values of the real nsys 2025.3 export in tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_summary.py
"""

import os
import shutil
import unittest

from scripts.support.nsys_exports import (
    SCHEMA,
    RealFixtureCase,
    TempDirCase,
    basic_export,
    first_phase,
    inject_stall,
    simulated_run,
)
from nsys_analysis.capture.export import load_export
from nsys_analysis.capture.summary import STARVED_IDLE_PCT, compute_summary


class BasicExportTest(TempDirCase):
    def test_every_number(self):
        s = self.summarize(basic_export(), expected_steps=2)
        self.assertEqual(s["capture_window_ms"], 10.0)
        self.assertEqual(s["capture_window_source"], "nvtx capture_window")
        self.assertEqual(s["capture_window_count"], 1)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["torch_step_ranges"], 2)
        self.assertEqual(s["steps_outside_window"], 0)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["device_busy_ms"], 4.35)
        self.assertEqual(s["no_activity_pct"], 56.5)
        self.assertEqual(s["step_ms"], [3.0, 4.0])
        self.assertEqual(s["data_load_ms"], [1.0, 1.5])
        self.assertEqual(s["batch_wait_ms"], [0.5, 1.0])
        self.assertEqual(s["h2d_submit_ms"], [0.5, 0.5])
        self.assertEqual(s["batch_wait_total_ms"], 1.5)
        self.assertEqual(s["batch_wait_max_ms"], 1.0)
        # Every kernel of the export, the window's edges ignored (as top_kernels).
        self.assertEqual(
            [
                (f["family"], f["launches"], f["total_ms"], f["ms_per_step"])
                for f in s["kernel_families"]
            ],
            [("batch norm", 2, 1.3, 0.65), ("convolution", 1, 1.4, 0.7), ("other", 3, 3.0, 1.5)],
        )
        self.assertEqual(s["batch_wait_max_step"], 1)
        self.assertEqual(s["h2d_submit_total_ms"], 1.0)
        self.assertEqual(
            dict(s["phase_totals_ms"]),
            {
                "capture_window": 10.0,
                "torch_step": 7.0,
                "backward": 2.5,
                "data_load": 2.5,
                "forward": 2.0,
                "capture_drain": 1.9,
                "batch_wait": 1.5,
                "h2d_submit": 1.0,
            },
        )
        self.assertEqual(
            dict(s["phase_counts"]),
            {
                "capture_window": 1,
                "torch_step": 2,
                "backward": 2,
                "data_load": 2,
                "forward": 2,
                "capture_drain": 1,
                "batch_wait": 2,
                "h2d_submit": 2,
            },
        )
        self.assertEqual(list(s["phase_totals_ms"])[:2], ["capture_window", "torch_step"])
        self.assertEqual(
            [(r["domain"], r["name"], r["count"], r["total_ms"]) for r in s["other_domain_ranges"]],
            [
                ("data_pipeline", "load_batch", 1, 3.0),
                ("data_pipeline", "reuse_fence", 1, 0.2),
                ("data_pipeline", "torch_step", 1, 0.2),
            ],
        )
        self.assertEqual(s["sync_calls_in_steps"], 0)
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)
        self.assertEqual(s["layout_conversion_kernels"], 0)
        self.assertEqual(s["kernel_launches"], 6)
        self.assertEqual(s["last_device_end_after_last_step_ms"], 4.0)
        self.assertEqual(s["expected_steps"], 2)
        self.assertEqual(s["expected_steps_source"], "--expected-steps")
        self.assertEqual(
            dict(s["checks"]),
            {
                "step_count": True,
                "copy_count": True,
                "capture_boundary": True,
                "no_sync_in_steps": True,
                "no_layout_conversions": True,
            },
        )
        self.assertTrue(s["all_checks_pass"])
        self.assertNotIn("images_per_s", s)

    def test_tables(self):
        s = self.summarize(basic_export())
        top = s["top_kernels"]
        self.assertEqual(
            [(k["label"], k["launches"], k["total_ms"]) for k in top],
            [("elementwise", 3, 3.0), ("cuDNN convert", 1, 1.4), ("BN fwd", 2, 1.3)],
        )
        self.assertEqual(top[0]["pct"], round(100 * 3.0 / 5.7, 2))
        mem = {
            m["operation"]: (m["count"], m["total_ms"], m["bytes"]) for m in s["memory_operations"]
        }
        self.assertEqual(
            mem,
            {
                "[memcpy Host-to-Device]": (5, 1.15, 5120),
                "[memcpy Device-to-Device]": (1, 0.1, 1024),
                "[memset]": (1, 0.3, 64),
            },
        )
        api = {a["name"]: a["calls"] for a in s["api_calls"]}
        self.assertEqual(
            api, {"cudaLaunchKernel": 6, "cudaEventSynchronize": 1, "cudaDeviceSynchronize": 1}
        )


class InputStarvationTest(TempDirCase):
    """input_starved against simulated_run()'s known answers: a host sleep of S ms at the start of
    batch_wait (the device has caught up by then) adds S ms of idle waiting on the input pipeline.
    """

    def starved(self, stalls):
        s = self.summarize(simulated_run(stalls=stalls), name="run%d.sqlite" % len(stalls))
        return s, s["input_starved"]

    def test_fed_steps_are_not_starved(self):
        # Without stalls the device waits only for each step's copies (0.2 ms in each of 4 steps).
        s, st = self.starved({})
        self.assertFalse(st["starved"])
        self.assertEqual(dict(st["by_range"]), {"h2d_submit": 0.8})
        self.assertEqual(st["idle_ms"], 0.8)
        self.assertAlmostEqual(st["idle_pct"], 100 * 0.8 / s["capture_window_ms"], places=5)
        self.assertEqual(st["threshold_pct"], STARVED_IDLE_PCT)

    def test_each_wait_on_the_loader_adds_its_length(self):
        for stalls, waited in (
            ({("batch_wait", 1): 3.0}, 3.0),
            ({("batch_wait", 1): 3.0, ("batch_wait", 3): 1.5}, 4.5),
        ):
            with self.subTest(stalls=stalls):
                s, st = self.starved(stalls)
                self.assertAlmostEqual(st["idle_ms"], 0.8 + waited, places=6)
                self.assertEqual(list(st["by_range"]), ["batch_wait", "h2d_submit"])  # most first
                self.assertTrue(st["starved"])  # 3.8 ms of a 41 ms window: 9%
                self.assertGreaterEqual(st["idle_pct"], STARVED_IDLE_PCT)

    def test_a_short_wait_is_not_starvation(self):
        # 1 ms of 39 ms: idle 1.8 ms, 4.6% of the window, below the 5% threshold.
        _, st = self.starved({("batch_wait", 2): 1.0})
        self.assertAlmostEqual(st["idle_ms"], 1.8, places=6)
        self.assertFalse(st["starved"])

    def test_a_compute_stall_is_not_the_input_pipeline(self):
        # 5 ms of host sleep in backward idles the device 4.6 ms, under backward, not the input.
        s, st = self.starved({("backward", 1): 5.0})
        self.assertGreater(s["idle_gaps"]["host_by_range"]["backward"]["total_ms"], 4.5)
        self.assertNotIn("backward", st["by_range"])
        self.assertFalse(st["starved"])
        self.assertLess(st["idle_ms"], 2.0)

    def test_no_device_data(self):
        b = simulated_run(stalls={("batch_wait", 1): 3.0})
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        self.assertIsNone(self.summarize(b)["input_starved"])


class RealFixtureStarvationTest(RealFixtureCase):
    def test_a_wait_on_the_loader_written_into_the_real_export_starves_it(self):
        # The Python reference is fed (0 ms idle waiting on its input). 40 ms of host sleep written
        # into batch_wait of step 5: the device first drains the work still queued, then waits.
        self.assertFalse(self.s["input_starved"]["starved"])
        self.assertEqual(self.s["input_starved"]["idle_ms"], 0.0)
        path = os.path.join(self.tmp, "starved.sqlite")
        shutil.copy(self.export, path)
        inject_stall(path, first_phase(self.ex, "batch_wait", 5).start + 1000, 40 * 1000000)
        s = compute_summary(load_export(path))
        st = s["input_starved"]
        self.assertTrue(st["starved"], st)
        self.assertEqual(list(st["by_range"]), ["batch_wait"])
        self.assertGreater(st["idle_ms"], 20.0)  # the queue held less than half the sleep
        self.assertLess(st["idle_ms"], 40.0)
        self.assertAlmostEqual(
            st["idle_pct"], 100 * st["idle_ms"] / s["capture_window_ms"], places=5
        )


class RealFixtureTest(RealFixtureCase):
    def test_known_values(self):
        s = self.s
        self.assertEqual(s["steps"], 8)
        self.assertAlmostEqual(s["capture_window_ms"], 357.5, delta=0.1)
        self.assertEqual(s["h2d_copies"], 16)
        self.assertAlmostEqual(s["no_activity_pct"], 3.7, delta=0.1)
        self.assertEqual(
            s["checks"],
            {
                "step_count": True,
                "copy_count": True,
                "capture_boundary": True,
                "no_sync_in_steps": True,
                "no_layout_conversions": True,
            },
        )
        self.assertEqual(s["nsys_version"], "2025.3.2.0")

    def test_agrees_with_nsys_stats(self):
        s = self.s
        # nvtx_sum.csv: ':torch_step' 339948398 ns over 8 instances, ':batch_wait' 1372762 ns.
        self.assertEqual(s["phase_totals_ms"]["torch_step"], 339.948398)
        self.assertEqual(s["phase_totals_ms"]["batch_wait"], 1.372762)
        self.assertEqual(s["batch_wait_total_ms"], 1.372762)
        self.assertEqual(s["h2d_submit_total_ms"], 5.794361)
        # cuda_gpu_kern_sum.csv's first row; cuda_api_sum.csv's one cudaDeviceSynchronize (the
        # drain).
        self.assertEqual(
            (s["top_kernels"][0]["launches"], s["top_kernels"][0]["total_ms"]), (200, 44.112756)
        )
        self.assertEqual(s["top_kernels"][0]["label"], "BN bwd #1")
        api = {a["name"]: a for a in s["api_calls"]}
        self.assertEqual(api["cudaDeviceSynchronize"]["calls"], 1)
        self.assertEqual(s["sync_calls_in_steps"], 0)


if __name__ == "__main__":
    unittest.main()
