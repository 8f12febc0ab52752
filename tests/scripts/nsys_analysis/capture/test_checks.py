"""Tests for scripts/nsys_analysis/capture/checks.py: each capture check failing for its reason, the
injected_stalls check of runs with known stalls (found, missing, in another phase or step, of
another length, an extra one), and the cross-check with the nsys stats CSVs of the real export in
tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_checks.py
"""

import os
import unittest

from scripts.support.nsys_exports import (
    AUTOGRAD,
    MAIN,
    SCHEMA,
    STAGE,
    ExportBuilder,
    RealFixtureCase,
    TempDirCase,
    basic_export,
    graph_run,
    simulated_run,
    tracer_cost_export,
    tracer_cost_report,
)
from nsys_analysis.capture.checks import (
    crosscheck_stats,
    failed_checks,
    injected_stalls,
    injected_stalls_check,
    normalize_nvtx_name,
)
from nsys_analysis.capture.markdown import render_markdown


class FailingChecksTest(TempDirCase):
    def test_step_count_from_expected_steps(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertIs(s["checks"]["step_count"], False)
        self.assertIn("expected 3", s["check_details"]["step_count"])

    def test_step_count_from_report(self):
        report = {
            "capture": {"steps": 5, "images_per_s": 2864.1},
            "steps": [],
            "interrupted": False,
        }
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
        """basic_export's steps fed by a GPU decode stage: its ranges and copies on its own
        thread."""
        b = ExportBuilder()
        b.domain(1, "data_pipeline")
        b.range("capture_window", 1.0, 11.0)
        b.range("torch_step", 2.0, 5.0)
        b.range("torch_step", 5.0, 9.0)
        for at in (1.5, 4.5):
            b.range("gpu_decode", at, at + 0.5, tid=STAGE, domain=1)
            b.range("resize_normalize", at + 0.6, at + 0.7, tid=STAGE, domain=1)
            b.memcpy(at + 0.2, at + 0.3, launch_ms=at + 0.1, tid=STAGE)  # nvJPEG's bitstreams
            b.memcpy(at + 0.55, at + 0.58, launch_ms=at + 0.52, tid=STAGE)  # labels
        if main_copy:
            b.memcpy(6.0, 6.1, launch_ms=5.9)
        return b

    def test_copy_count_with_gpu_decode(self):
        s = self.summarize(self.gpu_decode_export())
        self.assertEqual(s["decode"], "gpu")
        self.assertEqual(
            (s["h2d_copies"], s["h2d_copies_main_thread"], s["h2d_copies_gpu_stage"]), (4, 0, 4)
        )
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

    def test_copy_count_of_a_synthetic_run_is_zero(self):
        b = ExportBuilder()
        b.range("capture_window", 1.0, 11.0)
        b.range("torch_step", 2.0, 5.0)
        report = {
            "capture": {"steps": 1},
            "steps": [],
            "config": {"synthetic": True, "decode": "cpu"},
        }
        s = self.summarize(b, report=report)
        self.assertTrue(s["synthetic"])
        self.assertIs(s["checks"]["copy_count"], True)
        self.assertIn("expected 0", s["check_details"]["copy_count"])
        b.memcpy(3.0, 3.1, launch_ms=2.9)
        self.assertIs(
            self.summarize(b, report=report, name="copy.sqlite")["checks"]["copy_count"], False
        )
        # Without a report the mode is unknown: the loader's rule.
        self.assertFalse(self.summarize(b, name="noreport.sqlite")["synthetic"])

    def test_graph_replay_of_a_cuda_graph_run(self):
        report = {
            "capture": {"steps": 3},
            "steps": [],
            "config": {"cuda_graph": True, "decode": "cpu"},
        }
        s = self.summarize(graph_run(), report=report)
        self.assertTrue(s["cuda_graph"])
        self.assertEqual(s["graph_launches_per_step"], [1, 1, 1])
        self.assertEqual(s["graph_kernels"], 9)
        self.assertEqual(s["kernels_outside_graphs_in_steps"], 0)
        self.assertTrue(s["all_checks_pass"], s["check_details"])
        self.assertIn("3 of 3 steps launch one graph", s["check_details"]["graph_replay"])
        # The copies into the graph's inputs are not host-to-device: still 2 a step.
        self.assertIs(s["checks"]["copy_count"], True)
        # The graph's nodes are charged to graph_replay, where their launch was.
        self.assertEqual(list(s["gpu_time_by_phase_ms"])[:2], ["data_load", "graph_replay"])
        self.assertAlmostEqual(s["gpu_time_by_phase_ms"]["graph_replay"], 9 * 0.6, places=6)

    def test_graph_replay_fails_for_its_reasons(self):
        report = {"capture": {"steps": 3}, "steps": [], "config": {"cuda_graph": True}}
        s = self.summarize(graph_run(launches={1: 0, 2: 2}), report=report, name="launches.sqlite")
        self.assertIs(s["checks"]["graph_replay"], False)
        self.assertEqual(s["graph_launches_per_step"], [1, 0, 2])
        self.assertIn("1 (0), 2 (2)", s["check_details"]["graph_replay"])
        s = self.summarize(graph_run(node_trace=False), report=report, name="nodes.sqlite")
        self.assertIs(s["checks"]["graph_replay"], False)
        self.assertIn("--cuda-graph-trace=node", s["check_details"]["graph_replay"])
        b = graph_run()
        b.kernel(4.8, 4.9, launch_ms=4.7, tid=AUTOGRAD)  # eager work beside the graph
        s = self.summarize(b, report=report, name="eager.sqlite")
        self.assertIs(s["checks"]["graph_replay"], False)
        self.assertIn(
            "1 kernel(s) launched inside steps outside a graph", s["check_details"]["graph_replay"]
        )
        # The input pipeline's kernels run beside the graph by design.
        b = graph_run()
        b.domain(1, "data_pipeline", tid=STAGE)
        b.range("gpu_decode", 4.0, 5.0, tid=STAGE, domain=1)
        b.kernel(4.8, 4.9, launch_ms=4.7, tid=STAGE, stream=9)
        self.assertIs(
            self.summarize(b, report=report, name="stage.sqlite")["checks"]["graph_replay"], True
        )

    def test_a_graph_recorded_whole_is_device_activity(self):
        """Without --cuda-graph-trace=node, nsys records each replay as one graph execution
        (CUPTI_ACTIVITY_KIND_GRAPH_TRACE) and none of its kernels: busy time, idle gaps, host stalls
        and GPU time by phase count it as the node-traced capture counts its nodes (back to back
        here), and the checks that need the kernels say so."""
        report = {
            "capture": {"steps": 3},
            "steps": [],
            "config": {"cuda_graph": True, "decode": "cpu"},
        }
        nodes = self.summarize(graph_run(), report=report, name="nodes.sqlite")
        whole = self.summarize(graph_run(node_trace=False), report=report, name="whole.sqlite")
        self.assertEqual(
            (whole["graph_kernels"], whole["graph_executions"], whole["kernel_launches"]), (0, 3, 0)
        )
        self.assertEqual((nodes["graph_kernels"], nodes["graph_executions"]), (9, 0))
        # 3 steps of copies (0.11 ms) and a replay (1.8 ms) in a 10 ms window: not 96.7 % idle.
        self.assertAlmostEqual(whole["device_busy_ms"], 5.73, places=6)
        self.assertAlmostEqual(whole["no_activity_pct"], 42.7, places=6)
        for key in (
            "device_busy_ms",
            "no_activity_pct",
            "last_device_end_after_last_step_ms",
            "host_stalls",
            "gpu_time_by_phase_ms",
            "gpu_time_by_phase_per_step_ms",
            "gpu_time_by_phase_main_thread_ms",
        ):
            self.assertEqual(whole[key], nodes[key], key)
        for key in ("count", "total_ms", "causes", "histogram", "host_by_range"):
            self.assertEqual(whole["idle_gaps"][key], nodes["idle_gaps"][key], key)
        self.assertIn("[CUDA graph 1]", [g["next"] for g in whole["idle_gaps"]["largest"]])
        self.assertAlmostEqual(whole["gpu_time_by_phase_ms"]["graph_replay"], 3 * 1.8, places=6)
        self.assertEqual(whole["gpu_activities_by_phase"]["graph_replay"], 3)
        # The graph's kernels are not in the export: the checks that need them say why.
        self.assertIs(whole["checks"]["graph_replay"], False)
        detail = whole["check_details"]["graph_replay"]
        self.assertIn("3 of 3 steps launch one graph", detail)
        self.assertIn("the window's 3 graph executions were recorded whole", detail)
        self.assertIn("per-kernel detail needs a capture with nsys --cuda-graph-trace=node", detail)
        self.assertIsNone(whole["checks"]["no_layout_conversions"])
        self.assertIn(
            "not evaluable: the window's 3 graph executions were recorded whole",
            whole["check_details"]["no_layout_conversions"],
        )
        self.assertIs(nodes["checks"]["no_layout_conversions"], True)
        self.assertIs(whole["checks"]["copy_count"], True)
        md = render_markdown(whole)
        self.assertIn(
            "- no recorded kernel, copy, memset or graph execution: 42.70% of the window", md
        )
        self.assertIn(
            "- CUDA graph executions recorded whole (no --cuda-graph-trace=node): 3 in the window",
            md,
        )
        self.assertNotIn("recorded whole", render_markdown(nodes))

    def test_graph_mode_without_a_report(self):
        s = self.summarize(graph_run(), name="noreport.sqlite")
        self.assertTrue(s["cuda_graph"])
        self.assertIn("graph_replay", s["checks"])
        # An eager capture has no graph_replay check, and says so.
        s = self.summarize(basic_export(), name="eager.sqlite")
        self.assertFalse(s["cuda_graph"])
        self.assertNotIn("graph_replay", s["checks"])
        report = {"capture": {"steps": 3}, "steps": [], "config": {"cuda_graph": False}}
        self.assertNotIn(
            "graph_replay", self.summarize(graph_run(), report=report, name="off.sqlite")["checks"]
        )

    def test_an_injected_stalls_drain_is_not_a_step_sync(self):
        b = basic_export()
        b.domain(2, "inject_stall", tid=MAIN)
        b.range("inject_stall", 6.6, 6.9, domain=2)
        b.api("cudaDeviceSynchronize_v3020", 6.61, 6.7)  # the drain before the sleep: excused
        s = self.summarize(b)
        self.assertIs(s["checks"]["no_sync_in_steps"], True)
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)  # after it, inside the step: counted
        s = self.summarize(b, name="second.sqlite")
        self.assertIs(s["checks"]["no_sync_in_steps"], False)
        self.assertEqual(s["sync_calls_in_steps_by_name"], {"cudaStreamSynchronize": 1})

    def test_capture_boundary_step_outside_window(self):
        b = basic_export()
        b.range("torch_step", 0.1, 0.9)  # a warm-up step that leaked into the capture
        b.range("torch_step", 10.0, 11.5)  # a step crossing the window's end
        s = self.summarize(b, expected_steps=2)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["torch_step_ranges"], 4)
        self.assertEqual(s["steps_outside_window"], 2)
        self.assertIs(s["checks"]["step_count"], True)
        self.assertIs(s["checks"]["capture_boundary"], False)
        self.assertIn(
            "2 torch_step range(s) outside capture_window", s["check_details"]["capture_boundary"]
        )

    def test_capture_boundary_two_windows(self):
        b = basic_export()
        b.range("capture_window", 12.0, 14.0)
        s = self.summarize(b)
        self.assertEqual(s["capture_window_count"], 2)
        self.assertEqual(s["capture_window_ms"], 13.0)
        self.assertIs(s["checks"]["capture_boundary"], False)

    def test_capture_boundary_missing_window_falls_back_to_steps(self):
        b = basic_export()
        b.tables["NVTX_EVENTS"] = [
            r for r in b.tables["NVTX_EVENTS"] if r.get("text") != "capture_window"
        ]
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
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)  # training thread, in step 1
        b.api("cudaEventSynchronize_v3020", 4.5, 4.6, tid=AUTOGRAD)  # autograd thread, in step 0
        b.api("cudaStreamSynchronize_v3020", 1.2, 1.3)  # before the first step
        s = self.summarize(b)
        self.assertEqual(s["sync_calls_in_steps"], 2)
        self.assertEqual(
            dict(s["sync_calls_in_steps_by_name"]),
            {"cudaEventSynchronize": 1, "cudaStreamSynchronize": 1},
        )
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)
        self.assertIs(s["checks"]["no_sync_in_steps"], False)

    def test_only_the_loaders_domain_excuses_a_sync(self):
        b = basic_export()
        b.domain(2, "ddp", tid=MAIN)
        b.range("stop_agreement", 6.9, 7.2, domain=2)  # main thread, in step 1
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)  # inside it: still counted
        s = self.summarize(b)
        self.assertEqual(s["sync_calls_in_steps"], 1)
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)  # the loader's fence only
        self.assertIs(s["checks"]["no_sync_in_steps"], False)

    def test_layout_conversion(self):
        b = basic_export()
        name = (
            "void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)1, (bool)0, "
            "(cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"
        )
        b.kernel(4.3, 4.4, name, launch_ms=4.2)  # launched in step 0
        b.kernel(9.5, 9.6, name, launch_ms=9.4)  # launched during the drain: not per step
        b.kernel(
            8.5, 8.6, "void transpose_nhwc_to_nchw_kernel()", launch_ms=None
        )  # no launch record: by start
        s = self.summarize(b)
        self.assertEqual(s["layout_conversion_kernels"], 2)
        self.assertEqual(
            dict(s["layout_conversion_names"]), {name: 2, "void transpose_nhwc_to_nchw_kernel()": 1}
        )
        self.assertIs(s["checks"]["no_layout_conversions"], False)

    def test_failed_checks_helper(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertEqual([n for n, _ in failed_checks(s)], ["step_count"])


def stall_report(*specs, steps=4):
    """A train_resnet50 run report of simulated_run()'s capture that injected specs
    ("PHASE@STEP:MS"), with host step times (step 2 ~20 ms longer)."""
    return {
        "config": {"inject_stall": list(specs)},
        "capture": {"steps": steps},
        "steps": [{"index": i, "step_ms": 28.8 if i == 2 else 8.8} for i in range(steps)],
    }


class CaptureCostCheckTest(TempDirCase):
    """The check capture_cost: absent without untraced reports, passing at exactly
    1 - max_slowdown."""

    def check(self, traced_ips, untraced_ips, name, **kw):
        untraced = [("u%d.json" % i, tracer_cost_report(v)) for i, v in enumerate(untraced_ips)]
        s = self.summarize(
            tracer_cost_export(),
            tracer_cost_report(traced_ips),
            untraced=untraced,
            name=name + ".sqlite",
            **kw,
        )
        return s, s["checks"].get("capture_cost", "absent"), s["check_details"].get("capture_cost")

    def test_absent_without_untraced_reports(self):
        s, result, _ = self.check(400.0, [], "none")
        self.assertEqual(result, "absent")
        self.assertTrue(s["all_checks_pass"], s["check_details"])

    def test_at_the_threshold(self):
        s, result, detail = self.check(450.0, [500.0], "at")  # 0.9 = 1 - 0.10: passes
        self.assertIs(result, True)
        self.assertTrue(s["all_checks_pass"])
        self.assertEqual(
            detail,
            "traced 450.0 images/s, 0.900x the untraced 500.0 (one run); at least 0.90x needed",
        )
        s, result, detail = self.check(449.5, [400.0, 500.0, 600.0], "below")
        self.assertIs(result, False)
        self.assertFalse(s["all_checks_pass"])
        self.assertTrue(
            detail.startswith(
                "traced 449.5 images/s, 0.899x the untraced 500.0 (median of 3 runs); at "
                "least 0.90x needed: tracer-bound"
            ),
            detail,
        )
        self.assertEqual([n for n, _ in failed_checks(s)], ["capture_cost"])
        _, result, _ = self.check(449.5, [500.0], "looser", max_slowdown=0.2)
        self.assertIs(result, True)

    def test_not_evaluable_without_a_throughput(self):
        untraced = [("u.json", {"capture": {"steps": 3}, "steps": []})]
        s = self.summarize(tracer_cost_export(), tracer_cost_report(400.0), untraced=untraced)
        self.assertIsNone(s["checks"]["capture_cost"])
        self.assertEqual(
            s["check_details"]["capture_cost"],
            "not evaluable: no untraced report gives images_per_s",
        )


class InjectedStallsTest(TempDirCase):
    runs = 0

    def check(self, stalls, report):
        """(summary, check, detail) of simulated_run(stalls) with report."""
        self.runs += 1
        s = self.summarize(
            simulated_run(stalls=stalls), report=report, name="run%d.sqlite" % self.runs
        )
        return s, s["checks"].get("injected_stalls"), s["check_details"].get("injected_stalls")

    def test_found(self):
        s, ok, detail = self.check({("backward", 2): 20.0}, stall_report("backward@2:20"))
        self.assertIs(ok, True, detail)
        self.assertEqual(
            detail,
            "1 injected, 1 found within 5%; backward@2:20: 20.000 ms (+0.0%; gap 19.600 ms at "
            "22.860 ms, quiet 20.449 ms, usual 0.449 ms), report step_ms 28.800 (median of the "
            "others 8.800); no other host stall >= 1 ms",
        )
        self.assertEqual(list(s["checks"])[-1], "injected_stalls")
        self.assertTrue(s["all_checks_pass"])

    def test_several_found(self):
        stalls = {
            ("data_load", 0): 20.0,
            ("optimizer_step", 1): 10.0,
            ("forward", 2): 20.0,
            ("zero_grad", 3): 3.0,
        }
        _, ok, detail = self.check(
            stalls,
            stall_report("forward@2:20", "zero_grad@3:3", "optimizer_step@1:10", "data_load@0:20"),
        )
        # data_load@0 measures 20.55 ms (+2.75 %): from the window's start, no usual length to
        # subtract.
        self.assertIs(ok, True, detail)
        self.assertIn("4 injected, 4 found within 5%", detail)
        self.assertIn("data_load@0:20: 20.550 ms (+2.8%", detail)

    def test_nested_ranges(self):
        # batch_wait and h2d_submit nest in data_load: a stall there is data_load's, in that range.
        s, ok, detail = self.check(
            {("batch_wait", 1): 10.0, ("h2d_submit", 2): 10.0},
            stall_report("batch_wait@1:10", "h2d_submit@2:10"),
        )
        self.assertIs(ok, True, detail)
        self.assertEqual(
            [(x["step"], x["phase"], x["range"]) for x in s["host_stalls"]],
            [(1, "data_load", "batch_wait"), (2, "data_load", "h2d_submit")],
        )
        self.assertIn("| data_load/batch_wait |", render_markdown(s))
        # Named by its step-level phase, the stall is found too; in the other nested range, not.
        self.assertIs(
            self.check({("batch_wait", 1): 10.0}, stall_report("data_load@1:10"))[1], True
        )
        _, ok, detail = self.check({("batch_wait", 1): 10.0}, stall_report("h2d_submit@1:10"))
        self.assertIs(ok, False)
        self.assertIn("h2d_submit@1:10 not found (data_load/batch_wait: 10.000 ms", detail)

    def test_missing(self):
        # Nothing was injected where the report says: no gap there, and nothing else either.
        _, ok, detail = self.check({}, stall_report("backward@2:20"))
        self.assertIs(ok, False)
        self.assertIn("backward@2:20 not found (no host-caused gap >= 1 ms at step 2)", detail)
        self.assertIn("no other host stall >= 1 ms", detail)

    def test_wrong_phase(self):
        # The stall sits in forward of step 2: not the injected one, and an unexpected one.
        _, ok, detail = self.check({("forward", 2): 20.0}, stall_report("backward@2:20"))
        self.assertIs(ok, False)
        self.assertIn("backward@2:20 not found (forward: 20.000 ms, gap 20.100 ms)", detail)
        self.assertIn(
            "unexpected host stall(s): 20.000 ms at 19.160 ms (gap 20.100 ms; step 2, forward)",
            detail,
        )

    def test_wrong_step(self):
        _, ok, detail = self.check({("backward", 2): 20.0}, stall_report("backward@1:20"))
        self.assertIs(ok, False)
        self.assertIn("backward@1:20 not found (no host-caused gap >= 1 ms at step 1)", detail)
        self.assertIn(
            "unexpected host stall(s): 20.000 ms at 22.860 ms (gap 19.600 ms; step 2, backward)",
            detail,
        )

    def test_length_tolerance(self):
        # 20.0 measured: within 5 % of 21 ms, not of 21.1 ms or 25 ms.
        self.assertIs(self.check({("backward", 2): 20.0}, stall_report("backward@2:21"))[1], True)
        for spec in ("backward@2:21.1", "backward@2:25"):
            _, ok, detail = self.check({("backward", 2): 20.0}, stall_report(spec))
            self.assertIs(ok, False, spec)
            self.assertIn("%s not found (backward: 20.000 ms, gap 19.600 ms)" % spec, detail)

    def test_extra_stall(self):
        _, ok, detail = self.check(
            {("backward", 2): 20.0, ("data_load", 1): 5.0}, stall_report("backward@2:20")
        )
        self.assertIs(ok, False)
        self.assertIn("1 injected, 1 found within 5%; backward@2:20: 20.000 ms", detail)
        self.assertIn("unexpected host stall(s): 5.000 ms at", detail)
        self.assertIn("step 1, data_load)", detail)

    def test_gap_without_a_slower_host_is_not_a_stall(self):
        # An unmatched gap of 1 ms or more at which the host took no longer than usual (the device
        # caught up after a stall) is named but does not fail the check.
        found = {
            "start_ms": 10.0,
            "gap_ms": 15.0,
            "quiet_ms": 20.5,
            "usual_quiet_ms": 0.5,
            "stall_ms": 20.0,
            "held_ms": 21.0,
            "step": 2,
            "phase": "backward",
        }
        catch_up = {
            "start_ms": 50.0,
            "gap_ms": 1.2,
            "quiet_ms": 1.3,
            "usual_quiet_ms": 1.1,
            "stall_ms": 0.2,
            "held_ms": 1.3,
            "step": 3,
            "phase": "zero_grad",
        }
        ok, detail = injected_stalls_check(
            {"host_stalls": [found, catch_up]}, stall_report("backward@2:20")
        )
        self.assertIs(ok, True, detail)
        self.assertIn(
            "gaps >= 1 ms with the host at its usual pace (not stalls): 0.200 ms at 50.000 ms "
            "(gap 1.200 ms; step 3, zero_grad)",
            detail,
        )
        # Without a runtime table the gap itself is the length.
        bare = dict(
            found, quiet_ms=None, usual_quiet_ms=None, stall_ms=None, held_ms=None, gap_ms=19.5
        )
        self.assertIs(
            injected_stalls_check({"host_stalls": [bare]}, stall_report("backward@2:20"))[0], True
        )

    def test_absent_without_injected_stalls(self):
        # No inject_stall (or an empty one): no check at all, all_checks_pass as before.
        for report in (
            None,
            {"config": {}, "capture": {"steps": 4}, "steps": []},
            {"config": {"inject_stall": []}, "capture": {"steps": 4}, "steps": []},
        ):
            s = self.summarize(
                simulated_run(stalls={("backward", 2): 20.0}),
                report=report,
                name="run%d.sqlite" % len(str(report)),
            )
            self.assertNotIn("injected_stalls", s["checks"])
            self.assertTrue(s["all_checks_pass"])
            self.assertEqual(len(s["host_stalls"]), 1)
        self.assertIsNone(
            injected_stalls_check({"host_stalls": []}, {"config": {"inject_stall": None}})
        )

    def test_spec_forms(self):
        self.assertEqual(
            injected_stalls({"config": {"inject_stall": ["backward@2:20", " forward@0:2.5 "]}}),
            [("backward@2:20", "backward", 2, 20.0), (" forward@0:2.5 ", "forward", 0, 2.5)],
        )
        self.assertEqual(
            injected_stalls({"config": {"inject_stall": "zero_grad@3:1"}}),
            [("zero_grad@3:1", "zero_grad", 3, 1.0)],
        )
        self.assertEqual(
            injected_stalls(
                {
                    "config": {
                        "inject_stall": [
                            "backward:20",
                            "forward@1:0",
                            "forward@1:x",
                            "forward@-1:5",
                            7,
                        ]
                    }
                }
            ),
            [
                ("backward:20", None, None, None),
                ("forward@1:0", None, None, None),
                ("forward@1:x", None, None, None),
                ("forward@-1:5", None, None, None),
                ("7", None, None, None),
            ],
        )
        # train_resnet50 writes MS as C++ streams a double.
        self.assertEqual(
            injected_stalls({"config": {"inject_stall": ["forward@1:1e-05"]}})[0][3], 1e-05
        )
        # A single string is taken as a list of one; an unreadable entry fails the check.
        _, ok, _ = self.check(
            {("backward", 2): 20.0}, dict(stall_report(), config={"inject_stall": "backward@2:20"})
        )
        self.assertIs(ok, True)
        _, ok, detail = self.check(
            {("backward", 2): 20.0}, stall_report("backward@2:20", "backward:2")
        )
        self.assertIs(ok, False)
        self.assertEqual(
            detail, "unreadable config.inject_stall entry 'backward:2' (expected PHASE@STEP:MS)"
        )

    def test_not_evaluable_without_device_data(self):
        b = simulated_run(stalls={("backward", 2): 20.0})
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        s = self.summarize(b, report=stall_report("backward@2:20"))
        self.assertIsNone(s["checks"]["injected_stalls"])
        self.assertIn("not evaluable", s["check_details"]["injected_stalls"])
        self.assertFalse(s["all_checks_pass"])


class StatsCsvTest(RealFixtureCase):
    def test_csv_names(self):
        self.assertEqual(normalize_nvtx_name(":torch_step"), (None, "torch_step"))
        self.assertEqual(normalize_nvtx_name("torch_step"), (None, "torch_step"))
        self.assertEqual(
            normalize_nvtx_name("data_pipeline:load_batch"), ("data_pipeline", "load_batch")
        )
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
