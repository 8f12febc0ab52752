"""Tests for scripts/nsys_analysis/bench/tables.py: benchmarks.py's tables from hand-made JSON files
and from the checked-in results in docs/benchmarks/.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/bench/test_tables.py
"""

import json
import os
import unittest

from scripts.support.testutil import REPO, ScratchCase

from nsys_analysis.bench.tables import graph_gains, paired_ratios, render_tables


def run_row(name, ips, host_ms=None, window=1000.0):
    return {
        "name": name,
        "images_per_s": ips,
        "no_activity_pct": 2.0,
        "capture_window_ms": window,
        "batch_wait_total_ms": 1.0,
        "h2d_submit_total_ms": 2.0,
        "idle_host_ms": host_ms,
    }


class CompareTableTest(ScratchCase):
    tmp_prefix = "bench_tables_test_"

    def test_paired_ratios_match_rounds_by_suffix(self):
        compare = {
            "runs": [
                run_row("synthetic", 3000),
                run_row("loader", 3000),
                run_row("python", 2000),
                run_row("loader_2", 2900),
                run_row("python_2", 1450),
                run_row("loader_3", 3000),
            ]
        }
        self.assertEqual(paired_ratios(compare), [1.5, 2.0])  # round 3 has no python run

    def test_table_prints_paired_median_and_host_bound_share(self):
        compare = {
            "steps": 64,
            "nvtx": {"on": [], "off": []},
            "teardown": [],
            "runs": [
                run_row("synthetic", 3000, 0.0),
                run_row("loader", 3000, 0.5),
                run_row("python", 2000, 300.0),
                run_row("loader_2", 2900, 0.5),
                run_row("python_2", 1450, 400.0),
            ],
        }
        with open(os.path.join(self.tmp, "compare.json"), "w") as f:
            json.dump(compare, f)
        text = render_tables(self.tmp)
        self.assertIn("paired rounds, (2)/(3): 1.50x, 2.00x; median 1.75x", text)
        self.assertIn(
            "| python | 2000.0 | 66.7% | 1.16x | 2.0% | 30.0% |", text
        )  # median of 2000, 1450
        self.assertTrue(
            text.endswith(
                "\n\nPython reference, 2 captures: 2000.0, 1450.0 images/s (median 1725.0)\n\n"
            )
        )

    def test_no_results_no_tables(self):
        self.assertEqual(render_tables(self.tmp), "")


class ExperimentsTableTest(ScratchCase):
    tmp_prefix = "bench_tables_test_"

    def test_graph_gains_pair_each_round(self):
        runs = [
            {"name": n, "flags": "", "images_per_s": v, "batch_wait_total_ms": 0.0}
            for n, v in (
                ("fp32_synthetic_0", 3000.0),
                ("fp32_graph_0", 3030.0),
                ("bf16_synthetic_0", 4000.0),
                ("bf16_graph_0", 4200.0),
                ("fp32_synthetic_1", 3000.0),
                ("fp32_graph_1", 3060.0),
                ("bf16_synthetic_1", 4000.0),
                ("bf16_graph_1", None),
                ("bf16_loader_w8", 4100.0),
                ("fp32_graphnodes_0", 3015.0),
                ("fp32_graphnodes_1", 3030.0),
            )
        ]
        exp = {"steps": 48, "runs": runs, "transfers": [], "sync": None, "trace": None}
        gains = graph_gains(exp)
        self.assertEqual(list(gains), ["fp32", "bf16"])
        self.assertEqual([round(g, 4) for g in gains["fp32"]], [1.01, 1.02])
        self.assertEqual([round(g, 4) for g in gains["bf16"]], [1.05])  # round 1 failed: no pair
        # The graph with its memset nodes as captured, paired with the same eager runs.
        nodes = graph_gains(exp, "graphnodes")
        self.assertEqual(list(nodes), ["fp32"])
        self.assertEqual([round(g, 4) for g in nodes["fp32"]], [1.005, 1.01])
        with open(os.path.join(self.tmp, "experiments.json"), "w") as f:
            json.dump(exp, f)
        text = render_tables(self.tmp)
        self.assertIn(
            "CUDA graph over eager, fp32 ceiling (paired runs): +1.00%, +2.00%; median +1.50%", text
        )
        self.assertIn(
            "CUDA graph over eager, bf16 ceiling (paired runs): +5.00%; median +5.00%", text
        )
        self.assertIn(
            "CUDA graph with its memset nodes over eager, fp32 ceiling (paired runs): +0.50%, "
            "+1.00%; median +0.75%",
            text,
        )


class CheckedInResultsTest(unittest.TestCase):
    def test_a_table_for_each_command(self):
        text = render_tables(os.path.join(REPO, "docs", "benchmarks"))
        for header in (
            "| capture | torch_step in window |",
            "| run (under nsys, ",
            "| loader_bench threads |",
            "| host dtype (nsys) |",
            "| kernel kind (ncu, ",
            "| setting | images/s | of synthetic (",
        ):
            self.assertEqual(sum(line.startswith(header) for line in text.splitlines()), 1, header)
        self.assertIn("\npaired rounds, (2)/(3): ", text)


if __name__ == "__main__":
    unittest.main()
