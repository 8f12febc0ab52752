"""Tests for scripts/profile.sh without Nsight Systems: argument handling, the error when nsys is not on
PATH, and the exact nsys commands, recorded by a fake `nsys` placed first on PATH.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from testutil import write_exe

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "profile.sh")
BASH = shutil.which("bash") or "/bin/bash"
PROFILE_OPTS = ["--trace=cuda,nvtx,osrt", "--sample=none", "--cpuctxsw=none", "--capture-range=cudaProfilerApi",
                "--capture-range-end=stop", "--force-overwrite=true"]
STATS = "--report=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum"

# Records each call's argv (one JSON line in $FAKE_NSYS_LOG) and leaves the files real nsys would:
# `profile` runs the wrapped command and writes PREFIX.nsys-rep (not when $FAKE_NSYS_NO_REP is set, as
# when the program never calls cudaProfilerStart) and returns the command's status.
FAKE_NSYS = r'''
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NSYS_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
opt = lambda name: next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))
if args[0] == "profile":
    i = 1
    while args[i].startswith("--"):
        i += 1
    rc = subprocess.call(args[i:])
    print("Generating '/tmp/nsys-report-1234.qdstrm'")
    if not os.environ.get("FAKE_NSYS_NO_REP"):
        open(opt("--output") + ".nsys-rep", "w").write("rep")
    sys.exit(rc)
if args[0] == "export":
    open(opt("--output"), "w").write("sqlite")
if args[0] == "stats":
    for report in opt("--report").split(","):
        open("%s_%s.csv" % (opt("--output"), report), "w").write("csv")
'''

# A stand-in for train_resnet50 (writes its --report) and for the Python reference (prints a JSON line).
FAKE_TRAIN = r'''
import json, sys
args = sys.argv[1:]
if "--fail" in args:
    sys.exit(3)
path = args[args.index("--report") + 1]
json.dump({"capture": {"steps": 8, "images_per_s": 123.0}, "argv": args}, open(path, "w"))
'''
FAKE_PY = r'''
import json, sys
print("loading...")
print(json.dumps({"workers": 8, "steps": 8, "images_per_s": 4236.5, "argv": sys.argv[1:]}))
print("done")
'''


class ProfileShTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="profile_sh_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        write_exe(os.path.join(self.bin, "nsys"), FAKE_NSYS)
        self.train = write_exe(os.path.join(self.tmp, "train_resnet50"), FAKE_TRAIN)
        self.py = write_exe(os.path.join(self.tmp, "seed_workload.py"), FAKE_PY)
        self.log = os.path.join(self.tmp, "nsys_calls.jsonl")
        self.prefix = os.path.join(self.tmp, "out", "run1")

    def run_sh(self, *args, path=None, **env):
        e = dict(os.environ, FAKE_NSYS_LOG=self.log, PATH=path or self.bin + os.pathsep + os.environ["PATH"])
        e.pop("TRAIN_BIN", None)
        e.update(env)
        return subprocess.run([BASH, SCRIPT] + list(args), capture_output=True, text=True, timeout=60, env=e)

    def calls(self):
        with open(self.log) as f:
            return [json.loads(line) for line in f]

    def test_help_and_usage_errors(self):
        r = self.run_sh("--help")
        self.assertEqual(r.returncode, 0)
        self.assertIn("usage: scripts/profile.sh --prefix PREFIX", r.stdout)
        r = self.run_sh("--workers", "8")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected --prefix PREFIX", r.stderr)
        r = self.run_sh("--prefix")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected a value after --prefix", r.stderr)
        r = self.run_sh("--prefix", self.prefix, "--workers", "8", "--", "python3", "x.py")
        self.assertEqual(r.returncode, 2)
        self.assertIn("apply only to the training binary", r.stderr)
        self.assertFalse(os.path.exists(self.log))

    def test_nsys_not_on_path(self):
        # A PATH holding only the tools the script needs before it looks for nsys.
        tools = os.path.join(self.tmp, "tools")
        os.mkdir(tools)
        for tool in ("dirname", "basename", "mkdir", "rm"):
            os.symlink(shutil.which(tool), os.path.join(tools, tool))
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, path=tools)
        self.assertEqual(r.returncode, 2)
        self.assertIn("nsys (Nsight Systems CLI) is not on PATH", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_commands_for_the_training_binary(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--workers", "8", "--",
                        "--steps", "8", "--pin-memory=false")
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        self.assertEqual(self.calls(), [
            ["profile"] + PROFILE_OPTS + ["--output=" + p, self.train, "--workers", "8", "--steps", "8",
                                          "--pin-memory=false", "--report", p + ".json"],
            ["export", "--type=sqlite", "--force-overwrite=true", "--output=" + p + ".sqlite", p + ".nsys-rep"],
            ["stats", STATS, "--format=csv", "--force-overwrite=true", "--output=" + p, p + ".sqlite"],
        ])
        with open(p + ".json") as f:
            self.assertEqual(json.load(f)["capture"]["images_per_s"], 123.0)
        for suffix in (".nsys-rep", ".sqlite", "_nvtx_sum.csv", "_cuda_gpu_kern_sum.csv",
                       "_cuda_gpu_mem_time_sum.csv", "_cuda_api_sum.csv", ".log"):
            self.assertTrue(os.path.isfile(p + suffix), suffix)
            self.assertIn(p + suffix, r.stdout)
        self.assertIn("run report:  " + p + ".json", r.stdout)

    def test_train_bin_env_and_given_report(self):
        other = os.path.join(self.tmp, "elsewhere.json")
        r = self.run_sh("--prefix", self.prefix, "--report", other, TRAIN_BIN=self.train)
        self.assertEqual(r.returncode, 0, r.stderr)
        argv = self.calls()[0]
        self.assertEqual(argv[len(PROFILE_OPTS) + 2:], [self.train, "--report", other])  # not appended twice
        self.assertTrue(os.path.isfile(self.prefix + ".json"))  # copied next to the capture

    def test_wrapped_python_command(self):
        r = self.run_sh("--prefix", self.prefix, "--", sys.executable, self.py, "/data", "--steps", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.calls()[0], ["profile"] + PROFILE_OPTS + ["--output=" + self.prefix, sys.executable,
                                                                        self.py, "/data", "--steps", "8"])
        with open(self.prefix + ".json") as f:
            report = json.load(f)
        self.assertEqual((report["images_per_s"], report["argv"]), (4236.5, ["/data", "--steps", "8"]))

    def test_program_failure_status(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--fail")
        self.assertEqual(r.returncode, 3)
        self.assertIn("the profiled program failed (exit 3)", r.stderr)
        self.assertEqual(len(self.calls()), 1)  # no export or stats after a failed run

    def test_capture_never_started(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, FAKE_NSYS_NO_REP="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("capture range never started", r.stderr)
        self.assertEqual(len(self.calls()), 1)

    def test_missing_binary(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", os.path.join(self.tmp, "build", "train_resnet50"))
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected an executable train_resnet50", r.stderr)

    def test_dry_run_prints_commands(self):
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--binary", "/opt/train_resnet50", "--steps", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.splitlines(), [
            "nsys profile " + " ".join(PROFILE_OPTS) + " --output=out/x /opt/train_resnet50 --steps 8 --report out/x.json",
            "nsys export --type=sqlite --force-overwrite=true --output=out/x.sqlite out/x.nsys-rep",
            "nsys stats " + STATS + " --format=csv --force-overwrite=true --output=out/x out/x.sqlite"])


if __name__ == "__main__":
    unittest.main()
