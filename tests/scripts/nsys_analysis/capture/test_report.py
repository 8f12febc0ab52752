"""Tests for scripts/nsys_analysis/capture/report.py: train_resnet50's report, seed_workload.py's
line in a log, and a file with neither.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_report.py
"""

import json
import os
import unittest

from scripts.support.nsys_exports import TempDirCase, basic_export
from nsys_analysis.capture.export import AnalysisError
from nsys_analysis.capture.report import (
    FROM_NOTHING,
    FROM_PHASE_MS,
    FROM_STEP_FIELDS,
    _read_stream,
    check_untraced,
    last_json_object,
    load_report,
    report_metrics,
    step_phase_ms,
)


class ReportTest(TempDirCase):
    def test_last_json_object(self):
        self.assertEqual(
            last_json_object(["noise", '{"a": 1}', "{not json", "[1]", "done"]), {"a": 1}
        )
        self.assertIsNone(last_json_object(["noise", "[1]"]))

    def test_cpp_report(self):
        path = os.path.join(self.tmp, "run.json")
        with open(path, "w") as f:
            json.dump(
                {
                    "config": {"steps": 2},
                    "capture": {
                        "warmup_steps": 3,
                        "steps": 2,
                        "images_per_s": 100.5,
                        "elapsed_s": 2.5,
                    },
                    "steps": [
                        {"index": 0, "batch_wait_ms": 1.0, "h2d_submit_ms": 0.25},
                        {"index": 1, "batch_wait_ms": 3.0, "h2d_submit_ms": 0.5},
                    ],
                    "interrupted": False,
                },
                f,
            )
        m = report_metrics(load_report(path))
        self.assertEqual(
            (m["format"], m["images_per_s"], m["steps"], m["step_records"]),
            ("train_resnet50", 100.5, 2, 2),
        )
        self.assertEqual(
            (
                m["batch_wait_total_ms"],
                m["batch_wait_max_ms"],
                m["batch_wait_max_step"],
                m["h2d_submit_total_ms"],
            ),
            (4.0, 3.0, 1, 0.75),
        )

    def test_python_report_line_in_a_log(self):
        path = os.path.join(self.tmp, "py.log")
        with open(path, "w") as f:
            f.write("Collecting data...\n{not json}\n")
            f.write(
                '{"workers": 8, "steps": 8, "images_per_s": 4236.5, "batch_wait_s": 0.0394, '
                '"max_wait_ms": 3.7, "h2d_submit_s": 0.0303}\n'
            )
            f.write("Generating '/tmp/nsys-report.qdstrm'\n")
        m = report_metrics(load_report(path))
        self.assertEqual(
            (m["format"], m["images_per_s"], m["steps"], m["batch_wait_max_ms"]),
            ("seed_workload", 4236.5, 8, 3.7),
        )
        self.assertAlmostEqual(m["batch_wait_total_ms"], 39.4, places=9)
        s = self.summarize(basic_export(), report=load_report(path))
        self.assertEqual(s["images_per_s"], 4236.5)
        self.assertEqual(s["expected_steps"], 8)

    def test_step_phase_ms(self):
        report = {
            "capture": {"steps": 2, "batch_size": 32},
            "steps": [
                {
                    "step_ms": 9.0,
                    "batch_wait_ms": 1.0,
                    "h2d_submit_ms": 0.5,
                    "phase_ms": {"data_load": 2.0, "batch_wait": 1.25, "forward": 3.0},
                },
                {
                    "step_ms": 8.0,
                    "batch_wait_ms": 2.0,
                    "h2d_submit_ms": 0.25,
                    "phase_ms": {"data_load": 2.5, "forward": float("nan")},
                },
            ],
        }
        per, source = step_phase_ms(report)
        self.assertEqual(source, FROM_PHASE_MS)
        # phase_ms first, then the step's own fields where phase_ms lacks them; a NaN is no time.
        self.assertEqual(
            dict(per),
            {
                "data_load": [2.0, 2.5],
                "batch_wait": [1.25, 2.0],
                "forward": [3.0],
                "torch_step": [9.0, 8.0],
                "h2d_submit": [0.5, 0.25],
            },
        )
        self.assertEqual(report_metrics(report)["batch_size"], 32)
        for st in report["steps"]:
            del st["phase_ms"]
        per, source = step_phase_ms(report)
        self.assertEqual(
            (source, list(per)), (FROM_STEP_FIELDS, ["torch_step", "batch_wait", "h2d_submit"])
        )
        self.assertEqual(step_phase_ms({"images_per_s": 10.0, "steps": 8}), ({}, FROM_NOTHING))
        self.assertEqual(step_phase_ms(None), ({}, FROM_NOTHING))

    def test_bad_report(self):
        path = os.path.join(self.tmp, "bad.json")
        with open(path, "w") as f:
            f.write("no json here\n")
        with self.assertRaises(AnalysisError):
            load_report(path)


class UntracedTest(TempDirCase):
    """check_untraced(): only a complete run of the capture's command is a baseline."""

    RUN = {
        "program": "train_resnet50",
        "interrupted": False,
        "config": {
            "device": "cuda",
            "batch_size": 128,
            "precision": "bf16",
            "mode": "train",
            "cuda_graph": False,
            "report": "run.json",
            "checkpoint_dir": "c",
            "resume": True,
        },
    }

    def untraced(self, **changes):
        doc = json.loads(json.dumps(self.RUN))
        config = changes.pop("config", {})
        doc.update(changes)
        doc["config"].update(config)
        return doc

    def test_the_same_command_with_its_own_outputs_passes(self):
        check_untraced(
            self.RUN,
            [
                (
                    "u.json",
                    self.untraced(
                        config={"report": "u.json", "checkpoint_dir": "/tmp/x", "resume": False}
                    ),
                )
            ],
        )
        check_untraced(
            None, [("u.json", self.untraced(config={"batch_size": 64}))]
        )  # nothing to compare

    def test_another_configuration_is_named(self):
        for key, value in (
            ("device", "cpu"),
            ("batch_size", 64),
            ("precision", "fp32"),
            ("mode", "forward"),
            ("cuda_graph", True),
        ):
            with self.subTest(key=key):
                with self.assertRaises(AnalysisError) as e:
                    check_untraced(self.RUN, [("u.json", self.untraced(config={key: value}))])
                self.assertIn(
                    "--untraced u.json: config.%s is %s, the capture's %s"
                    % (key, json.dumps(value), json.dumps(self.RUN["config"][key])),
                    str(e.exception),
                )
        with self.assertRaises(AnalysisError) as e:
            check_untraced(self.RUN, [("u.json", self.untraced(program="seed_workload"))])
        self.assertIn("a report of seed_workload", str(e.exception))

    def test_an_incomplete_run_is_no_baseline(self):
        with self.assertRaises(AnalysisError) as e:
            check_untraced(
                None, [("u.json", self.untraced(interrupted=True, interrupt_signal="SIGINT"))]
            )
        self.assertIn("--untraced u.json: the run was interrupted (SIGINT)", str(e.exception))
        with self.assertRaises(AnalysisError) as e:
            check_untraced(
                self.RUN,
                [
                    (
                        "u.json",
                        self.untraced(nonfinite_stopped=True, nonfinite_loss="step 3: loss nan"),
                    )
                ],
            )
        self.assertIn("non-finite loss (step 3: loss nan)", str(e.exception))

    def test_a_file_larger_than_any_report_is_refused_unread(self):
        huge = os.path.join(self.tmp, "huge.json")
        with open(huge, "wb") as f:
            f.truncate(1 << 30)  # sparse: a GiB of nothing
        with self.assertRaises(AnalysisError) as e:
            load_report(huge)
        self.assertIn(
            "report %s: 1073741824 bytes, more than the 268435456 a run report holds" % huge,
            str(e.exception),
        )

    def test_a_stream_nobody_writes_ends_with_a_message(self):
        fifo = os.path.join(self.tmp, "fifo")
        os.mkfifo(fifo)
        with self.assertRaises(AnalysisError) as e:  # nobody has it open for writing
            _read_stream(fifo, seconds=0.3)
        self.assertIn("report %s: a stream that did not end within 0.3 s" % fifo, str(e.exception))
        writer = os.open(fifo, os.O_RDWR)  # a writer that never writes nor closes
        try:
            with self.assertRaises(AnalysisError):
                _read_stream(fifo, seconds=0.3)
        finally:
            os.close(writer)
        # A stream whose writer writes and closes: read whole.
        r, w = os.pipe()
        os.write(w, b'{"program": "train_resnet50"}')
        os.close(w)
        try:
            self.assertEqual(
                _read_stream("/proc/self/fd/%d" % r, seconds=5), '{"program": "train_resnet50"}'
            )
        finally:
            os.close(r)


if __name__ == "__main__":
    unittest.main()
