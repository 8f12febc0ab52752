"""Tests for scripts/nsys_analysis/capture/ranks.py: NCCL kernels per step, exposed communication,
stragglers and the cross-rank checks, on synthetic per-rank exports with known answers
(nsys_exports.rank_export), and invariants of the real data-parallel capture once it is in
tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_ranks.py
"""

import os
import unittest

from scripts.support.nsys_exports import (
    NCCL_KERNEL,
    NCCL_STREAM,
    SCHEMA,
    RealRanksFixtureCase,
    TempDirCase,
    rank_clock_ms,
    rank_export,
    rank_report,
)
from nsys_analysis.capture.export import AnalysisError, load_export
from nsys_analysis.capture.ranks import (
    compute_ranks,
    is_nccl_kernel,
    rank_comm,
    rank_label,
    step_stragglers,
)
from nsys_analysis.capture.report import load_report
from nsys_analysis.capture.summary import compute_summary


class RanksCase(TempDirCase):
    def load(self, builder, rank, name=None):
        ex = load_export(self.build(builder, name or "run.rank%d.sqlite" % rank))
        return ex, rank_comm(rank, ex)

    def two_ranks(self, **kw):
        """RankComms, summaries and reports of rank_export(0) and rank_export(1) (defaults: rank 1
        late by 5 ms in step 2)."""
        comms, summaries, reports = [], [], []
        for rank in (0, 1):
            ex, comm = self.load(rank_export(rank, **kw), rank)
            comms.append(comm)
            reports.append(rank_report(rank, steps=kw.get("steps", 3)))
            summaries.append(compute_summary(ex, reports[-1]))
        return comms, summaries, reports


class NcclKernelTest(unittest.TestCase):
    def test_names(self):
        for name in (
            NCCL_KERNEL,
            "ncclKernel_AllReduce_RING_LL_Sum_float(ncclDevComm*, unsigned long, ncclWork*)",
            "void ncclDevKernel_Generic<4096>(ncclDevKernelArgsStorage<4096ul>)",
            "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)",
        ):
            self.assertTrue(is_nccl_kernel(name), name)
        for name in (
            "void at::native::vectorized_elementwise_kernel<4>()",
            "void c10d::detail::nccl_like()",
            "void cudnn::bn_bw_1C11_kernel_new<float>()",
            "",
            None,
        ):
            self.assertFalse(is_nccl_kernel(name), name)


class RankCommTest(RanksCase):
    def test_known_answers(self):
        comms, _, _ = self.two_ranks()
        r0, r1 = comms
        self.assertEqual((r0.rank, r0.steps, r0.window_ns), (0, 3, 60_000_000))
        self.assertEqual(r0.nccl_count, [1, 1, 1])
        self.assertEqual(r0.nccl_ns, [3_000_000, 3_000_000, 8_000_000])
        self.assertEqual(r1.nccl_ns, [3_000_000] * 3)
        self.assertEqual((r0.nccl_outside_count, r0.nccl_outside_ns), (1, 300_000))
        self.assertEqual(r0.exposed_ns, 8_000_000)
        self.assertEqual(r0.exposed_pct, 13.333333)
        self.assertEqual((r1.exposed_ns, r1.exposed_pct), (3_000_000, 5.0))
        self.assertEqual(r0.data_load_end_ns, [2_000_000] * 3)
        self.assertEqual(r1.data_load_end_ns, [2_000_000, 2_000_000, 7_000_000])

    def test_nccl_running_alone_only_counts_as_exposed(self):
        # Without the late rank every NCCL kernel runs alone for 1 ms of its 3.
        _, comm = self.load(rank_export(0, late_ms=0.0), 0)
        self.assertEqual(comm.exposed_ns, 3_000_000)
        # An extra NCCL kernel wholly under a compute kernel adds NCCL time but no exposure.
        b = rank_export(0, late_ms=0.0)
        b.kernel(
            13.5, 14.5, NCCL_KERNEL, launch_ms=13.4, stream=21
        )  # under step 0's forward kernel [13.1, 16]
        _, comm = self.load(b, 0, "extra.sqlite")
        self.assertEqual(comm.nccl_count, [2, 1, 1])
        self.assertEqual(comm.nccl_ns[0], 4_000_000)
        self.assertEqual(comm.exposed_ns, 3_000_000)

    def test_uncorrelated_kernel_attributed_by_its_start(self):
        b = rank_export(0, late_ms=0.0)
        b.kernel(
            31.0, 31.5, NCCL_KERNEL, stream=21
        )  # no runtime call; starts inside step 1 [31, 43]
        _, comm = self.load(b, 0)
        self.assertEqual(comm.nccl_count, [1, 2, 1])

    def test_without_cuda_tables_or_data_load(self):
        b = rank_export(0)
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        _, comm = self.load(b, 0)
        self.assertEqual((comm.exposed_ns, comm.exposed_pct), (None, None))
        self.assertEqual(comm.nccl_ns, [0, 0, 0])
        b = rank_export(0)
        b.tables["NVTX_EVENTS"] = [
            row for row in b.tables["NVTX_EVENTS"] if row.get("text") != "data_load"
        ]
        _, comm = self.load(b, 0, "noload.sqlite")
        self.assertEqual(comm.data_load_end_ns, [None, None, None])


class StragglerTest(RanksCase):
    def test_late_rank_in_step_2(self):
        comms, _, _ = self.two_ranks()
        steps = step_stragglers(comms)
        self.assertEqual(len(steps), 3)
        for st in steps[:2]:  # a tie: no straggler, nobody waited
            self.assertEqual(
                (st.straggler, st.spread_ns, st.fastest_nccl, st.agrees), (None, 0, None, None)
            )
            self.assertEqual(st.waited_ns, [0, 0])
        st = steps[2]
        self.assertEqual((st.step, st.straggler, st.spread_ns), (2, 1, 5_000_000))
        self.assertEqual(st.data_load_end_ns, [2_000_000, 7_000_000])
        self.assertEqual(st.nccl_ns, [8_000_000, 3_000_000])
        self.assertEqual(st.waited_ns, [5_000_000, 0])
        self.assertEqual((st.fastest_nccl, st.agrees), (1, True))

    def test_late_rank_0_and_clocks_ignored(self):
        # Rank 0 late this time; rank 1's clock still runs 100 ms ahead of rank 0's.
        comms = [
            self.load(rank_export(r, late_rank=0, late_step=1, late_ms=2.5), r)[1] for r in (0, 1)
        ]
        steps = step_stragglers(comms)
        self.assertEqual([st.straggler for st in steps], [None, 0, None])
        self.assertEqual(steps[1].waited_ns, [0, 2_500_000])
        self.assertEqual(steps[1].agrees, True)

    def test_host_and_device_disagree(self):
        comms, _, _ = self.two_ranks()
        r0 = comms[0]._replace(data_load_end_ns=[2_000_000, 2_000_000, 9_000_000])
        st = step_stragglers([r0, comms[1]])[2]
        self.assertEqual((st.straggler, st.fastest_nccl, st.agrees), (0, 1, False))

    def test_without_nccl_kernels(self):
        comms, _, _ = self.two_ranks()
        gloo = [c._replace(nccl_ns=[0, 0, 0], nccl_count=[0, 0, 0]) for c in comms]
        st = step_stragglers(gloo)[2]
        self.assertEqual(
            (st.straggler, st.fastest_nccl, st.agrees, st.waited_ns), (1, None, None, [0, 0])
        )


class ComputeRanksTest(RanksCase):
    def test_ranks_dict(self):
        comms, summaries, reports = self.two_ranks()
        r = compute_ranks(comms, summaries, reports)
        self.assertEqual(r["ranks"], [0, 1])
        self.assertEqual((r["steps"], r["steps_compared"]), ([3, 3], 3))
        p0, p1 = r["per_rank"]
        self.assertEqual(
            (p0["nccl_kernels"], p0["nccl_ms"], p0["nccl_ms_per_step"]), (3, 14.0, [3.0, 3.0, 8.0])
        )
        self.assertEqual((p0["nccl_kernels_outside_steps"], p0["nccl_ms_outside_steps"]), (1, 0.3))
        self.assertEqual((p0["exposed_comm_ms"], p0["exposed_comm_pct"]), (8.0, 13.333333))
        self.assertEqual((p1["exposed_comm_ms"], p1["exposed_comm_pct"]), (3.0, 5.0))
        self.assertEqual(p1["data_load_end_ms"], [2.0, 2.0, 7.0])
        self.assertEqual(
            (p0["straggler_steps"], p0["caused_wait_ms"], p0["waited_ms"]), (0, 0.0, 5.0)
        )
        self.assertEqual(
            (p1["straggler_steps"], p1["caused_wait_ms"], p1["waited_ms"]), (1, 5.0, 0.0)
        )
        self.assertEqual(p1["dist"]["world_size"], 2)
        self.assertEqual(
            r["stragglers"][2],
            {
                "step": 2,
                "straggler": 1,
                "spread_ms": 5.0,
                "data_load_end_ms": [2.0, 7.0],
                "nccl_ms": [8.0, 3.0],
                "waited_ms": [5.0, 0.0],
                "fastest_nccl": 1,
                "agrees": True,
            },
        )
        self.assertEqual(
            list(r["checks"])[:4],
            ["same_step_count", "nccl_kernels_visible", "rank0.step_count", "rank0.copy_count"],
        )
        self.assertEqual(len(r["checks"]), 12)
        self.assertEqual(
            (p0["graph_replays_recorded_whole"], p1["graph_replays_recorded_whole"]), (0, 0)
        )
        self.assertTrue(r["all_checks_pass"])

    def test_different_step_counts_fail(self):
        _, c0 = self.load(rank_export(0, steps=3), 0)
        ex1, c1 = self.load(rank_export(1, steps=2), 1)
        ex0 = load_export(os.path.join(self.tmp, "run.rank0.sqlite"))
        r = compute_ranks([c0, c1], [compute_summary(ex0), compute_summary(ex1)])
        self.assertFalse(r["checks"]["same_step_count"])
        self.assertEqual(
            r["check_details"]["same_step_count"],
            "torch_step ranges in each rank's window: rank 0: 3, rank 1: 2",
        )
        self.assertEqual(r["steps_compared"], 2)
        self.assertFalse(r["all_checks_pass"])

    def test_a_rank_check_fails(self):
        comms, summaries, _ = self.two_ranks()
        summaries[1]["checks"]["copy_count"] = False
        r = compute_ranks(comms, summaries)
        self.assertFalse(r["checks"]["rank1.copy_count"])
        self.assertFalse(r["all_checks_pass"])
        self.assertNotIn("dist", r["per_rank"][0])


class GraphRanksTest(RanksCase):
    """--cuda-graph under torchrun: every kernel of a step, NCCL's included, replayed from one
    graph."""

    def graph_ranks(self, node_trace=True):
        comms, summaries = [], []
        for rank in (0, 1):
            ex, comm = self.load(
                rank_export(rank, graph=True, node_trace=node_trace),
                rank,
                "graph%d.rank%d.sqlite" % (int(node_trace), rank),
            )
            comms.append(comm)
            summaries.append(compute_summary(ex, rank_report(rank)))
        return comms, summaries

    def test_replays_traced_node_by_node_give_the_eager_answers(self):
        comms, summaries = self.graph_ranks()
        eager, _, _ = self.two_ranks()
        for g, e in zip(comms, eager):
            self.assertEqual(g.nccl_count, [1, 1, 1])
            self.assertEqual(
                (g.nccl_ns, g.exposed_ns, g.data_load_end_ns),
                (e.nccl_ns, e.exposed_ns, e.data_load_end_ns),
            )
            self.assertEqual(
                (g.nccl_outside_count, g.graphs_whole), (1, 0)
            )  # the barrier's, launched eagerly
        self.assertTrue(all(s["cuda_graph"] and s["checks"]["graph_replay"] for s in summaries))
        r = compute_ranks(comms, summaries)
        self.assertEqual(r["stragglers"][2]["straggler"], 1)
        self.assertEqual(
            (r["stragglers"][2]["waited_ms"], r["stragglers"][2]["agrees"]), ([5.0, 0.0], True)
        )
        self.assertEqual([p["exposed_comm_pct"] for p in r["per_rank"]], [13.333333, 5.0])
        self.assertTrue(r["checks"]["nccl_kernels_visible"])
        self.assertTrue(r["all_checks_pass"])

    def test_nccl_kernels_of_a_replay_count_in_the_step_that_launched_it(self):
        # The device runs a replay after its step's host span has ended: attribution follows the
        # launch.
        b = rank_export(0, late_ms=0.0, graph=True)
        t = rank_clock_ms(0)
        # A second replay launched in step 1's graph_replay [23, 23.2], its all-reduce run after the
        # step's host span [21, 33] and before step 2's [41, 53].
        b.graph_launch(t + 23.1, [(t + 35.0, t + 36.0, NCCL_KERNEL, NCCL_STREAM)])
        _, comm = self.load(b, 0, "late.rank0.sqlite")
        self.assertEqual(comm.nccl_count, [1, 2, 1])
        self.assertEqual(comm.nccl_ns, [3_000_000, 4_000_000, 3_000_000])

    def test_replays_recorded_whole_say_so_instead_of_zeros(self):
        comms, summaries = self.graph_ranks(node_trace=False)
        for c in comms:
            self.assertEqual(
                (c.nccl_count, c.graphs_whole, c.exposed_ns, c.exposed_pct),
                ([0, 0, 0], 3, None, None),
            )
        r = compute_ranks(comms, summaries)
        self.assertEqual([p["graph_replays_recorded_whole"] for p in r["per_rank"]], [3, 3])
        self.assertEqual([p["exposed_comm_ms"] for p in r["per_rank"]], [None, None])
        self.assertFalse(r["checks"]["nccl_kernels_visible"])
        self.assertIn(
            "rank 0: 3 graph replay(s), rank 1: 3 graph replay(s) recorded whole",
            r["check_details"]["nccl_kernels_visible"],
        )
        self.assertIn("--cuda-graph-trace=node", r["check_details"]["nccl_kernels_visible"])
        self.assertFalse(r["all_checks_pass"])


class RankLabelTest(unittest.TestCase):
    def test_from_name_position_and_report(self):
        self.assertEqual(rank_label("out/run.rank3.sqlite", None, 0), 3)
        self.assertEqual(rank_label("a.sqlite", None, 1), 1)
        self.assertEqual(rank_label("a.sqlite", rank_report(1), 1), 1)
        self.assertEqual(
            rank_label("a.sqlite", {"steps": 8}, 0), 0
        )  # no dist section: nothing to compare
        with self.assertRaisesRegex(
            AnalysisError, "expected the run report of rank 0 for run.rank0.sqlite, " "got rank 1's"
        ):
            rank_label("run.rank0.sqlite", rank_report(1), 0)


class RealRanksFixtureTest(RealRanksFixtureCase):
    """Invariants any healthy data-parallel capture keeps (the exact numbers are the fixture's
    own)."""

    def test_invariants(self):
        comms, summaries, reports = [], [], []
        for i, (export, report_path) in enumerate(zip(self.exports, self.reports)):
            report = load_report(report_path) if report_path else None
            rank = rank_label(export, report, i)
            ex = load_export(export)
            comms.append(rank_comm(rank, ex))
            summaries.append(compute_summary(ex, report))
            reports.append(report)
        r = compute_ranks(comms, summaries, reports)
        self.assertTrue(r["checks"]["same_step_count"], r["check_details"]["same_step_count"])
        self.assertGreaterEqual(r["steps_compared"], 1)
        for p in r["per_rank"]:
            self.assertTrue(
                all(n >= 1 for n in p["nccl_kernels_per_step"]), p["rank"]
            )  # gradients all-reduced
            self.assertLessEqual(p["exposed_comm_ms"], p["nccl_ms"] + p["nccl_ms_outside_steps"])
            self.assertTrue(all(v is not None for v in p["data_load_end_ms"]), p["rank"])
        for st in r["stragglers"]:
            self.assertEqual(min(st["waited_ms"]), 0.0)
        self.assertTrue(r["all_checks_pass"], [k for k, v in r["checks"].items() if v is not True])


if __name__ == "__main__":
    unittest.main()
