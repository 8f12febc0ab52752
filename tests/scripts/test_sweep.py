"""Tests for scripts/sweep.py, the command line, without a GPU: a fake train_resnet50 (written here)
produces run reports, so planning, aggregation, the refusal of runs whose checks fail, and the time
limit with one retry are checked exactly; one run also goes through scripts/profile.sh with a fake
nsys whose "capture" is the real export in tests/fixtures/nsys; flags and outputs that cannot be
used stop it before any run, and --resume runs again a result.json it cannot read. The package's
sweep modules have their own tests (nsys_analysis/sweep/: test_plan.py, test_runs.py,
test_tables.py, test_figures.py).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_sweep.py
(all tests: scripts/dev/python_tests.sh)
"""

import csv
import importlib.util
import json
import lzma
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from scripts.support.testutil import ANSWER_PRINT_CONFIG, FIXTURE_DIR, REPO, ScratchCase

from nsys_analysis.sweep.plan import DEFAULT_CONFIGS, load_configs, make_plan

SCRIPT = os.path.join(REPO, "scripts", "sweep.py")

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None

# A stand-in for train_resnet50: answers --print-config (testutil.ANSWER_PRINT_CONFIG, for
# profile.sh), parses its flags, writes a report in the C++ program's schema.
#   images/s = 1000 + 10 * workers + (seed - 2026); batch_wait of step i = workers / 10 + i (+ 5 at
#   step 1 for seed 2027); h2d_submit 0.25 ms per step (2.0 with --pin-memory=false).
# Misbehaviours, chosen by flags:
#   --workers 4   sleeps past any time limit on its first call per seed (state in $FAKE_STATE), then
#                 works
#   --workers 3   always sleeps past the limit
#   --workers 13  exits 1
#   --prefetch-factor 7  reports one step fewer than asked (a failing report check)
# Under the fake nsys (FAKE_UNDER_NSYS set) the images/s are multiplied by $FAKE_TRACED_FACTOR when
# set.
FAKE_BINARY = (
    ANSWER_PRINT_CONFIG
    + r"""
import json, os, sys, time
argv = sys.argv[1:]
flags, i = {}, 0
while i < len(argv):
    tok = argv[i]
    if "=" in tok:
        k, v = tok.split("=", 1); flags[k] = v
    elif i + 1 < len(argv) and not argv[i + 1].startswith("--"):
        flags[tok] = argv[i + 1]; i += 1
    else:
        flags[tok] = True
    i += 1
steps, workers, seed = int(flags["--steps"]), int(flags["--workers"]), int(flags["--seed"])
state = os.path.join(os.environ["FAKE_STATE"], "calls_%d_%d" % (workers, seed))
calls = int(open(state).read()) + 1 if os.path.exists(state) else 1
open(state, "w").write(str(calls))
print("fake train_resnet50", " ".join(argv), flush=True)
if workers == 3 or (workers == 4 and calls == 1):
    time.sleep(60)
if workers == 13:
    print("error: expected a dataset", file=sys.stderr); sys.exit(1)
reported = steps - 1 if flags.get("--prefetch-factor") == "7" else steps
ips = 1000.0 + 10 * workers + (seed - 2026)
if os.environ.get("FAKE_UNDER_NSYS") and os.environ.get("FAKE_TRACED_FACTOR"):
    ips *= float(os.environ["FAKE_TRACED_FACTOR"])
waits = [workers / 10 + i + (5.0 if seed == 2027 and i == 1 else 0.0) for i in range(reported)]
sub = 2.0 if flags.get("--pin-memory") == "false" else 0.25
report = {"config": {"steps": steps, "workers": workers, "seed": seed, "argv": argv},
          "capture": {"warmup_steps": 3, "steps": reported, "batch_size": 4, "elapsed_s": 1.0,
                      "images_per_s": ips, "reuse_iterator": True},
          "steps": [{"index": i, "batch_wait_ms": w, "h2d_submit_ms": sub, "step_ms": 10.0}
                    for i, w in enumerate(waits)],
          "interrupted": False}
with open(flags["--report"], "w") as f:
    json.dump(report, f)
"""
)

CONFIGS = {
    "reset_8": {"steps": 2, "reuse_iterator": False},
    "reuse_8": {"steps": 2},
    "reuse_64": {"steps": 4},
    "workers_4": {"workers": 4, "steps": 3},
    "bad_steps": {"prefetch_factor": 7, "steps": 3},
    "no_pin": {"pin_memory": False, "steps": 3},
}


class SweepCase(ScratchCase):
    tmp_prefix = "sweep_test_"

    def setUp(self):
        super().setUp()
        self.state = os.path.join(self.tmp, "state")
        os.mkdir(self.state)
        self.binary = self.fake("train_resnet50", FAKE_BINARY, self.tmp)
        self.configs = os.path.join(self.tmp, "configs.json")
        with open(self.configs, "w") as f:
            json.dump(CONFIGS, f)
        self.out = os.path.join(self.tmp, "out")

    def run_sweep(self, *args, timeout=120):
        env = dict(os.environ, FAKE_STATE=self.state)
        cmd = [sys.executable, SCRIPT, "--binary", self.binary, "--out", self.out] + list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env)

    def runs(self):
        with open(os.path.join(self.out, "sweep.json")) as f:
            return {r["config"]: r for r in json.load(f)["runs"]}

    def read_csv(self, name):
        with open(os.path.join(self.out, name), newline="") as f:
            return list(csv.DictReader(f))


class CliTest(unittest.TestCase):
    def test_help_from_another_cwd(self):
        r = subprocess.run(
            [sys.executable, SCRIPT, "--help"],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tempfile.gettempdir(),
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("--no-nsys", r.stdout)
        self.assertIn("Exit status: 0 every run aggregated", r.stdout)

    def test_dry_run(self):
        r = subprocess.run(
            [
                sys.executable,
                SCRIPT,
                "--dry-run",
                "--data",
                "/d",
                "--order-seed",
                "5",
                "--",
                "--synthetic",
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.rstrip("\n").splitlines()
        self.assertEqual(len(lines), 16)
        first = make_plan(DEFAULT_CONFIGS, [2026, 2027], 5)[0]
        self.assertTrue(lines[0].startswith(" 1. %s seed %d: --data /d " % first), lines[0])
        self.assertTrue(all(line.endswith("--synthetic") for line in lines))

    def test_bad_configs_file(self):
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump({"x": {"steps": 0}}, f)
        self.addCleanup(os.remove, f.name)
        r = subprocess.run(
            [sys.executable, SCRIPT, "--dry-run", "--configs", f.name],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected x.steps to be a positive integer", r.stderr)

    def test_flags_that_cannot_be_used(self):
        cases = [
            (["--timeout", "nan"], "expected --timeout > 0 seconds, got nan"),
            (["--timeout", "0"], "expected --timeout > 0 seconds, got 0"),
            (["--deadline", "-1"], "expected --deadline >= 0 seconds (0: none), got -1"),
            (
                ["--configs", tempfile.gettempdir()],
                "--configs %s: is a directory, expected a JSON file of "
                "configurations" % tempfile.gettempdir(),
            ),
            (["--configs", os.path.join(tempfile.gettempdir(), "no", "such.json")], "no such file"),
            (
                ["--fig5-left", "reset_8", "nope"],
                "expected --fig5-left names among the configurations run (reset_8, reuse_8, "
                "reuse_64, workers_4, workers_12, prefetch_1, prefetch_4, no_pin), got nope",
            ),
            (["--only", "workers_4", "--fig5-right", "reuse_64"], "got reuse_64"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = subprocess.run(
                    [sys.executable, SCRIPT, "--dry-run"] + args,
                    capture_output=True,
                    text=True,
                    timeout=60,
                )
                self.assertEqual(r.returncode, 2)
                self.assertIn(message, r.stderr)
                self.assertNotIn("Traceback", r.stderr)


class NoNsysSweepTest(SweepCase):
    def test_aggregation_refusal_and_retry(self):
        args = ["--no-nsys", "--configs", self.configs, "--timeout", "2", "--order-seed", "3"]
        if not HAVE_MPL:
            args.append("--no-figures")
        r = self.run_sweep(*(args + ["--", "--device", "cpu", "--batch-size", "4"]))
        self.assertEqual(r.returncode, 1, r.stderr)  # one configuration's runs are refused
        self.assertIn(
            "not aggregating bad_steps seed 2026: checks failed: report_step_count", r.stderr
        )

        with open(os.path.join(self.out, "sweep.json")) as f:
            doc = json.load(f)
        runs = {(x["config"], x["seed"]): x for x in doc["runs"]}
        self.assertEqual(len(runs), 12)
        self.assertEqual([x["order"] for x in doc["runs"]], list(range(1, 13)))
        self.assertEqual(
            [(x["config"], x["seed"]) for x in doc["runs"]],
            make_plan(load_configs(self.configs), [2026, 2027], 3),
        )
        # Extra arguments reach every run, after the configuration's flags.
        argv = runs[("no_pin", 2027)]["command"]
        self.assertEqual(argv[0], self.binary)
        self.assertIn("--pin-memory=false", argv)
        self.assertEqual(
            argv[argv.index("--device") : argv.index("--device") + 4],
            ["--device", "cpu", "--batch-size", "4"],
        )
        self.assertNotIn(
            "128", argv
        )  # the baseline's --batch-size 128 gave way to the extra --batch-size 4
        # Time limit: the first attempt of each workers_4 run is killed and retried once.
        for seed in (2026, 2027):
            x = runs[("workers_4", seed)]
            self.assertEqual([a["status"] for a in x["attempts"]], ["timeout", "ok"])
            self.assertTrue(x["aggregated"])
        # Refusal: bad_steps reports 2 of 3 steps.
        for seed in (2026, 2027):
            x = runs[("bad_steps", seed)]
            self.assertEqual(x["status"], "ok")
            self.assertFalse(x["aggregated"])
            self.assertIs(x["checks"]["report_step_count"], False)
            self.assertIn("report capture.steps 2, 2 step records, expected 3", x["reason"])

        table = {row["config"]: row for row in self.read_csv("sweep.csv")}
        self.assertEqual(list(table), list(CONFIGS))
        row = table["no_pin"]
        self.assertEqual(
            (row["images_per_s_2026"], row["images_per_s_2027"], row["images_per_s_mean"]),
            ("1080.0", "1081.0", "1080.5"),
        )
        # batch_wait: seed 2026 -> 0.8 + 1.8 + 2.8 = 5.4; seed 2027 adds 5 at step 1 -> 10.4.
        self.assertEqual(
            (float(row["batch_wait_total_ms_2026"]), float(row["batch_wait_total_ms_2027"])),
            (5.4, 10.4),
        )
        self.assertAlmostEqual(float(row["batch_wait_total_ms_mean"]), 7.9, places=9)
        self.assertEqual(
            (row["h2d_submit_total_ms_2026"], row["h2d_submit_total_ms_mean"]), ("6.0", "6.0")
        )
        self.assertEqual((row["longest_wait_ms_2026"], row["longest_wait_step_2026"]), ("2.8", "2"))
        self.assertEqual((row["longest_wait_ms_2027"], row["longest_wait_step_2027"]), ("6.8", "1"))
        self.assertEqual(row["no_activity_pct_mean"], "")  # no capture in --no-nsys mode
        self.assertEqual(table["workers_4"]["retried"], "2")
        self.assertIn("timed out once, retry succeeded", table["workers_4"]["notes"])
        self.assertEqual(
            (table["bad_steps"]["runs_aggregated"], table["bad_steps"]["runs_excluded"]), ("0", "2")
        )
        self.assertEqual(table["bad_steps"]["images_per_s_mean"], "")
        self.assertEqual(table["reuse_64"]["images_per_s_mean"], "1080.5")

        runs_csv = {(x["config"], x["seed"]): x for x in self.read_csv("runs.csv")}
        self.assertEqual(
            (
                runs_csv[("workers_4", "2026")]["attempts"],
                runs_csv[("workers_4", "2026")]["timeouts"],
            ),
            ("2", "1"),
        )
        self.assertEqual(runs_csv[("bad_steps", "2027")]["aggregated"], "False")

        with open(os.path.join(self.out, "sweep.md")) as f:
            md = f.read()
        self.assertIn("| no_pin | steps=3, pin_memory=false | 1080.0 / 1081.0 (mean 1080.5) |", md)
        self.assertIn("2.8 @ 2 / 6.8 @ 1", md)
        self.assertIn("- bad_steps seed 2027: checks failed: report_step_count", md)
        for seed in (2026, 2027):
            self.assertTrue(
                os.path.isfile(
                    os.path.join(self.out, "runs", "workers_4_%d" % seed, "attempt2.log")
                )
            )
        if HAVE_MPL:
            for name in ("fig4_sweep.png", "fig5_batch_wait.png"):
                self.assertGreater(os.path.getsize(os.path.join(self.out, name)), 10000)

    def test_second_timeout_and_failure_are_recorded(self):
        with open(self.configs, "w") as f:
            json.dump(
                {
                    "stuck": {"workers": 3, "steps": 2},
                    "broken": {"workers": 13, "steps": 2},
                    "fine": {"steps": 2},
                },
                f,
            )
        r = self.run_sweep(
            "--no-nsys",
            "--configs",
            self.configs,
            "--seeds",
            "2026",
            "--timeout",
            "1",
            "--no-figures",
        )
        self.assertEqual(r.returncode, 1)
        with open(os.path.join(self.out, "sweep.json")) as f:
            runs = {x["config"]: x for x in json.load(f)["runs"]}
        self.assertEqual(runs["stuck"]["status"], "timeout")
        self.assertEqual([a["status"] for a in runs["stuck"]["attempts"]], ["timeout", "timeout"])
        self.assertEqual(runs["broken"]["status"], "failed")
        self.assertEqual(runs["broken"]["attempts"][0]["exit_code"], 1)
        self.assertEqual(
            len(runs["broken"]["attempts"]), 1
        )  # failures are not retried, timeouts are
        self.assertTrue(runs["fine"]["aggregated"])
        table = {row["config"]: row for row in self.read_csv("sweep.csv")}
        self.assertIn("timed out after 1 s on both attempts", table["stuck"]["notes"])
        self.assertIn("exit status 1", table["broken"]["notes"])

    def test_deadline_then_resume_keeps_finished_runs(self):
        with open(self.configs, "w") as f:
            json.dump({"a": {"steps": 2}, "b": {"steps": 2, "workers": 5}}, f)
        args = ("--no-nsys", "--configs", self.configs, "--seeds", "2026", "--no-figures")
        first = self.run_sweep(*args, "--deadline", "0.000001")
        self.assertEqual(first.returncode, 4, first.stderr)
        self.assertIn("rerun with --resume", first.stderr)
        done = [d for d in os.listdir(os.path.join(self.out, "runs"))]
        self.assertEqual(len(done), 1)  # the first run started before the deadline was checked
        calls_before = sorted(os.listdir(self.state))
        second = self.run_sweep(*args, "--resume")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertIn("kept from an earlier run", second.stderr)
        # The kept run was not run again: one more fake call, for the other configuration only.
        self.assertEqual(len(os.listdir(self.state)), len(calls_before) + 1)
        with open(os.path.join(self.out, "sweep.json")) as f:
            runs = json.load(f)["runs"]
        self.assertEqual(len(runs), 2)
        self.assertTrue(all(r["aggregated"] for r in runs))

    def test_resume_runs_again_a_result_it_cannot_read(self):
        with open(self.configs, "w") as f:
            json.dump({"a": {"steps": 2}}, f)
        args = (
            "--no-nsys",
            "--configs",
            self.configs,
            "--seeds",
            "2026",
            "--no-figures",
            "--resume",
        )
        saved = os.path.join(self.out, "runs", "a_2026", "result.json")
        for text in ("{truncated", "[1]", '{"status": "ok", "config": "a"}'):
            with self.subTest(text=text):
                os.makedirs(os.path.dirname(saved), exist_ok=True)
                with open(saved, "w") as f:
                    f.write(text)
                r = self.run_sweep(*args)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                if text != "[1]":  # a list is no earlier result: simply run again
                    self.assertIn("a seed 2026: cannot use %s" % saved, r.stderr)
                    self.assertIn("running it again", r.stderr)
                with open(saved) as f:
                    self.assertTrue(json.load(f)["aggregated"])

    def test_resume_runs_again_a_result_of_another_command_or_of_broken_types(self):
        # A kept run must be the run this sweep would make, and its numbers numbers: else the table
        # would show an earlier configuration's figures under the new one's name.
        with open(self.configs, "w") as f:
            json.dump({"a": {"steps": 2, "workers": 8}}, f)
        args = ("--no-nsys", "--configs", self.configs, "--seeds", "2026", "--no-figures")
        self.assertEqual(self.run_sweep(*args).returncode, 0)
        saved = os.path.join(self.out, "runs", "a_2026", "result.json")
        with open(saved) as f:
            good = json.load(f)
        with open(self.configs, "w") as f:
            json.dump({"a": {"steps": 2, "workers": 2}}, f)
        r = self.run_sweep(*args, "--resume")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(
            "a seed 2026: cannot use %s (ValueError: made by another command" % saved, r.stderr
        )
        self.assertEqual(
            self.runs()["a"]["command"][self.runs()["a"]["command"].index("--workers") + 1], "2"
        )
        r = self.run_sweep(*args, "--resume", "--", "--steps", "1")
        self.assertIn("running it again", r.stderr)
        self.assertEqual(self.runs()["a"]["expected_steps"], 1)
        with open(self.configs, "w") as f:
            json.dump({"a": {"steps": 2, "workers": 8}}, f)
        for key, value, message in (
            ("images_per_s", "abc", "metrics.images_per_s is 'abc', expected a finite number"),
            ("images_per_s", float("nan"), "metrics.images_per_s is nan, expected a finite"),
            ("batch_wait_ms", [1, "x"], "metrics.batch_wait_ms is not a list of numbers"),
            (None, "no", "aggregated is 'no', expected true or false"),
            ("seed", "2026", "the run of 'a' seed '2026'"),
        ):
            with self.subTest(key=key, value=value):
                doc = json.loads(json.dumps(good))
                if key is None:
                    doc["aggregated"] = value
                elif key == "seed":
                    doc["seed"] = value
                else:
                    doc["metrics"][key] = value
                with open(saved, "w") as f:
                    json.dump(doc, f)
                r = self.run_sweep(*args, "--resume")
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertIn(message, r.stderr)
                self.assertIn("running it again", r.stderr)
                self.assertEqual(
                    self.runs()["a"]["metrics"]["images_per_s"], good["metrics"]["images_per_s"]
                )

    def test_outputs_that_cannot_be_written_stop_before_any_run(self):
        afile = os.path.join(self.tmp, "afile")
        with open(afile, "w") as f:
            f.write("x")
        cases = [
            (afile, "--out %s: is a regular file, expected a directory" % afile),
            (
                os.path.join(afile, "sub"),
                "--out %s: %s is not a directory" % (os.path.join(afile, "sub"), afile),
            ),
        ]
        os.makedirs(os.path.join(self.tmp, "o", "sweep.md"))
        cases.append(
            (
                os.path.join(self.tmp, "o"),
                "--out %s: is a directory, expected a regular file"
                % os.path.join(self.tmp, "o", "sweep.md"),
            )
        )
        os.makedirs(os.path.join(self.tmp, "p", "runs", "reuse_8_2026", "attempt1.log"))
        cases.append(
            (
                os.path.join(self.tmp, "p"),
                "--out %s: is a directory"
                % os.path.join(self.tmp, "p", "runs", "reuse_8_2026", "attempt1.log"),
            )
        )
        # --configs (or the binary) where the sweep would write: sweep.json, or a run's run.json.
        inside = os.path.join(self.tmp, "q", "sweep.json")
        os.makedirs(os.path.dirname(inside))
        shutil.copyfile(self.configs, inside)
        cases.append(
            (
                os.path.join(self.tmp, "q"),
                "--out %s: is the --configs file %s; write the output elsewhere" % (inside, inside),
                inside,
            )
        )
        run_json = os.path.join(self.tmp, "r", "runs", "reuse_8_2026", "run.json")
        os.makedirs(os.path.dirname(run_json))
        shutil.copyfile(self.configs, run_json)
        cases.append(
            (
                os.path.join(self.tmp, "r"),
                "--out %s: is the --configs file %s" % (run_json, run_json),
                run_json,
            )
        )
        for case in cases:
            out, message = case[:2]
            configs = case[2] if len(case) > 2 else self.configs
            with self.subTest(out=out):
                with open(configs, "rb") as f:
                    before = f.read()
                r = subprocess.run(
                    [
                        sys.executable,
                        SCRIPT,
                        "--no-nsys",
                        "--binary",
                        self.binary,
                        "--configs",
                        configs,
                        "--out",
                        out,
                        "--no-figures",
                    ],
                    capture_output=True,
                    text=True,
                    timeout=60,
                    env=dict(os.environ, FAKE_STATE=self.state),
                )
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("sweep: error: " + message, r.stderr)
                self.assertEqual(len(r.stderr.strip().splitlines()), 1)
                self.assertEqual(os.listdir(self.state), [])  # no run started
                with open(configs, "rb") as f:
                    self.assertEqual(f.read(), before)

    def test_nsys_mode_needs_nsys(self):
        tools = os.path.join(self.tmp, "empty_bin")
        os.mkdir(tools)
        r = subprocess.run(
            [sys.executable, SCRIPT, "--binary", self.binary, "--out", self.out],
            capture_output=True,
            text=True,
            timeout=60,
            env=dict(os.environ, PATH=tools),
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("nsys (Nsight Systems CLI) is not on PATH", r.stderr)

    def test_missing_binary(self):
        r = subprocess.run(
            [
                sys.executable,
                SCRIPT,
                "--no-nsys",
                "--binary",
                os.path.join(self.tmp, "nope"),
                "--out",
                self.out,
            ],
            capture_output=True,
            text=True,
            timeout=60,
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected an executable --binary", r.stderr)


# A fake nsys for the capture path: `profile` runs the program (FAKE_UNDER_NSYS=1 in its
# environment) and leaves PREFIX.nsys-rep, `export` writes the real fixture export, `stats` copies
# the fixture CSVs.
FAKE_NSYS = r"""
import os, shutil, subprocess, sys
args = sys.argv[1:]
fixture = os.environ["FAKE_EXPORT"]
opt = lambda name: next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))
if args[0] == "profile":
    i = 1
    while args[i].startswith("--"):
        i += 1
    rc = subprocess.call(args[i:], env=dict(os.environ, FAKE_UNDER_NSYS="1"))
    open(opt("--output") + ".nsys-rep", "w").write("fake")
    sys.exit(rc)
if args[0] == "export":
    shutil.copy(fixture, opt("--output"))
if args[0] == "stats":
    for name in os.listdir(os.path.dirname(fixture)):
        if name.endswith(".csv"):
            shutil.copy(os.path.join(os.path.dirname(fixture), name),
                        opt("--output") + name[len("py_reuse8"):])
"""


class CaptureSweepTest(SweepCase):
    def setUp(self):
        super().setUp()
        fixture_dir = os.path.join(self.tmp, "fixture")
        os.mkdir(fixture_dir)
        self.export = os.path.join(fixture_dir, "py_reuse8.sqlite")
        with lzma.open(os.path.join(FIXTURE_DIR, "py_reuse8.sqlite.xz")) as src, open(
            self.export, "wb"
        ) as dst:
            shutil.copyfileobj(src, dst)
        for name in os.listdir(FIXTURE_DIR):
            if name.endswith(".csv"):
                shutil.copy(os.path.join(FIXTURE_DIR, name), fixture_dir)
        self.fake("nsys", FAKE_NSYS)

    def sweep(self, configs, *args, **env):
        with open(self.configs, "w") as f:
            json.dump(configs, f)
        env = dict(
            os.environ,
            FAKE_STATE=self.state,
            FAKE_EXPORT=self.export,
            PATH=self.bin + os.pathsep + os.environ.get("PATH", ""),
            **env,
        )
        cmd = [
            sys.executable,
            SCRIPT,
            "--binary",
            self.binary,
            "--out",
            self.out,
            "--configs",
            self.configs,
            "--seeds",
            "2026",
            "--no-figures",
        ] + list(args)
        return subprocess.run(cmd, capture_output=True, text=True, timeout=180, env=env)

    def calls(self, workers, seed=2026):
        """How often the fake binary ran (not counting --print-config) with these workers and
        seed."""
        path = os.path.join(self.state, "calls_%d_%d" % (workers, seed))
        with open(path) as f:
            return int(f.read())

    def test_one_captured_run_through_profile_sh(self):
        r = self.sweep({"reuse_8": {"steps": 8}})
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        run = self.runs()["reuse_8"]
        self.assertTrue(run["aggregated"], run["reason"])
        self.assertEqual(
            run["command"][:4],
            [
                os.path.join(REPO, "scripts", "profile.sh"),
                "--prefix",
                os.path.join(self.out, "runs", "reuse_8_2026", "capture"),
                "--no-untraced",
            ],
        )
        self.assertEqual(
            run["checks"],
            {
                "report_step_count": True,
                "report_not_interrupted": True,
                "report_throughput": True,
                "step_count": True,
                "copy_count": True,
                "capture_boundary": True,
                "no_sync_in_steps": True,
                "no_layout_conversions": True,
            },
        )
        m = run["metrics"]
        # Throughput from the fake's report; input timing and no-activity from the fixture's
        # capture.
        self.assertEqual(m["images_per_s"], 1080.0)
        self.assertEqual(m["no_activity_pct"], 3.708488)
        self.assertEqual(m["batch_wait_total_ms"], 1.372762)
        self.assertEqual(m["h2d_submit_total_ms"], 5.794361)
        self.assertEqual((m["longest_wait_ms"], m["longest_wait_step"]), (0.353145, 0))
        self.assertTrue(
            os.path.isfile(os.path.join(self.out, "runs", "reuse_8_2026", "analysis", "summary.md"))
        )

    def test_every_captured_run_gets_its_untraced_run(self):
        r = self.sweep({"reuse_8": {"steps": 8}}, FAKE_TRACED_FACTOR="0.5")
        self.assertEqual(
            r.returncode, 0, r.stdout + r.stderr
        )  # tracer-bound is reported, not excluded
        run = self.runs()["reuse_8"]
        folder = os.path.join(self.out, "runs", "reuse_8_2026")
        self.assertTrue(run["aggregated"], run["reason"])
        self.assertEqual(
            run["untraced"]["command"][0], self.binary
        )  # the binary itself, no profile.sh or nsys
        self.assertEqual(
            run["untraced"]["command"][-2:], ["--report", os.path.join(folder, "untraced.json")]
        )
        self.assertEqual(
            run["untraced"]["command"][1:-2], run["command"][7:-2]
        )  # the same flags and seed
        self.assertEqual((run["untraced"]["status"], run["untraced"]["kept"]), ("ok", False))
        self.assertTrue(os.path.isfile(os.path.join(folder, "untraced_attempt1.log")))
        self.assertEqual(self.calls(8), 2)
        m = run["metrics"]
        self.assertEqual(
            (
                m["images_per_s"],
                m["untraced_images_per_s"],
                m["traced_over_untraced"],
                m["tracer_bound"],
            ),
            (540.0, 1080.0, 0.5, True),
        )
        self.assertNotIn("capture_cost", run["checks"])
        with open(os.path.join(folder, "analysis", "summary.json")) as f:
            self.assertIs(json.load(f)["checks"]["capture_cost"], False)
        row = self.read_csv("sweep.csv")[0]
        self.assertEqual(
            (
                row["untraced_images_per_s_2026"],
                row["traced_over_untraced_mean"],
                row["tracer_bound_2026"],
                row["tracer_bound_runs"],
            ),
            ("1080.0", "0.5", "True", "1"),
        )
        self.assertEqual(self.read_csv("runs.csv")[0]["tracer_bound"], "True")
        with open(os.path.join(self.out, "sweep.md")) as f:
            md = f.read()
        self.assertIn(
            "| 1080.0 (mean 1080.0) | 0.500 (mean 0.500) | yes (1 of 1) | seed 2026: tracer-bound "
            "(traced 0.50x untraced), read the untraced images/s |",
            md,
        )

    def test_no_untraced(self):
        r = self.sweep({"reuse_8": {"steps": 8}}, "--no-untraced")
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        run = self.runs()["reuse_8"]
        self.assertEqual(
            (
                run["untraced"],
                run["metrics"]["untraced_images_per_s"],
                run["metrics"]["tracer_bound"],
            ),
            ({}, None, None),
        )
        self.assertFalse(
            os.path.exists(os.path.join(self.out, "runs", "reuse_8_2026", "untraced.json"))
        )
        self.assertEqual(self.calls(8), 1)

    def test_resume_keeps_a_finished_untraced_run(self):
        configs = {"a": {"steps": 8, "workers": 5}, "b": {"steps": 8, "workers": 6}}
        first = self.sweep(configs, "--deadline", "0.000001")
        self.assertEqual(first.returncode, 4, first.stderr)
        done = os.listdir(os.path.join(self.out, "runs"))
        self.assertEqual(len(done), 1)
        workers = 5 if done[0] == "a_2026" else 6
        self.assertEqual(self.calls(workers), 2)  # captured, then untraced
        second = self.sweep(configs, "--resume")
        self.assertEqual(second.returncode, 0, second.stderr)
        self.assertEqual(self.calls(workers), 2)  # the kept run: neither run again
        self.assertEqual(self.calls(11 - workers), 2)
        # A run whose result was lost after its untraced run finished: captured again, its untraced
        # run kept.
        os.remove(os.path.join(self.out, "runs", done[0], "result.json"))
        third = self.sweep(configs, "--resume")
        self.assertEqual(third.returncode, 0, third.stderr)
        self.assertIn("untraced run kept from an earlier sweep (--resume)", third.stderr)
        self.assertEqual(self.calls(workers), 3)
        run = self.runs()[done[0][0]]
        self.assertTrue(run["aggregated"], run["reason"])
        self.assertEqual(
            (run["untraced"]["kept"], run["metrics"]["untraced_images_per_s"]),
            (True, 1000.0 + 10 * workers),
        )


if __name__ == "__main__":
    unittest.main()
