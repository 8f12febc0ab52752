"""Tests for scripts/nsys_analysis/capture/summary.py: every summary.json number of a tiny export
built with known intervals, and known values of the real nsys 2025.3 export in tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_summary.py
"""

import unittest

from scripts.support.nsys_exports import RealFixtureCase, TempDirCase, basic_export


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
