"""Tests for scripts/nsys_analysis/capture/figures.py: the sweep's figures, a capture's figures
without CUDA data, figure 6 (GPU time per phase) with and without steps, and the ranks figure with
and without steps to compare.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_figures.py
"""

import importlib.util
import os
import sys
import unittest

from scripts.support.nsys_exports import (
    SCHEMA,
    ExportBuilder,
    TempDirCase,
    basic_export,
    graph_run,
    phase_export,
    rank_export,
)
from nsys_analysis.capture.export import load_export
from nsys_analysis.capture.figures import plot_gpu_phases, plot_ranks
from nsys_analysis.capture.pipeline import write_outputs
from nsys_analysis.capture.ranks import compute_ranks, rank_comm
from nsys_analysis.capture.summary import compute_summary


HAVE_MPL = importlib.util.find_spec("matplotlib") is not None


@unittest.skipUnless(HAVE_MPL, "matplotlib not installed for %s" % sys.executable)
class FigureTest(TempDirCase):
    def test_a_capture_without_cuda_data(self):
        # A capture without CUDA data still gets its figures.
        b = basic_export()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        ex = load_export(b.write(os.path.join(self.tmp, "nvtx.sqlite")))
        paths = write_outputs(compute_summary(ex), ex, os.path.join(self.tmp, "out"))
        self.assertEqual(
            [os.path.basename(p) for p in paths],
            [
                "fig1_phases.png",
                "fig2_top_kernels.png",
                "fig3_timeline.png",
                "fig5_batch_wait.png",
                "fig6_gpu_phases.png",
            ],
        )

    def test_figures_of_graphs_recorded_whole(self):
        # Replays recorded whole draw in the kernels' lane (figure 3) and in graph_replay
        # (figure 6).
        ex = load_export(graph_run(node_trace=False).write(os.path.join(self.tmp, "whole.sqlite")))
        paths = write_outputs(compute_summary(ex), ex, os.path.join(self.tmp, "out"))
        for p in paths:
            self.assertGreater(os.path.getsize(p), 5000, p)
        self.assertIn("fig3_timeline.png", [os.path.basename(p) for p in paths])

    def test_gpu_phases_figure(self):
        # Figure 6 of a capture with device work in every kind of bucket, and of one without steps.
        ex = load_export(phase_export().write(os.path.join(self.tmp, "phases.sqlite")))
        p = plot_gpu_phases(compute_summary(ex), os.path.join(self.tmp, "fig6.png"))
        self.assertGreater(os.path.getsize(p), 10000)
        b = ExportBuilder()
        b.range("capture_window", 0.0, 2.0)
        b.kernel(0.5, 1.0, launch_ms=0.1)
        ex = load_export(b.write(os.path.join(self.tmp, "nosteps.sqlite")))
        s = compute_summary(ex)
        self.assertEqual(s["gpu_time_by_phase_ms"]["(outside phases)"], 0.5)
        p = plot_gpu_phases(s, os.path.join(self.tmp, "fig6_empty.png"))
        self.assertGreater(os.path.getsize(p), 5000)

    def test_ranks_figure(self):
        comms, summaries = [], []
        for rank in (0, 1, 2):
            ex = load_export(
                rank_export(rank).write(os.path.join(self.tmp, "run.rank%d.sqlite" % rank))
            )
            comms.append(rank_comm(rank, ex))
            summaries.append(compute_summary(ex))
        p = plot_ranks(compute_ranks(comms, summaries), os.path.join(self.tmp, "fig_ranks.png"))
        self.assertGreater(os.path.getsize(p), 10000)
        # No step captured by every rank: the panels say so.
        empty = [c._replace(steps=0, nccl_count=[], nccl_ns=[], data_load_end_ns=[]) for c in comms]
        p = plot_ranks(compute_ranks(empty, summaries), os.path.join(self.tmp, "fig_empty.png"))
        self.assertGreater(os.path.getsize(p), 5000)


if __name__ == "__main__":
    unittest.main()
