"""Tests for scripts/dev/same_behaviour.py, with stand-ins for the two train_resnet50 builds: two
builds that behave alike pass whatever their times; a changed loss, digest, exit status, report key
or printed line is named with its run, and so is a run that hangs; a bad --old or --data is a usage
error (exit 2).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_same_behaviour.py
"""

import os
import subprocess
import sys
import unittest

from scripts.support.testutil import REPO, ScratchCase

SCRIPT = os.path.join(REPO, "scripts", "dev", "same_behaviour.py")

# A train_resnet50 stand-in: writes a report of two warm-up and four captured steps, keeps a
# checkpoint where --checkpoint-dir says, prints a line with a time, and exits 1 for --lr 1e6 (the
# non-finite run). CHANGE is replaced to make a build that differs.
BUILD = r"""
import json, os, random, sys, time
args = sys.argv[1:]
value = lambda flag: args[args.index(flag) + 1] if flag in args else None
CHANGE = None
steps = [{"digest": "d%d" % i, "loss": 2.0 - 0.1 * i, "step_ms": random.random()} for i in range(6)]
report = {"program": "train_resnet50", "warmup": steps[:2], "steps": steps[2:],
          "loss_after_drain": 1.25, "capture": {"images_per_s": random.random() * 1000}}
if CHANGE == "loss":
    report["steps"][1]["loss"] = 1.7000001
if CHANGE == "key":
    report["capture"]["new_field"] = 1
if value("--checkpoint-dir"):
    os.makedirs(value("--checkpoint-dir"), exist_ok=True)
    open(os.path.join(value("--checkpoint-dir"), "checkpoint-e000001.ckpt"), "w").close()
with open(value("--report"), "w") as f:
    json.dump(report, f)
print("captured 4 steps in %.1f ms: %.1f images/s (report %s)"
      % (random.random() * 100, random.random() * 1000, value("--report")))
if CHANGE == "hang" and "--resume" in args:
    time.sleep(60)
if CHANGE == "printed":
    print("a line of its own")
status = 1 if value("--lr") == "1e6" else 0
sys.exit(status + (1 if CHANGE == "status" and status == 0 and "--resume" in args else 0))
"""


class SameBehaviourTest(ScratchCase):
    tmp_prefix = "same_behaviour_test_"

    def setUp(self):
        super().setUp()
        self.data = os.path.join(self.tmp, "food-101")
        for d in ("images", "meta"):
            os.makedirs(os.path.join(self.data, d))
        self.old = self.fake("old_train_resnet50", BUILD)

    def compare(self, change=None, *extra):
        new = self.fake(
            "new_train_resnet50", BUILD.replace("CHANGE = None", "CHANGE = %r" % change)
        )
        return subprocess.run(
            [sys.executable, SCRIPT, "--old", self.old, "--new", new, "--data", self.data]
            + list(extra),
            capture_output=True,
            text=True,
            timeout=60,
            stdin=subprocess.DEVNULL,
        )

    def test_builds_that_behave_alike_pass_whatever_their_times(self):
        r = self.compare(None, "--out", os.path.join(self.tmp, "runs"))
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("same behaviour", r.stdout)
        self.assertIn("steps                exit 0, 6 steps compared", r.stdout)
        self.assertIn("nan                  exit 1", r.stdout)
        # Both builds' reports are kept under --out.
        self.assertTrue(os.path.exists(os.path.join(self.tmp, "runs", "old", "epochs.json")))

    def test_a_changed_loss_is_named_with_its_run_and_step(self):
        r = self.compare("loss")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("DIFFERS: steps: steps step 1: loss 1.7 before, 1.7000001 after", r.stdout)
        self.assertIn("difference(s); runs in", r.stdout)

    def test_a_new_report_key_an_exit_status_and_a_printed_line_are_named(self):
        r = self.compare("key")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("report keys differ: ['/capture/new_field']", r.stdout)
        r = self.compare("status")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("DIFFERS: resume: exit status 0 before, 1 after", r.stdout)
        r = self.compare("printed")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("printed line 2 differs: None | 'a line of its own'", r.stdout)

    def test_a_run_that_hangs_is_killed_and_named(self):
        r = self.compare("hang", "--timeout", "2")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("DIFFERS: resume: exit status 0 before, timed out after 2 s after", r.stdout)

    def test_a_bad_binary_or_data_root_is_a_usage_error(self):
        r = subprocess.run(
            [sys.executable, SCRIPT, "--old", os.path.join(self.tmp, "missing"), "--new", self.old,
             "--data", self.data],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "--old: %s is no executable file" % os.path.join(self.tmp, "missing"), r.stderr
        )
        r = subprocess.run(
            [sys.executable, SCRIPT, "--old", self.old, "--new", self.old, "--data", self.tmp],
            capture_output=True, text=True, timeout=60,
        )  # fmt: skip
        self.assertEqual(r.returncode, 2)
        self.assertIn("has no images/ and meta/", r.stderr)


if __name__ == "__main__":
    unittest.main()
