"""Tests for scripts/nsys_analysis/sweep/tables.py: the per-configuration rows (per-seed values,
means of the aggregated runs, notes), sweep.md, runs.csv and the CSV form, on hand-made run
outcomes.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/sweep/test_tables.py
"""

import csv
import os
import shutil
import tempfile
import unittest
from collections import OrderedDict

from nsys_analysis.sweep.plan import variant
from nsys_analysis.sweep.runs import Attempt, RunOutcome, SweepSettings
from nsys_analysis.sweep.tables import aggregate, render_markdown, run_rows, write_csv

CONFIGS = OrderedDict(
    [("base", variant()), ("no_pin", variant(pin_memory=False)), ("unused", variant(workers=2))]
)


def outcome(config, seed, order, ips=None, wait=None, longest=None, timeouts=0, reason=None):
    attempts = [Attempt(i + 1, "timeout", None, 2.0, "log") for i in range(timeouts)]
    attempts.append(Attempt(len(attempts) + 1, "ok", 0, 1.25, "log"))
    metrics = (
        {}
        if ips is None
        else {
            "images_per_s": ips,
            "no_activity_pct": None,
            "batch_wait_total_ms": wait,
            "h2d_submit_total_ms": 1.0,
            "longest_wait_ms": longest,
            "longest_wait_step": None if longest is None else 3,
        }
    )
    return RunOutcome(
        config,
        seed,
        order,
        "runs/%s_%d" % (config, seed),
        ["train"],
        64,
        attempts,
        "ok",
        reason is None,
        reason,
        {},
        {},
        metrics,
    )


class SweepTablesTest(unittest.TestCase):
    def setUp(self):
        self.results = [
            outcome("no_pin", 2027, 1, 900, 5.0, 2.5),
            outcome("base", 2026, 2, 1000, 2.0, 1.5),
            outcome("no_pin", 2026, 3, 800, 3.0, timeouts=1),
            outcome("base", 2027, 4, 1100, 4.0, 2.0, reason="checks failed: step_count (7 of 8)"),
        ]
        self.settings = SweepSettings(
            out="out",
            binary="train",
            seeds=(2026, 2027),
            no_nsys=True,
            timeout=60,
            extra=["--device", "cpu"],
        )

    def test_rows_hold_each_seed_and_the_mean_of_aggregated_runs(self):
        rows = aggregate(CONFIGS, (2026, 2027), self.results)
        self.assertEqual([r["config"] for r in rows], ["base", "no_pin"])  # unused never ran
        base, no_pin = rows
        self.assertEqual((base["changes"], no_pin["changes"]), ("baseline", "pin_memory=false"))
        self.assertEqual(
            (base["runs_aggregated"], base["runs_excluded"], base["retried"]), (1, 1, 0)
        )
        self.assertEqual(
            (base["images_per_s_2026"], base["images_per_s_2027"], base["images_per_s_mean"]),
            (1000, None, 1000.0),
        )
        self.assertEqual((no_pin["batch_wait_total_ms_mean"], no_pin["retried"]), (4.0, 1))
        self.assertIsNone(no_pin["no_activity_pct_mean"])
        self.assertNotIn("longest_wait_ms_mean", no_pin)
        self.assertEqual(base["notes"], "seed 2027 excluded: checks failed: step_count (7 of 8)")
        self.assertEqual(no_pin["notes"], "seed 2026: timed out once, retry succeeded")

    def test_markdown(self):
        md = render_markdown(
            aggregate(CONFIGS, (2026, 2027), self.results), self.results, self.settings
        )
        self.assertIn(
            "4 runs (2 configurations x seeds 2026, 2027) in a shuffled order (order seed 1), run "
            "reports only (--no-nsys); per-run time limit 60 s with one retry.",
            md,
        )
        self.assertIn(
            "Arguments added to every run (they override the configurations' flags): "
            "`--device cpu`.",
            md,
        )
        self.assertIn(
            "| no_pin | pin_memory=false | 800.0 / 900.0 (mean 850.0) | – (no capture) | "
            "3.0 / 5.0 (mean 4.0) | 1.0 / 1.0 (mean 1.0) | – / 2.5 @ 3 |",
            md,
        )
        self.assertIn("| 3 | no_pin_2026 | ok | timeout 2.0s, ok 1.2s | yes | 800.0 |  |", md)
        self.assertIn(
            "| 4 | base_2027 | ok | ok 1.2s | NO | 1100.0 | checks failed: step_count (7 of 8) |",
            md,
        )
        self.assertTrue(
            md.endswith(
                "## Excluded runs\n\n- base seed 2027: checks failed: step_count (7 of 8)\n"
            )
        )

    def test_untraced_columns_and_tracer_bound_runs(self):
        results = [outcome("base", 2026, 1, 500), outcome("base", 2027, 2, 900)]
        for r, untraced, bound in zip(results, (1000.0, 950.0), (True, False)):
            r.metrics.update(
                untraced_images_per_s=untraced,
                traced_over_untraced=round(r.metrics["images_per_s"] / untraced, 6),
                tracer_bound=bound,
            )
        rows = aggregate(CONFIGS, (2026, 2027), results)
        row = rows[0]
        self.assertEqual(
            (
                row["untraced_images_per_s_2026"],
                row["untraced_images_per_s_mean"],
                row["traced_over_untraced_2027"],
                row["tracer_bound_2026"],
                row["tracer_bound_2027"],
                row["tracer_bound_runs"],
            ),
            (1000.0, 975.0, 0.947368, True, False, 1),
        )
        self.assertEqual(
            row["notes"],
            "seed 2026: tracer-bound (traced 0.50x untraced), read the untraced images/s",
        )
        settings = SweepSettings(out="out", binary="train", seeds=(2026, 2027), timeout=60)
        md = render_markdown(rows, results, settings)
        self.assertIn(
            "| 1000.0 / 950.0 (mean 975.0) | 0.500 / 0.947 (mean 0.724) | yes / no (1 of 2) |", md
        )
        self.assertIn("Each capture is followed by an untraced run of the same command", md)
        self.assertEqual(
            [(r["untraced_images_per_s"], r["tracer_bound"]) for r in run_rows(results)],
            [(1000.0, True), (950.0, False)],
        )
        # --no-nsys: every run is untraced already, and --no-untraced has none: no such columns'
        # values.
        for other in (
            SweepSettings(out="out", binary="train", no_nsys=True),
            SweepSettings(out="out", binary="train", untraced=False),
        ):
            md = render_markdown(rows, results, other)
            self.assertIn("| – | – | – |", md)
            self.assertNotIn("Each capture is followed by an untraced run", md)

    def test_runs_csv(self):
        tmp = tempfile.mkdtemp(prefix="sweep_tables_test_")
        self.addCleanup(shutil.rmtree, tmp, True)
        path = os.path.join(tmp, "runs.csv")
        write_csv(path, run_rows(self.results))
        with open(path, newline="") as f:
            rows = list(csv.DictReader(f))
        self.assertEqual([r["order"] for r in rows], ["1", "2", "3", "4"])
        self.assertEqual(
            (
                rows[2]["attempts"],
                rows[2]["timeouts"],
                rows[2]["seconds"],
                rows[2]["longest_wait_ms"],
            ),
            ("2", "1", "3.25", ""),
        )
        self.assertEqual(
            (rows[3]["aggregated"], rows[3]["reason"]),
            ("False", "checks failed: step_count (7 of 8)"),
        )
        write_csv(path, [])
        self.assertEqual(os.path.getsize(path), 0)


if __name__ == "__main__":
    unittest.main()
