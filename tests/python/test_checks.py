"""Tests for scripts/nsys_analysis/checks.py: each capture check failing for its reason, and the
cross-check with the nsys stats CSVs of the real export in tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import os
import unittest

# nsys_exports first: it puts scripts/ on sys.path.
from nsys_exports import AUTOGRAD, MAIN, STAGE, ExportBuilder, RealFixtureCase, TempDirCase, basic_export
from nsys_analysis.checks import crosscheck_stats, failed_checks, normalize_nvtx_name


class FailingChecksTest(TempDirCase):
    def test_step_count_from_expected_steps(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertIs(s["checks"]["step_count"], False)
        self.assertIn("expected 3", s["check_details"]["step_count"])

    def test_step_count_from_report(self):
        report = {"capture": {"steps": 5, "images_per_s": 2864.1}, "steps": [], "interrupted": False}
        s = self.summarize(basic_export(), report=report)
        self.assertEqual(s["expected_steps"], 5)
        self.assertEqual(s["expected_steps_source"], "run report capture.steps")
        self.assertIs(s["checks"]["step_count"], False)
        self.assertEqual(s["images_per_s"], 2864.1)

    def test_step_count_without_expectation(self):
        s = self.summarize(basic_export())
        self.assertIsNone(s["expected_steps"])
        self.assertIs(s["checks"]["step_count"], True)
        b = ExportBuilder()
        b.range("capture_window", 1.0, 2.0)
        s = self.summarize(b, name="empty.sqlite")
        self.assertEqual(s["steps"], 0)
        self.assertIs(s["checks"]["step_count"], False)
        self.assertIs(s["checks"]["capture_boundary"], False)

    def test_copy_count(self):
        b = basic_export()
        b.tables["CUPTI_ACTIVITY_KIND_MEMCPY"].pop(1)  # drop the H2D at 2.6 ms
        s = self.summarize(b)
        self.assertEqual(s["h2d_copies"], 3)
        self.assertIs(s["checks"]["copy_count"], False)
        self.assertIn("expected 2 x 2 steps = 4", s["check_details"]["copy_count"])

    def gpu_decode_export(self, main_copy=False):
        """basic_export's steps fed by a GPU decode stage: its ranges and copies on its own thread."""
        b = ExportBuilder()
        b.domain(1, "data_pipeline")
        b.range("capture_window", 1.0, 11.0)
        b.range("torch_step", 2.0, 5.0)
        b.range("torch_step", 5.0, 9.0)
        for at in (1.5, 4.5):
            b.range("gpu_decode", at, at + 0.5, tid=STAGE, domain=1)
            b.range("resize_normalize", at + 0.6, at + 0.7, tid=STAGE, domain=1)
            b.memcpy(at + 0.2, at + 0.3, launch_ms=at + 0.1, tid=STAGE)    # nvJPEG's bitstreams
            b.memcpy(at + 0.55, at + 0.58, launch_ms=at + 0.52, tid=STAGE)  # labels
        if main_copy:
            b.memcpy(6.0, 6.1, launch_ms=5.9)
        return b

    def test_copy_count_with_gpu_decode(self):
        s = self.summarize(self.gpu_decode_export())
        self.assertEqual(s["decode"], "gpu")
        self.assertEqual((s["h2d_copies"], s["h2d_copies_main_thread"], s["h2d_copies_gpu_stage"]), (4, 0, 4))
        self.assertIs(s["checks"]["copy_count"], True)
        self.assertIn("0 from the main thread", s["check_details"]["copy_count"])
        # A copy from the main thread fails it; so does a stage that copies nothing.
        s = self.summarize(self.gpu_decode_export(main_copy=True), name="main.sqlite")
        self.assertIs(s["checks"]["copy_count"], False)
        self.assertEqual(s["h2d_copies_main_thread"], 1)
        b = ExportBuilder()
        b.domain(1, "data_pipeline")
        b.range("capture_window", 1.0, 11.0)
        b.range("torch_step", 2.0, 5.0)
        b.memcpy(3.0, 3.1, launch_ms=2.9)
        report = {"capture": {"steps": 1}, "steps": [], "config": {"decode": "gpu"}}
        s = self.summarize(b, report=report, name="report.sqlite")
        self.assertEqual(s["decode"], "gpu")
        self.assertIsNone(s["h2d_copies_gpu_stage"])
        self.assertIs(s["checks"]["copy_count"], False)
        # The CPU loader's exports keep the 2-per-step rule.
        self.assertEqual(self.summarize(basic_export(), name="cpu.sqlite")["decode"], "cpu")

    def test_capture_boundary_step_outside_window(self):
        b = basic_export()
        b.range("torch_step", 0.1, 0.9)       # a warm-up step that leaked into the capture
        b.range("torch_step", 10.0, 11.5)     # a step crossing the window's end
        s = self.summarize(b, expected_steps=2)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["torch_step_ranges"], 4)
        self.assertEqual(s["steps_outside_window"], 2)
        self.assertIs(s["checks"]["step_count"], True)
        self.assertIs(s["checks"]["capture_boundary"], False)
        self.assertIn("2 torch_step range(s) outside capture_window", s["check_details"]["capture_boundary"])

    def test_capture_boundary_two_windows(self):
        b = basic_export()
        b.range("capture_window", 12.0, 14.0)
        s = self.summarize(b)
        self.assertEqual(s["capture_window_count"], 2)
        self.assertEqual(s["capture_window_ms"], 13.0)
        self.assertIs(s["checks"]["capture_boundary"], False)

    def test_capture_boundary_missing_window_falls_back_to_steps(self):
        b = basic_export()
        b.tables["NVTX_EVENTS"] = [r for r in b.tables["NVTX_EVENTS"] if r.get("text") != "capture_window"]
        s = self.summarize(b)
        self.assertEqual(s["capture_window_source"], "span of torch_step ranges")
        self.assertEqual(s["capture_window_ms"], 7.0)  # [2, 9] ms
        # Busy inside [2, 9]: [2.6, 4.2] + [6.2, 6.45] + [6.6, 8.0] + [8.1, 8.2] = 3.35 ms.
        self.assertEqual(s["device_busy_ms"], 3.35)
        self.assertEqual(s["no_activity_pct"], round(100 * 3.65 / 7.0, 6))
        self.assertEqual(s["steps"], 2)
        self.assertIs(s["checks"]["capture_boundary"], False)
        self.assertIn("0 capture_window ranges", s["check_details"]["capture_boundary"])

    def test_sync_in_steps(self):
        b = basic_export()
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)               # training thread, in step 1
        b.api("cudaEventSynchronize_v3020", 4.5, 4.6, tid=AUTOGRAD)  # autograd thread, in step 0
        b.api("cudaStreamSynchronize_v3020", 1.2, 1.3)               # before the first step
        s = self.summarize(b)
        self.assertEqual(s["sync_calls_in_steps"], 2)
        self.assertEqual(dict(s["sync_calls_in_steps_by_name"]), {"cudaEventSynchronize": 1, "cudaStreamSynchronize": 1})
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)
        self.assertIs(s["checks"]["no_sync_in_steps"], False)

    def test_only_the_loaders_domain_excuses_a_sync(self):
        b = basic_export()
        b.domain(2, "ddp", tid=MAIN)
        b.range("stop_agreement", 6.9, 7.2, domain=2)               # main thread, in step 1
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)               # inside it: still counted
        s = self.summarize(b)
        self.assertEqual(s["sync_calls_in_steps"], 1)
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)       # the loader's fence only
        self.assertIs(s["checks"]["no_sync_in_steps"], False)

    def test_layout_conversion(self):
        b = basic_export()
        name = "void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)1, (bool)0, (cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"
        b.kernel(4.3, 4.4, name, launch_ms=4.2)     # launched in step 0
        b.kernel(9.5, 9.6, name, launch_ms=9.4)     # launched during the drain: not per step
        b.kernel(8.5, 8.6, "void transpose_nhwc_to_nchw_kernel()", launch_ms=None)  # no launch record: by start
        s = self.summarize(b)
        self.assertEqual(s["layout_conversion_kernels"], 2)
        self.assertEqual(dict(s["layout_conversion_names"]), {name: 2, "void transpose_nhwc_to_nchw_kernel()": 1})
        self.assertIs(s["checks"]["no_layout_conversions"], False)

    def test_failed_checks_helper(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertEqual([n for n, _ in failed_checks(s)], ["step_count"])


class StatsCsvTest(RealFixtureCase):
    def test_csv_names(self):
        self.assertEqual(normalize_nvtx_name(":torch_step"), (None, "torch_step"))
        self.assertEqual(normalize_nvtx_name("torch_step"), (None, "torch_step"))
        self.assertEqual(normalize_nvtx_name("data_pipeline:load_batch"), ("data_pipeline", "load_batch"))
        self.assertEqual(normalize_nvtx_name("aten::conv2d"), (None, "aten::conv2d"))

    def test_crosscheck_with_the_nsys_stats_csvs(self):
        # nvtx_sum.csv, cuda_gpu_kern_sum.csv and cuda_gpu_mem_time_sum.csv beside the export.
        check = crosscheck_stats(self.ex, os.path.join(self.tmp, "py_reuse8"))
        self.assertEqual(check["nvtx_sum"]["compared"], 10)
        self.assertEqual(check["nvtx_sum"]["mismatches"], [])
        self.assertTrue(check["cuda_gpu_kern_sum"]["match"])
        self.assertEqual(check["cuda_gpu_mem_time_sum"]["csv_h2d"], 16)


if __name__ == "__main__":
    unittest.main()
