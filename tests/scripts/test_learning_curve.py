"""Tests for scripts/learning_curve.py: the tables and the figure of one and of two --epochs
reports, a resumed run's epochs marked, and the inputs it refuses.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_learning_curve.py
(all tests: scripts/dev/python_tests.sh)
"""

import contextlib
import io
import json
import os
import unittest

from scripts.support.nsys_exports import TempDirCase
import learning_curve


def _epoch(i, loss, top1, elapsed, resumed=False, evaluated=True):
    # The keys lib/report/report.cpp's epoch_json writes.
    e = {
        "epoch": i,
        "steps": 9,
        "train_loss": loss,
        "train_s": 2.0,
        "images_per_s": 36.0,
        "epoch_s": 2.5,
        "elapsed_s": elapsed,
        "lr": 0.01,
        "eval": {
            "images": 24,
            "top1": top1,
            "top5": 1.0,
            "loss": loss + 0.5,
            "ms": 100.0,
            "steps": 3,
        }
        if evaluated
        else None,
        "checkpoint": None,
    }
    if resumed:
        e["resumed"] = True
    return e


def _report(epochs, target=None, reached=False):
    return {
        "program": "train_resnet50",
        "config": {"epochs": len(epochs)},
        "training": {
            "epochs_planned": len(epochs),
            "resumed_from": None,
            "best_top1": None,
            "target_top1": target,
            "target_reached": reached,
            "epochs": epochs,
        },
    }


class LearningCurveTest(TempDirCase):
    def write(self, name, obj):
        path = os.path.join(self.tmp, name)
        with open(path, "w") as f:
            f.write(obj if isinstance(obj, str) else json.dumps(obj))
        return path

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = learning_curve.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def test_tables_best_top1_and_the_figure_of_two_runs(self):
        a = self.write(
            "default.json",
            _report(
                [
                    _epoch(0, 1.2, 0.3333, 2.5, resumed=True),
                    _epoch(1, 0.9, 0.75, 5.0),
                    _epoch(2, 0.5, 0.6667, 7.5),
                ],
                target=0.7,
                reached=True,
            ),
        )
        b = self.write(
            "constant.json",
            _report([_epoch(0, 1.1, 0.3333, 3.0, evaluated=False), _epoch(1, 1.1, 0.3333, 6.0)]),
        )
        fig = os.path.join(self.tmp, "curve.png")
        md = os.path.join(self.tmp, "curve.md")
        rc, out, err = self.run_main(a, b, "--out", fig, "--table", md)
        self.assertEqual(rc, 0, err)
        self.assertIn("### default", out)
        self.assertIn("### constant", out)
        self.assertIn("| 1 (resumed) | 1.2000 | 1.7000 | 33.33 | 100.00 | 36.0 | 2.5 |", out)
        self.assertIn("| 1 | 1.1000 | - | - | - | 36.0 | 3.0 |", out)  # an epoch not evaluated
        self.assertIn("Best top-1 75.00% after epoch 2, at 5.0 s.", out)
        self.assertIn("Target top-1 70.00%: reached.", out)
        with open(md) as f:
            self.assertIn("### default", f.read())
        with open(fig, "rb") as f:
            self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n")

    def test_no_figures_prints_the_tables_only(self):
        a = self.write("r.json", _report([_epoch(0, 1.0, 0.5, 1.0)]))
        rc, out, _ = self.run_main(a, "--no-figures", "--out", os.path.join(self.tmp, "never.png"))
        self.assertEqual(rc, 0)
        self.assertIn("### r", out)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "never.png")))

    def test_refused_inputs_are_usage_errors_naming_the_file(self):
        steps_run = self.write("steps.json", {"program": "train_resnet50", "steps": []})
        cases = [
            (os.path.join(self.tmp, "missing.json"), "no such file"),
            (self.write("bad.json", "{not json"), "not JSON"),
            (
                self.write("other.json", {"program": "seed_workload"}),
                "not a train_resnet50 or reference_epochs.py report",
            ),
            (steps_run, "no training.epochs"),
            (self.write("empty.json", _report([])), "training.epochs is empty"),
            (
                self.write("noloss.json", _report([{"epoch": 0}])),
                'training.epochs[0] ("epoch": 0) lacks a number for train_loss',
            ),
            (
                self.write(
                    "badeval.json", _report([dict(_epoch(0, 1.0, 0.5, 1.0), eval={"top1": "x"})])
                ),
                'training.epochs[0] ("epoch": 0): eval lacks a number for top1',
            ),
        ]
        for path, why in cases:
            rc, _, err = self.run_main(path, "--no-figures")
            self.assertEqual(rc, 2, path)
            self.assertIn(why, err, path)
            self.assertIn(os.path.basename(path), err)
        good = self.write("good.json", _report([_epoch(0, 1.0, 0.5, 1.0)]))
        rc, _, err = self.run_main(good, "--names", "a", "b", "--no-figures")
        self.assertEqual(rc, 2)
        self.assertIn("--names: expected 1 names", err)
        rc, _, err = self.run_main(good, "--out", self.tmp)  # a directory
        self.assertEqual(rc, 2)
        self.assertIn("--out", err)

    def test_an_fp16_run_shows_its_loss_scale_and_names_its_skipped_steps(self):
        # The fields train_resnet50's fp16 epochs and reference_epochs.py --precision fp16 write.
        fp16 = [
            dict(
                _epoch(0, 1.2, 0.25, 2.5), loss_scale=8192.0, skipped_steps=3, skipped_at=[0, 1, 3]
            ),
            dict(
                _epoch(1, 1.0, 0.5, 5.0), loss_scale=8192.0, skipped_steps=3, skipped_at=[0, 1, 3]
            ),
        ]
        rc, out, err = self.run_main(self.write("fp16.json", _report(fp16)), "--no-figures")
        self.assertEqual(rc, 0, err)
        self.assertIn("| loss scale | skipped |", out)
        self.assertIn("| 8192 | 3 |", out)
        self.assertIn("Loss scaling (fp16): 3 steps skipped: steps 0, 1 and 3 (0-based).", out)
        # A count the list does not cover (epochs resumed from an older checkpoint) names none.
        short = [dict(fp16[1], skipped_at=[3])]
        rc, out, _ = self.run_main(self.write("short.json", _report(short)), "--no-figures")
        self.assertIn("Loss scaling (fp16): 3 steps skipped.", out)
        # Other precisions: no columns, no line.
        rc, out, _ = self.run_main(
            self.write("bf16.json", _report([_epoch(0, 1.0, 0.5, 1.0)])), "--no-figures"
        )
        self.assertNotIn("loss scale", out)
        self.assertNotIn("Loss scaling", out)
        bad = self.write("bad.json", _report([dict(fp16[0], skipped_at="0, 1")]))
        rc, _, err = self.run_main(bad, "--no-figures")
        self.assertEqual(rc, 2)
        self.assertIn(
            'bad.json: training.epochs[0] ("epoch": 0) has loss_scale, but skipped_at', err
        )

    def test_a_run_that_went_on_after_a_non_finite_loss_is_drawn_and_said(self):
        # --allow-nonfinite-loss: the report writes NaN as null and names the first such loss.
        doc = _report(
            [_epoch(0, 1.2, 0.3333, 2.5), dict(_epoch(1, 1.0, 0.3333, 5.0), train_loss=None)]
        )
        doc["training"]["epochs"][1]["eval"]["loss"] = None
        doc["nonfinite_loss"] = "step 12 (epoch 1): loss nan"
        path = self.write("nan.json", doc)
        fig = os.path.join(self.tmp, "nan.png")
        rc, out, err = self.run_main(path, "--out", fig)
        self.assertEqual(rc, 0, err)
        self.assertIn("| 2 | nan | nan | 33.33 |", out)
        self.assertIn("A loss was not finite at step 12 (epoch 1): loss nan", out)
        self.assertTrue(os.path.exists(fig))

    def test_target_top1_must_be_a_fraction_or_null(self):
        epochs = [_epoch(0, 1.0, 0.5, 1.0)]
        for name, target in (
            ("str.json", "0.7"),
            ("list.json", [1]),
            ("pct.json", 70),
            ("neg.json", -0.1),
            ("bool.json", True),
        ):
            with self.subTest(target=target):
                rc, out, err = self.run_main(
                    self.write(name, _report(epochs, target)), "--no-figures"
                )
                self.assertEqual((rc, out), (2, ""))
                self.assertIn(
                    "%s: training.target_top1 is %s, expected a fraction in [0, 1] or null"
                    % (name, json.dumps(target)),
                    err,
                )
        for target in (None, 0.0, 1):
            doc = _report(epochs, target)
            if target is None:
                del doc["training"]["target_top1"]
            rc, _, err = self.run_main(self.write("ok.json", doc), "--no-figures")
            self.assertEqual(rc, 0, err)

    def test_a_diverged_reference_run_with_nan_losses_is_read(self):
        # reference_epochs.py writes its report with json.dumps: a diverged run's losses are NaN
        # (Infinity likewise), shown as the null of train_resnet50's report is.
        doc = _report([_epoch(0, 1.2, 0.3333, 2.5), _epoch(1, float("nan"), 0.01, 5.0)])
        doc["program"] = "reference_epochs"
        doc["training"]["epochs"][1]["eval"]["loss"] = float("inf")
        path = self.write("diverged.json", json.dumps(doc))
        self.assertIn('"train_loss": NaN', open(path).read())
        fig = os.path.join(self.tmp, "diverged.png")
        rc, out, err = self.run_main(path, "--out", fig)
        self.assertEqual(rc, 0, err)
        self.assertIn("| 2 | nan | nan | 1.00 |", out)
        self.assertTrue(os.path.exists(fig))

    def test_values_out_of_range_are_refused_naming_the_file_key_and_epoch(self):
        def fp16(e, **kw):
            return dict(dict(e, loss_scale=8192.0, skipped_steps=1, skipped_at=[0]), **kw)

        e0, e1 = _epoch(0, 1.2, 0.25, 2.5), _epoch(1, 1.0, 0.5, 5.0)
        at0, at1 = 'training.epochs[0] ("epoch": 0)', 'training.epochs[1] ("epoch": 1)'
        cases = [
            (
                [e0, _epoch(1, 1.0, 50.22, 5.0)],
                at1 + ": eval.top1 is 50.22, expected a fraction in [0, 1]",
            ),
            (
                [e0, dict(e1, eval=dict(e1["eval"], top5=-0.5))],
                at1 + ": eval.top5 is -0.5, expected a fraction in [0, 1]",
            ),
            (
                [dict(e0, epoch=-1)],
                "training.epochs[0]: epoch is -1, expected a count of epochs (0 or more)",
            ),
            (
                [dict(e0, epoch=0.5)],
                "training.epochs[0]: epoch is 0.5, expected a count of epochs (0 or more)",
            ),
            (
                [e0, e1, dict(e1, elapsed_s=7.5)],
                "training.epochs[2]: epoch 1 again (training.epochs[1] has it",
            ),
            (
                [fp16(e0, skipped_steps=-1)],
                at0 + " has loss_scale, but skipped_steps is -1, expected a count of steps",
            ),
            (
                [fp16(e0, skipped_steps=True)],
                at0 + " has loss_scale, but skipped_steps is true, expected a count of steps",
            ),
            (
                [fp16(e0, skipped_at=[-3])],
                at0 + " has loss_scale, but skipped_at is [-3], expected a list of steps",
            ),
            (
                [dict(e0, elapsed_s=-2.5)],
                at0 + ": elapsed_s is -2.5, expected a number, 0 or more",
            ),
        ]
        for i, (epochs, why) in enumerate(cases):
            with self.subTest(why=why):
                path = self.write("range%d.json" % i, _report(epochs))
                rc, out, err = self.run_main(path, "--no-figures")
                self.assertEqual((rc, out), (2, ""))
                self.assertIn("range%d.json: %s" % (i, why), err)

    def test_json_nested_too_deeply_is_not_json_it_can_read(self):
        deep = self.write("deep.json", "[" * 100000 + "]" * 100000)
        rc, out, err = self.run_main(deep, "--no-figures")
        self.assertEqual((rc, out), (2, ""))
        self.assertIn("deep.json: not JSON it can read (nested too deeply)", err)

    def test_no_output_is_written_over_an_input_and_out_is_a_figure(self):
        report = self.write("r.json", _report([_epoch(0, 1.0, 0.5, 1.0)]))
        with open(report) as f:
            before = f.read()
        png = os.path.join(self.tmp, "c.png")
        cases = [
            (
                ("--no-figures", "--table", report),
                "--table %s: is the report %s" % (report, report),
            ),
            (("--out", report), "--out %s: expected a figure file" % report),
            (("--out", os.path.join(self.tmp, "curve.txt")), "got '.txt'"),
            (("--out", png, "--table", png), "--table %s: is --out's file too" % png),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                rc, out, err = self.run_main(report, *args)
                self.assertEqual(rc, 2, err)
                self.assertIn(message, err)
                self.assertEqual(out, "", "refused before anything is printed")
        with open(report) as f:
            self.assertEqual(f.read(), before)
        self.assertFalse(os.path.exists(png))


if __name__ == "__main__":
    unittest.main()
