"""Tests for scripts/nsys_analysis/capture/export.py: what an nsys SQLite export yields when enum
tables, range kinds or device tables vary, and that the test builder's schema is the real export's.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_export.py
"""

import re
import sqlite3
import unittest

from scripts.support.nsys_exports import (
    CUPTI,
    MAIN,
    MS,
    STAGE,
    RealFixtureCase,
    SCHEMA,
    TempDirCase,
    basic_export,
    graph_run,
    tracer_cost_export,
)
from nsys_analysis.capture.export import AnalysisError, load_export
from nsys_analysis.capture.markdown import render_markdown


class LoadingTest(TempDirCase):
    def test_fallback_without_enum_tables_and_start_end_ranges(self):
        b = basic_export(enums=False)
        b.range(
            "h2d_submit", 8.0, 8.25, kind="NvtxStartEndRange"
        )  # a start/end range (eventType 60)
        s = self.summarize(b)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["h2d_submit_ms"], [0.5, 0.75])
        self.assertEqual(s["phase_counts"]["h2d_submit"], 3)

    def test_enum_ids_are_read_not_assumed(self):
        # Unusual ids: push/pop ranges are 159 and host-to-device copies are kind 5 in this export.
        ids = {"NvtxPushPopRange": 159, "NvtxStartEndRange": 160, "NvtxDomainCreate": 175}
        b = basic_export(event_ids=ids, htod_id=5)
        b.memcpy(7.0, 7.1, kind=1)  # kind 1 is not host-to-device in this export
        s = self.summarize(b)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["other_domain_ranges"][0]["domain"], "data_pipeline")

    def test_unterminated_range_is_skipped(self):
        b = basic_export()
        b.range("torch_step", 10.0, None)
        s = self.summarize(b)
        self.assertEqual(s["unterminated_ranges"], 1)
        self.assertEqual(s["steps"], 2)

    def test_a_range_without_a_name_is_named_unnamed(self):
        # Neither text nor textId: a phase of no name, counted, never a None that breaks a sort.
        b = basic_export()
        b.range("x", 5.0, 5.1)
        b.tables["NVTX_EVENTS"][-1]["text"] = None
        b.range("forward\nsecond line", 5.2, 5.3)
        ex = load_export(self.build(b, "unnamed.sqlite"))
        unnamed = [r for r in ex.ranges if r.name == "(unnamed)"]
        self.assertEqual([(r.start, r.end) for r in unnamed], [(round(5.0 * MS), round(5.1 * MS))])
        s = self.summarize(b)
        self.assertEqual(s["phase_counts"]["(unnamed)"], 1)
        md = render_markdown(s)
        self.assertIn("| forward second line |", md)

    def test_steps_of_two_processes_in_one_export_are_refused(self):
        # `nsys profile torchrun ...` records every rank in one report: its steps would interleave.
        b = basic_export()
        other = (8 << 24) | 100
        b.range("torch_step", 5.0, 5.5, tid=other)
        path = self.build(b, "two.sqlite")
        with self.assertRaisesRegex(
            AnalysisError,
            re.escape("%s holds torch_step ranges of 2 processes (pids 7, 8)" % path),
        ):
            load_export(path)
        b = basic_export()
        b.range("data_load", 5.0, 5.5, tid=other)  # another process's other ranges: fine
        ranges = load_export(self.build(b, "one.sqlite")).ranges
        self.assertEqual({r.tid >> 24 for r in ranges if r.tid is not None}, {7, 8})

    def test_a_byte_count_that_is_not_one_is_refused(self):
        for table in ("CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET"):
            for value in ("abc", -1, 2.5):
                with self.subTest(table=table, value=value):
                    b = basic_export()
                    b.tables[table][-1]["bytes"] = value
                    path = self.build(b, "%s_%s.sqlite" % (table, value))
                    with self.assertRaisesRegex(
                        AnalysisError,
                        re.escape(
                            "export %s: %s has a row with bytes %r, expected an integer >= 0"
                            % (path, table, value)
                        ),
                    ):
                        load_export(path)

    def test_graph_executions_recorded_whole(self):
        b = graph_run(steps=2, node_trace=False)
        # CUPTI writes 0 for both times of a graph it could not time: no interval, not one from 0.
        b.tables["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].append(
            {"start": 0, "end": 0, "graphId": 1, "graphExecId": 2}
        )
        ex = load_export(self.build(b))
        self.assertTrue(ex.device_data)
        self.assertEqual(ex.kernels, [])
        self.assertEqual(
            [
                (g.start, g.end, g.graph_id, g.launch_api, g.launch_tid, g.operation)
                for g in ex.graphs
            ],
            [
                (1_600_000, 3_400_000, 1, "cudaGraphLaunch", MAIN, "[CUDA graph 1]"),
                (4_600_000, 6_400_000, 1, "cudaGraphLaunch", MAIN, "[CUDA graph 1]"),
            ],
        )
        self.assertEqual([g.launch_ns for g in ex.graphs], [1_520_000, 4_520_000])
        self.assertIn((1_600_000, 3_400_000), ex.device_intervals())
        # A node-traced export has no such table: an empty list.
        self.assertEqual(load_export(self.build(graph_run(steps=2), "nodes.sqlite")).graphs, [])

    def test_an_export_with_only_graph_executions_has_device_data(self):
        # nsys writes no kernel table when the window's only device work is graphs recorded whole.
        b = graph_run(steps=1, node_trace=False)
        for table in (
            "CUPTI_ACTIVITY_KIND_KERNEL",
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            "CUPTI_ACTIVITY_KIND_MEMSET",
            "CUPTI_ACTIVITY_KIND_RUNTIME",
        ):
            b.omit.add(table)
        ex = load_export(self.build(b))
        self.assertTrue(ex.device_data)
        self.assertEqual(len(ex.graphs), 1)
        self.assertEqual(ex.graphs[0].launch_ns, None)  # no runtime table to correlate with

    def test_no_memset_table(self):
        b = basic_export()
        b.omit.add("CUPTI_ACTIVITY_KIND_MEMSET")
        s = self.summarize(b)
        # Without the memset [3.9, 4.2], the union ends at 4.0: busy 4.15 ms.
        self.assertEqual(s["device_busy_ms"], 4.15)
        self.assertEqual(s["no_activity_pct"], 58.5)


class ThreadsAndOverheadTest(TempDirCase):
    def test_thread_names_and_profiler_overhead(self):
        b = tracer_cost_export()
        b.thread_name(
            STAGE, "stage renamed"
        )  # a later row names the thread again: the last one wins
        ex = load_export(self.build(b))
        self.assertEqual(
            (ex.thread_names[MAIN], ex.thread_names[STAGE], ex.thread_names[CUPTI]),
            ("train_resnet50", "stage renamed", "CUPTI worker thread"),
        )
        self.assertEqual(
            (ex.thread_name(MAIN), ex.thread_name((7 << 24) | 200), ex.thread_name(None)),
            ("train_resnet50", "tid 200", "tid ?"),
        )
        self.assertEqual(
            [(o.name, o.start, o.end, o.tid) for o in ex.profiler_overhead[:3]],
            [
                ("TLS allocation", -MS // 2, MS // 2, (7 << 24) | 300),
                ("TLS allocation", round(9.5 * MS), round(11.5 * MS), STAGE),
                ("CUPTI Buffer flush", 12 * MS, round(12.5 * MS), CUPTI),
            ],
        )  # by start
        self.assertEqual(len(ex.profiler_overhead), 6)

    def test_both_tables_are_optional(self):
        b = tracer_cost_export()
        b.omit.update(("ThreadNames", "PROFILER_OVERHEAD"))
        ex = load_export(self.build(b))
        self.assertEqual((ex.thread_names, ex.profiler_overhead), ({}, None))
        b = tracer_cost_export()
        b.overhead("CUPTI Buffer flush", 1.0, 2.0, MAIN)
        b.tables["PROFILER_OVERHEAD"][-1]["end"] = "soon"
        with self.assertRaises(AnalysisError) as e:
            load_export(self.build(b, "bad.sqlite"))
        self.assertIn("PROFILER_OVERHEAD has a row with start", str(e.exception))


class RealExportTest(RealFixtureCase):
    def test_thread_names_and_overhead_of_the_real_export(self):
        main = {r.tid for r in self.ex.ranges if r.name == "torch_step"}
        self.assertEqual({self.ex.thread_name(t) for t in main}, {"python3"})
        self.assertEqual(len(self.ex.profiler_overhead), 15)
        self.assertIn(
            "CUDA profiling data flush on cudaProfilerStop",
            {o.name for o in self.ex.profiler_overhead},
        )
        # Its 8 steps' runtime calls per thread: the main thread and autograd's make nearly all.
        calls = self.s["capture_cost"]["api_calls"]
        self.assertEqual(
            [(t["thread"], t["main"], t["calls_per_step"]) for t in calls["threads"][:2]],
            [("pt_autograd_0", False, 509.0), ("python3", True, 495.125)],
        )

    def test_builder_schema_matches(self):
        conn = sqlite3.connect(self.export)
        try:
            for table, cols in SCHEMA.items():
                have = [r[1] for r in conn.execute('PRAGMA table_info("%s")' % table)]
                self.assertEqual(have, cols, table)
        finally:
            conn.close()


if __name__ == "__main__":
    unittest.main()
