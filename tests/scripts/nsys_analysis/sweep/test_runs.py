"""Tests for scripts/nsys_analysis/sweep/runs.py: the report checks, one run's outcome (with a
stand-in for train_resnet50) and the result.json form that --resume reads back.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/sweep/test_runs.py
(all tests: scripts/dev/python_tests.sh)
"""

import json
import os
import unittest

from scripts.support.testutil import ScratchCase

from nsys_analysis.capture.report import report_metrics
from nsys_analysis.sweep.plan import PlannedRun, variant
from nsys_analysis.sweep.runs import Attempt, RunOutcome, SweepSettings, execute_run, report_checks

# Writes a report of --steps steps (one fewer with --workers 7), or none at all with --workers 9.
FAKE_BINARY = r"""
import json, sys
argv = sys.argv[1:]
opt = lambda name: argv[argv.index(name) + 1]
steps, workers = int(opt("--steps")), int(opt("--workers"))
if workers != 9:
    n = steps - 1 if workers == 7 else steps
    json.dump({"capture": {"steps": n, "images_per_s": 500.0},
               "steps": [{"index": i, "batch_wait_ms": 1.0 + i, "h2d_submit_ms": 0.5}
                         for i in range(n)]},
              open(opt("--report"), "w"))
"""


def report(steps, records, interrupted=False, ips=100.0):
    return report_metrics(
        {
            "capture": {"steps": steps, "images_per_s": ips},
            "steps": [{"index": i, "batch_wait_ms": 1.0} for i in range(records)],
            "interrupted": interrupted,
        }
    )


class ReportChecksTest(unittest.TestCase):
    def test_step_count_interruption_and_throughput(self):
        checks, details = report_checks(report(3, 3), 3)
        self.assertEqual(
            dict(checks),
            {"report_step_count": True, "report_not_interrupted": True, "report_throughput": True},
        )
        self.assertEqual(
            details["report_step_count"], "report capture.steps 3, 3 step records, expected 3"
        )
        checks, details = report_checks(report(3, 2, interrupted=True, ips=float("nan")), 3)
        self.assertEqual(list(checks.values()), [False, False, False])
        self.assertEqual(details["report_not_interrupted"], "interrupted: true")
        self.assertEqual(details["report_throughput"], "images_per_s None")


class ExecuteRunTest(ScratchCase):
    tmp_prefix = "sweep_runs_test_"

    def setUp(self):
        super().setUp()
        self.settings = SweepSettings(
            out=os.path.join(self.tmp, "out"),
            no_nsys=True,
            timeout=30,
            binary=self.fake("train", FAKE_BINARY),
        )

    def test_aggregated_run_and_its_metrics(self):
        r = execute_run(PlannedRun("a", 2026), variant(steps=2), 3, self.settings)
        self.assertEqual(
            (r.name, r.order, r.status, r.aggregated, r.reason), ("a_2026", 3, "ok", True, None)
        )
        self.assertEqual(r.command[0], self.settings.binary)
        self.assertEqual(
            [(at.attempt, at.status, at.exit_code) for at in r.attempts], [(1, "ok", 0)]
        )
        self.assertEqual(
            (
                r.metrics["images_per_s"],
                r.metrics["batch_wait_total_ms"],
                r.metrics["longest_wait_ms"],
                r.metrics["longest_wait_step"],
                r.metrics["source"],
            ),
            (500.0, 3.0, 2.0, 1, "run report"),
        )
        self.assertIsNone(r.metrics["no_activity_pct"])

    def test_failed_check_and_missing_report_are_not_aggregated(self):
        r = execute_run(PlannedRun("short", 2026), variant(steps=2, workers=7), 1, self.settings)
        self.assertEqual(
            (r.status, r.aggregated, r.checks["report_step_count"]), ("ok", False, False)
        )
        self.assertTrue(
            r.reason.startswith("checks failed: report_step_count (report capture.steps 1"),
            r.reason,
        )
        r = execute_run(PlannedRun("silent", 2026), variant(steps=2, workers=9), 2, self.settings)
        self.assertEqual((r.status, r.aggregated, r.metrics, r.checks), ("ok", False, {}, {}))
        self.assertIn("unusable run report: no such report", r.reason)


class RunOutcomeTest(unittest.TestCase):
    def test_json_round_trip_keeps_the_keys_and_their_order(self):
        r = RunOutcome(
            "a",
            2026,
            4,
            "/o/runs/a_2026",
            ["train", "--seed", "2026"],
            8,
            [
                Attempt(1, "timeout", None, 2.01, "/o/attempt1.log"),
                Attempt(2, "ok", 0, 1.5, "/o/attempt2.log"),
            ],
            "ok",
            True,
            None,
            {"step_count": True},
            {"step_count": "8 of 8"},
            {"images_per_s": 10.0},
        )
        doc = json.loads(json.dumps(r.to_json()))
        self.assertEqual(
            list(doc),
            [
                "config",
                "seed",
                "order",
                "run_dir",
                "command",
                "expected_steps",
                "attempts",
                "status",
                "aggregated",
                "reason",
                "checks",
                "check_details",
                "metrics",
                "untraced",
            ],
        )
        self.assertEqual(
            doc["attempts"][0],
            {
                "attempt": 1,
                "status": "timeout",
                "exit_code": None,
                "seconds": 2.01,
                "log": "/o/attempt1.log",
            },
        )
        self.assertEqual(RunOutcome.from_json(doc), r)
        self.assertEqual(r.timeouts, 1)


if __name__ == "__main__":
    unittest.main()
