"""Tests for scripts/nsys_analysis/capture/export.py: what an nsys SQLite export yields when enum tables, range
kinds or device tables vary, and that the test builder's schema is the real export's.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_export.py
"""

import sqlite3
import unittest

from scripts.support.nsys_exports import MAIN, RealFixtureCase, SCHEMA, TempDirCase, basic_export, graph_run
from nsys_analysis.capture.export import load_export


class LoadingTest(TempDirCase):
    def test_fallback_without_enum_tables_and_start_end_ranges(self):
        b = basic_export(enums=False)
        b.range("h2d_submit", 8.0, 8.25, kind="NvtxStartEndRange")  # a start/end range (eventType 60)
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

    def test_graph_executions_recorded_whole(self):
        b = graph_run(steps=2, node_trace=False)
        # CUPTI writes 0 for both times of a graph it could not time: no interval, not one from 0.
        b.tables["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].append({"start": 0, "end": 0, "graphId": 1, "graphExecId": 2})
        ex = load_export(self.build(b))
        self.assertTrue(ex.device_data)
        self.assertEqual(ex.kernels, [])
        self.assertEqual([(g.start, g.end, g.graph_id, g.launch_api, g.launch_tid, g.operation) for g in ex.graphs],
                         [(1_600_000, 3_400_000, 1, "cudaGraphLaunch", MAIN, "[CUDA graph 1]"),
                          (4_600_000, 6_400_000, 1, "cudaGraphLaunch", MAIN, "[CUDA graph 1]")])
        self.assertEqual([g.launch_ns for g in ex.graphs], [1_520_000, 4_520_000])
        self.assertIn((1_600_000, 3_400_000), ex.device_intervals())
        # A node-traced export has no such table: an empty list.
        self.assertEqual(load_export(self.build(graph_run(steps=2), "nodes.sqlite")).graphs, [])

    def test_an_export_with_only_graph_executions_has_device_data(self):
        # nsys writes no kernel table when the window's only device work is graphs recorded whole.
        b = graph_run(steps=1, node_trace=False)
        for table in ("CUPTI_ACTIVITY_KIND_KERNEL", "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET",
                      "CUPTI_ACTIVITY_KIND_RUNTIME"):
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


class RealExportTest(RealFixtureCase):
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
