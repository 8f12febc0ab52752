"""Tests for scripts/profile.sh without Nsight Systems: argument handling, the error when nsys is
not on PATH, and the exact nsys commands, recorded by a fake `nsys` placed first on PATH; the run's
configuration asked of the (fake) train_resnet50 with --print-config (graph tracing, a given
--report, refused flags); with --nproc, the launcher (a fake `torchrun`, or the real
scripts/launch_local.sh) and every rank's outputs; a --binary that cannot run (dry runs too) and
outputs that cannot be written stop it before nsys; outputs are written through symlinks, /dev/null
kept.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_profile_sh.py
(all tests: scripts/dev/python_tests.sh)
"""

import importlib.util
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import time
import unittest

from scripts.support.testutil import ANSWER_PRINT_CONFIG, REPO, ScratchCase, alive

# Synthetic exports stand in for real nsys exports.
from scripts.support.nsys_exports import rank_export, tracer_cost_export

SCRIPT = os.path.join(REPO, "scripts", "profile.sh")
LAUNCH_LOCAL = os.path.join(REPO, "scripts", "launch_local.sh")
BASH = shutil.which("bash") or "/bin/bash"
PROFILE_OPTS = [
    "--trace=cuda,nvtx,osrt",
    "--sample=none",
    "--cpuctxsw=none",
    "--capture-range=cudaProfilerApi",
    "--capture-range-end=stop",
    "--force-overwrite=true",
]
STATS = "--report=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum"
STATS_CSVS = (
    "_nvtx_sum.csv",
    "_cuda_gpu_kern_sum.csv",
    "_cuda_gpu_mem_time_sum.csv",
    "_cuda_api_sum.csv",
)
HAVE_MPL = importlib.util.find_spec("matplotlib") is not None
# Variables of a launcher around the test run that would make the fake programs act as one rank.
RANK_ENV = (
    "RANK",
    "LOCAL_RANK",
    "WORLD_SIZE",
    "LOCAL_WORLD_SIZE",
    "MASTER_ADDR",
    "MASTER_PORT",
    "PROFILE_LAUNCHER",
)

# Records each call's argv (one JSON line in $FAKE_NSYS_LOG; ["nsys", subcommand, --output] in
# $FAKE_ORDER_LOG when set) and leaves the files real nsys would:
# `profile` runs the wrapped command (with FAKE_UNDER_NSYS=1 in its environment) and writes its
# --output (with %q{VAR} expanded from the environment, as nsys does) + .nsys-rep (not when
# $FAKE_NSYS_NO_REP is set, or $FAKE_NSYS_NO_REP_RANK is this $RANK, as when the program never calls
# cudaProfilerStart) and returns the command's status. `export` copies, when $FAKE_NSYS_SQLITE_DIR
# is set, its rank<r>.sqlite for an output named *.rank<r>.sqlite, its capture<k>.sqlite for
# *.<k>.sqlite (profile.sh --repeat). `profile` exits 1 after its command succeeded when
# $FAKE_NSYS_PROFILE_FAIL is set (nsys itself failing); `stats` writes no CSV when
# $FAKE_NSYS_NO_CSV is set (as real nsys stats skips a report without data, still exiting 0).
FAKE_NSYS = r"""
import json, os, re, shutil, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_NSYS_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
opt = lambda name: next(a.split("=", 1)[1] for a in args if a.startswith(name + "="))
if os.environ.get("FAKE_ORDER_LOG"):
    with open(os.environ["FAKE_ORDER_LOG"], "a") as f:
        f.write(json.dumps(["nsys", args[0], opt("--output")]) + "\n")
if args[0] == "profile":
    i = 1
    while args[i].startswith("--"):
        i += 1
    rc = subprocess.call(args[i:], env=dict(os.environ, FAKE_UNDER_NSYS="1"))
    print("Generating '/tmp/nsys-report-1234.qdstrm'")
    output = re.sub(r"%q\{(\w+)\}", lambda m: os.environ.get(m.group(1), ""), opt("--output"))
    no_rep_here = os.environ.get("RANK") == os.environ.get("FAKE_NSYS_NO_REP_RANK", "-")
    if not os.environ.get("FAKE_NSYS_NO_REP") and not no_rep_here:
        open(output + ".nsys-rep", "w").write("rep")
    sys.exit(1 if os.environ.get("FAKE_NSYS_PROFILE_FAIL") else rc)
if args[0] == "export":
    m = re.search(r"\.rank(\d+)\.sqlite$", opt("--output"))
    k = re.search(r"\.(\d+)\.sqlite$", opt("--output"))
    if os.environ.get("FAKE_NSYS_SQLITE_DIR") and m:
        shutil.copy(os.path.join(os.environ["FAKE_NSYS_SQLITE_DIR"], "rank%s.sqlite" % m.group(1)),
                    opt("--output"))
    elif os.environ.get("FAKE_NSYS_SQLITE_DIR") and k:
        shutil.copy(os.path.join(os.environ["FAKE_NSYS_SQLITE_DIR"],
                                 "capture%s.sqlite" % k.group(1)), opt("--output"))
    else:
        open(opt("--output"), "w").write("sqlite")
if args[0] == "stats" and not os.environ.get("FAKE_NSYS_NO_CSV"):
    for report in opt("--report").split(","):
        open("%s_%s.csv" % (opt("--output"), report), "w").write("csv")
"""

# torchrun --standalone --nproc-per-node N --no-python CMD...: records its argv in
# $FAKE_TORCHRUN_LOG, runs N copies of CMD at once with torchrun's variables, exits 1 when any fails
# (torchrun's ChildFailedError).
FAKE_TORCHRUN = r"""
import json, os, subprocess, sys
args = sys.argv[1:]
with open(os.environ["FAKE_TORCHRUN_LOG"], "a") as f:
    f.write(json.dumps(args) + "\n")
assert args[:2] == ["--standalone", "--nproc-per-node"] and args[3] == "--no-python", args
n = int(args[2])
procs = [subprocess.Popen(args[4:], env=dict(os.environ, RANK=str(r), LOCAL_RANK=str(r),
                                              WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
                                              MASTER_ADDR="localhost", MASTER_PORT="29500"))
         for r in range(n)]
sys.exit(1 if [p.wait() for p in procs] != [0] * n else 0)
"""

# A stand-in for train_resnet50 (answers --print-config: testutil.ANSWER_PRINT_CONFIG; writes its
# --report; as rank $RANK, REPORT.rank<r>.json with a dist section) and for the Python reference
# (prints a JSON line). Each run is ["train", its report, under nsys] in $FAKE_ORDER_LOG when set;
# its images/s are 123, or the next of $FAKE_IPS (comma-separated, one per run in order; the count
# in $FAKE_IPS_STATE). --fail exits 3, --fail-untraced 4 when not under nsys. --hang writes its pid
# to $FAKE_PIDFILE, then sleeps a minute before it writes its report (a run still going when
# profile.sh is signalled).
FAKE_TRAIN = (
    ANSWER_PRINT_CONFIG
    + r"""
import json, os, sys
args = sys.argv[1:]
traced = bool(os.environ.get("FAKE_UNDER_NSYS"))
if "--fail" in args:
    sys.exit(3)
if "--fail-untraced" in args and not traced:
    sys.exit(4)
if "--hang" in args:
    import time
    with open(os.environ["FAKE_PIDFILE"] + ".tmp", "w") as f:
        f.write(str(os.getpid()))
    os.rename(os.environ["FAKE_PIDFILE"] + ".tmp", os.environ["FAKE_PIDFILE"])
    time.sleep(60)
path = [a.split("=", 1)[1] if a.startswith("--report=") else args[i + 1]
        for i, a in enumerate(args) if a == "--report" or a.startswith("--report=")][-1]
if os.environ.get("FAKE_ORDER_LOG"):
    with open(os.environ["FAKE_ORDER_LOG"], "a") as f:
        f.write(json.dumps(["train", path, traced]) + "\n")
ips = 123.0
if os.environ.get("FAKE_IPS"):
    state = os.environ["FAKE_IPS_STATE"]
    n = int(open(state).read()) if os.path.exists(state) else 0
    open(state, "w").write(str(n + 1))
    ips = float(os.environ["FAKE_IPS"].split(",")[n])
print("fake train_resnet50 %s" % ("traced" if traced else "untraced"))
report = {"capture": {"steps": int(args[args.index("--steps") + 1]) if "--steps" in args else 8,
                      "images_per_s": ips, "batch_size": 4}, "argv": args}
if "--checkpoint-dir" in args:  # what the run found there
    d = args[args.index("--checkpoint-dir") + 1]
    report["checkpoint_files"] = {n: open(os.path.join(d, n)).read() for n in sorted(os.listdir(d))}
if "RANK" in os.environ:
    root, ext = os.path.splitext(path)
    path = "%s.rank%s%s" % (root, os.environ["RANK"], ext)
    report["dist"] = {"rank": int(os.environ["RANK"]), "world_size": int(os.environ["WORLD_SIZE"])}
json.dump(report, open(path, "w"))
"""
)
FAKE_PY = r"""
import json, os, sys
traced = bool(os.environ.get("FAKE_UNDER_NSYS"))
print("loading...")
print(json.dumps({"workers": 8, "steps": 8, "images_per_s": 4236.5 if traced else 5000.0,
                  "argv": sys.argv[1:]}))
print("done")
"""

# A stand-in for train_resnet50 that reads its flags as the real one's parser (cxxopts) does: a
# flag of VALUED takes the next word as its value whatever it is (a missing one: "Option 'X' is
# missing an argument", exit 2), --print-config[=BOOL] anywhere, the last of a repeated flag wins.
# A run that is not --print-config trains: it appends its arguments to $FAKE_TRAINED and writes its
# --report.
FAKE_STRICT_TRAIN = r"""
import json, os, sys
VALUED = ("--report", "--checkpoint-dir", "--data", "--steps", "--torch-profiler-trace")
args = sys.argv[1:]
config = {"data": "", "cuda_graph": False, "report": "", "checkpoint_dir": "", "resume": False,
          "torch_profiler_trace": ""}
print_config = False
i = 0
while i < len(args):
    name, eq, value = args[i].partition("=")
    if name in VALUED and not eq:
        if i + 1 >= len(args):
            print("train_resnet50: Option '%s' is missing an argument" % name[2:], file=sys.stderr)
            sys.exit(2)
        i += 1
        value = args[i]
    if name == "--print-config":
        print_config = not eq or value in ("true", "1", "yes", "on")
    elif name in VALUED:
        config[name[2:].replace("-", "_")] = value
    i += 1
if print_config:
    print(json.dumps(config))
    sys.exit(0)
with open(os.environ["FAKE_TRAINED"], "a") as f:
    f.write(json.dumps(args) + "\n")
if config["report"]:
    with open(config["report"], "w") as f:
        f.write("{}")
"""


class ProfileShCase(ScratchCase):
    """A temporary directory with the fake nsys first on PATH, the fake programs, and profile.sh's
    runner."""

    tmp_prefix = "profile_sh_test_"

    def setUp(self):
        super().setUp()
        self.fake("nsys", FAKE_NSYS)
        self.train = self.fake("train_resnet50", FAKE_TRAIN, self.tmp)
        self.py = self.fake("seed_workload.py", FAKE_PY, self.tmp)
        self.log = os.path.join(self.tmp, "nsys_calls.jsonl")
        self.config_log = os.path.join(self.tmp, "print_config_calls.jsonl")
        self.torchrun_log = os.path.join(self.tmp, "torchrun_calls.jsonl")
        self.prefix = os.path.join(self.tmp, "out", "run1")

    def run_sh(self, *args, path=None, cwd=None, **env):
        return subprocess.run(
            [BASH, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=60,
            env=self.sh_env(path, **env),
            cwd=cwd,
        )

    def sh_env(self, path=None, **env):
        """profile.sh's environment: the fakes first on PATH (or path), their logs, env added."""
        e = dict(
            os.environ,
            FAKE_NSYS_LOG=self.log,
            PATH=path or self.bin + os.pathsep + os.environ["PATH"],
            FAKE_TORCHRUN_LOG=self.torchrun_log,
            FAKE_CONFIG_LOG=self.config_log,
            PYTHON=sys.executable,
        )  # the interpreter that reads --print-config's JSON, without a search
        for name in ("TRAIN_BIN", "FAKE_PRINT_CONFIG") + RANK_ENV:
            e.pop(name, None)
        e.update(env)
        return e

    def calls(self, log=None):
        with open(log or self.log) as f:
            return [json.loads(line) for line in f]


class ProfileShTest(ProfileShCase):
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
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--workers",
            "8",
            "--",
            "--steps",
            "8",
            "--pin-memory=false",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        self.assertEqual(
            self.calls(),
            [
                ["profile"]
                + PROFILE_OPTS
                + [
                    "--output=" + p,
                    self.train,
                    "--workers",
                    "8",
                    "--steps",
                    "8",
                    "--pin-memory=false",
                    "--report",
                    p + ".json",
                ],
                [
                    "export",
                    "--type=sqlite",
                    "--force-overwrite=true",
                    "--output=" + p + ".sqlite",
                    p + ".nsys-rep",
                ],
                [
                    "stats",
                    STATS,
                    "--format=csv",
                    "--force-overwrite=true",
                    "--output=" + p,
                    p + ".sqlite",
                ],
            ],
        )
        with open(p + ".json") as f:
            self.assertEqual(json.load(f)["capture"]["images_per_s"], 123.0)
        for suffix in (
            ".nsys-rep",
            ".sqlite",
            "_nvtx_sum.csv",
            "_cuda_gpu_kern_sum.csv",
            "_cuda_gpu_mem_time_sum.csv",
            "_cuda_api_sum.csv",
            ".log",
        ):
            self.assertTrue(os.path.isfile(p + suffix), suffix)
            self.assertIn(p + suffix, r.stdout)
        self.assertIn("run report:  " + p + ".json", r.stdout)

    def test_train_bin_env_and_given_report(self):
        other = os.path.join(self.tmp, "elsewhere.json")
        r = self.run_sh("--prefix", self.prefix, "--report", other, TRAIN_BIN=self.train)
        self.assertEqual(r.returncode, 0, r.stderr)
        argv = self.calls()[0]
        self.assertEqual(
            argv[len(PROFILE_OPTS) + 2 :], [self.train, "--report", other]
        )  # not appended twice
        self.assertTrue(os.path.isfile(self.prefix + ".json"))  # copied next to the capture

    def test_wrapped_python_command(self):
        r = self.run_sh(
            "--prefix", self.prefix, "--", sys.executable, self.py, "/data", "--steps", "8"
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(
            self.calls()[0],
            ["profile"]
            + PROFILE_OPTS
            + ["--output=" + self.prefix, sys.executable, self.py, "/data", "--steps", "8"],
        )
        with open(self.prefix + ".json") as f:
            report = json.load(f)
        self.assertEqual(
            (report["images_per_s"], report["argv"]), (4236.5, ["/data", "--steps", "8"])
        )

    def test_program_failure_status(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--fail")
        self.assertEqual(r.returncode, 3)
        self.assertIn("nsys profile (nsys or the profiled program) failed (exit 3)", r.stderr)
        self.assertEqual(len(self.calls()), 1)  # no export or stats after a failed run

    def test_capture_never_started(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, FAKE_NSYS_NO_REP="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn("capture range never started", r.stderr)
        self.assertEqual(len(self.calls()), 1)

    def test_missing_binary(self):
        for dry in ((), ("--dry-run",)):
            r = self.run_sh(
                "--prefix",
                self.prefix,
                *dry,
                "--binary",
                os.path.join(self.tmp, "build", "train_resnet50"),
            )
            self.assertEqual(r.returncode, 2)
            self.assertIn(
                "expected an executable train_resnet50 at %s" % os.path.join(self.tmp, "build"),
                r.stderr,
            )
        r = self.run_sh("--prefix", self.prefix, "--binary", "train_resnet50_nowhere")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected train_resnet50_nowhere on PATH", r.stderr)
        self.assertFalse(os.path.exists(self.log))

    def test_dry_run_prints_commands(self):
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--binary", self.train, "--steps", "8")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(
            r.stdout.splitlines(),
            [
                "nsys profile "
                + " ".join(PROFILE_OPTS)
                + " --output=out/x %s --steps 8 --report out/x.json" % self.train,
                "%s --steps 8 --report out/x.untraced.json"
                % self.train,  # the untraced run, by default
                "nsys export --type=sqlite --force-overwrite=true --output=out/x.sqlite "
                "out/x.nsys-rep",
                "nsys stats "
                + STATS
                + " --format=csv --force-overwrite=true --output=out/x out/x.sqlite",
            ],
        )
        # Even a dry run asks the binary for the configuration, with the run's flags.
        self.assertEqual(self.calls(self.config_log), [["--print-config", "--steps", "8"]])

    def test_lean_drops_the_os_runtime_trace_and_nsys_opt_adds_options(self):
        """--lean captures with --trace=cuda,nvtx and the article's other options; --nsys-opt adds
        each option as given, after them; a value that is no option is a usage error."""
        r = self.run_sh(
            "--prefix",
            "out/x",
            "--dry-run",
            "--lean",
            "--nsys-opt",
            "--osrt-threshold=10000",
            "--nsys-opt=--cuda-flush-interval=10000",
            "--binary",
            self.train,
            "--steps",
            "8",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        first = r.stdout.splitlines()[0].split()
        self.assertEqual(first[:2], ["nsys", "profile"])
        article = PROFILE_OPTS[:-1]  # then the extra options, then --force-overwrite=true
        self.assertEqual(first[2 : 2 + len(article)], ["--trace=cuda,nvtx"] + article[1:])
        self.assertEqual(
            first[2 + len(article) : 5 + len(article)],
            ["--osrt-threshold=10000", "--cuda-flush-interval=10000", "--force-overwrite=true"],
        )
        r = self.run_sh(
            "--prefix", "out/x", "--dry-run", "--nsys-opt", "trace", "--binary", self.train
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "expected --nsys-opt to be an nsys profile option (starting with -), got 'trace'",
            r.stderr,
        )
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--binary", self.train, "--nsys-opt")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected a value after --nsys-opt", r.stderr)

    def test_the_configuration_comes_from_the_binary(self):
        """profile.sh asks train_resnet50 --print-config, once, with exactly the run's flags, and
        the run itself does not get --print-config."""
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--workers",
            "8",
            "--",
            "--cuda-graph",
            "--steps",
            "3",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(
            self.calls(self.config_log),
            [["--print-config", "--workers", "8", "--cuda-graph", "--steps", "3"]],
        )
        profile = self.calls()[0]
        self.assertNotIn("--print-config", profile)
        self.assertIn("--cuda-graph-trace=node", profile[: profile.index(self.train)])
        self.assertEqual(
            profile[profile.index(self.train) :],
            [
                self.train,
                "--workers",
                "8",
                "--cuda-graph",
                "--steps",
                "3",
                "--report",
                self.prefix + ".json",
            ],
        )

    def test_cuda_graph_runs_trace_graph_nodes(self):
        """A run whose configuration has cuda_graph (--cuda-graph, the last one given winning) adds
        nsys --cuda-graph-trace=node, for one process and for every rank's nsys; nothing else
        does."""
        node = "--cuda-graph-trace=node"
        cases = (
            (("--cuda-graph",), True),
            (("--cuda-graph=true",), True),
            (("--cuda-graph=false",), False),
            (("--cuda-graph", "--cuda-graph=0"), False),
            (("--cuda-graph=no", "--cuda-graph"), True),
            (("--synthetic",), False),
            ((), False),
        )
        for flags, traced in cases:
            for extra in ((), ("--nproc", "2")):
                r = self.run_sh(
                    "--prefix",
                    "out/x",
                    "--dry-run",
                    "--binary",
                    self.train,
                    *(extra + flags),
                    PROFILE_LAUNCHER="local",
                )
                self.assertEqual(r.returncode, 0, r.stderr)
                profile = r.stdout.splitlines()[0].split()
                self.assertEqual(node in profile, traced, (flags, extra, profile))
                if traced:  # an nsys option, before the program
                    self.assertLess(profile.index(node), profile.index(self.train))
        # What the binary answers decides, not the flags' spelling.
        r = self.run_sh(
            "--prefix",
            "out/x",
            "--dry-run",
            "--binary",
            self.train,
            "--steps",
            "2",
            FAKE_PRINT_CONFIG=json.dumps({"cuda_graph": True, "report": ""}),
        )
        self.assertIn(node, r.stdout.splitlines()[0].split())
        # A graph trace level of the user's own (--nsys-opt) replaces node: only theirs is passed.
        for opt in ("--cuda-graph-trace=graph", "--cuda-graph-trace=node"):
            r = self.run_sh(
                "--prefix",
                "out/x",
                "--dry-run",
                "--binary",
                self.train,
                "--nsys-opt=" + opt,
                "--cuda-graph",
            )
            self.assertEqual(r.returncode, 0, r.stderr)
            profile = r.stdout.splitlines()[0].split()
            self.assertEqual(
                [w for w in profile if w.startswith("--cuda-graph-trace")], [opt], profile
            )
        # A wrapped command is not train_resnet50: its flags are its own, and it is not asked.
        os.remove(self.config_log)
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--", "python3", "w.py", "--cuda-graph")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn(node, r.stdout)
        self.assertFalse(os.path.exists(self.config_log))

    def test_a_given_report_is_honoured(self):
        other = os.path.join(self.tmp, "elsewhere.json")
        for flags in (
            ("--report", other),
            ("--report=" + other),
            ("--report", "x.json", "--report=" + other),
        ):
            flags = (flags,) if isinstance(flags, str) else flags
            with self.subTest(flags=flags):
                r = self.run_sh("--prefix", "out/x", "--dry-run", "--binary", self.train, *flags)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertTrue(
                    r.stdout.splitlines()[0].endswith("%s %s" % (self.train, " ".join(flags))),
                    r.stdout,
                )  # not appended again
        # A real run with --report=PATH: the program writes PATH, copied beside the capture.
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--steps", "2", "--report=" + other
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.calls()[0][-4:], [self.train, "--steps", "2", "--report=" + other])
        with open(self.prefix + ".json") as f:
            self.assertEqual(json.load(f)["capture"]["steps"], 2)
        self.assertTrue(os.path.isfile(other))

    def test_refused_flags_stop_before_nsys(self):
        for extra in ((), ("--dry-run",), ("--nproc", "2")):
            with self.subTest(extra=extra):
                r = self.run_sh(
                    "--prefix",
                    self.prefix,
                    "--binary",
                    self.train,
                    *extra,
                    "--cuda-graph=maybe",
                    PROFILE_LAUNCHER="local",
                )
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                # The binary's own message, then profile.sh's.
                self.assertEqual(
                    r.stderr.splitlines()[0],
                    "train_resnet50: error: --cuda-graph: expected true or false, got 'maybe'",
                )
                self.assertIn(
                    "profile.sh: error: %s --print-config --cuda-graph=maybe failed (exit 2)"
                    % self.train,
                    r.stderr,
                )
                self.assertEqual(r.stdout, "")
                self.assertFalse(os.path.exists(self.log))  # nsys never ran
                self.assertFalse(os.path.exists(self.prefix + ".log"))

    def test_an_answer_that_is_not_the_configuration(self):
        for answer, why in (
            ("loading...", "got not JSON"),
            ("[1, 2]", "got not an object"),
            ('{"cuda_graph": "yes", "report": ""}', "got no boolean cuda_graph and string report"),
            ('{"steps": 8}', "got no boolean cuda_graph and string report"),
        ):
            with self.subTest(answer=answer):
                r = self.run_sh(
                    "--prefix", self.prefix, "--binary", self.train, FAKE_PRINT_CONFIG=answer
                )
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(
                    "profile.sh: error: expected %s --print-config to print the run's "
                    "configuration as one JSON object, %s" % (self.train, why),
                    r.stderr,
                )
                self.assertIn(answer, r.stderr)
                self.assertFalse(os.path.exists(self.log))

    def test_a_binary_that_cannot_run_stops_even_a_dry_run(self):
        plain = os.path.join(self.tmp, "plain")
        with open(plain, "w") as f:
            f.write("not a program\n")
        missing = os.path.join(self.tmp, "nowhere", "trainer")
        cases = [
            (
                ("--binary", missing),
                "--binary %s: no such file: expected an executable train_resnet50 at %s"
                % (missing, missing),
            ),
            (
                ("--binary", self.tmp),
                "--binary %s: is a directory, expected the train_resnet50 executable" % self.tmp,
            ),
            (("--binary=" + plain,), "--binary %s: is not an executable file" % plain),
            (
                ("--binary", "no_such_trainer"),
                "--binary no_such_trainer: expected no_such_trainer on PATH",
            ),
        ]
        for flags, message in cases:
            for dry in ((), ("--dry-run",)):
                with self.subTest(flags=flags, dry=dry):
                    r = self.run_sh("--prefix", self.prefix, *dry, *flags, "--steps", "2")
                    self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                    self.assertTrue(r.stderr.startswith("profile.sh: error: " + message), r.stderr)
                    self.assertEqual(len(r.stderr.splitlines()), 1)
                    self.assertEqual(r.stdout, "")
        r = self.run_sh("--prefix", self.prefix, "--dry-run", TRAIN_BIN=self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("profile.sh: error: TRAIN_BIN %s: is a directory" % self.tmp, r.stderr)
        r = self.run_sh("--prefix", self.prefix, "--dry-run", "--nproc", "2", "--binary", self.tmp)
        self.assertEqual(r.returncode, 2)
        self.assertIn("--binary %s: is a directory" % self.tmp, r.stderr)
        self.assertFalse(os.path.exists(self.log))
        self.assertFalse(os.path.exists(self.config_log))

    def test_outputs_that_cannot_be_written_stop_before_nsys(self):
        os.makedirs(os.path.dirname(self.prefix))
        fifo = self.prefix + ".log"
        os.mkfifo(fifo)
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(
            "profile.sh: error: --prefix %s: %s: is a FIFO" % (self.prefix, fifo), r.stderr
        )
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        os.remove(fifo)
        os.mkdir(self.prefix + ".sqlite")
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(
            "--prefix %s: %s.sqlite: is a directory" % (self.prefix, self.prefix), r.stderr
        )
        os.rmdir(self.prefix + ".sqlite")
        with open(self.prefix + "_analysis", "w") as f:
            f.write("x")
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--analyze")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("%s_analysis: is not a directory" % self.prefix, r.stderr)
        r = self.run_sh(
            "--prefix", os.path.join(self.prefix + "_analysis", "x"), "--binary", self.train
        )
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("%s_analysis is not a directory" % self.prefix, r.stderr)
        self.assertFalse(os.path.exists(self.log))  # nsys never ran
        self.assertFalse(os.path.exists(self.prefix + ".log"))

    def test_outputs_follow_symlinks_and_keep_dev_null(self):
        elsewhere = os.path.join(self.tmp, "elsewhere")
        os.makedirs(elsewhere)
        os.makedirs(os.path.dirname(self.prefix))
        for suffix in (".json", ".nsys-rep", ".log"):
            os.symlink(os.path.join(elsewhere, "run1" + suffix), self.prefix + suffix)
        with open(os.path.join(elsewhere, "run1.nsys-rep"), "w") as f:
            f.write("stale")
        os.symlink(os.devnull, self.prefix + "_nvtx_sum.csv")
        # A wrapped command's JSON line is the report profile.sh writes itself.
        r = self.run_sh("--prefix", self.prefix, "--", sys.executable, self.py, "/data")
        self.assertEqual(r.returncode, 0, r.stderr)
        for suffix in (".json", ".nsys-rep", ".log", "_nvtx_sum.csv"):
            self.assertTrue(os.path.islink(self.prefix + suffix), suffix)
        with open(os.path.join(elsewhere, "run1.json")) as f:
            self.assertEqual(json.load(f)["images_per_s"], 4236.5)
        with open(os.path.join(elsewhere, "run1.nsys-rep")) as f:
            self.assertEqual(
                f.read(), "rep"
            )  # the stale target removed, the new capture written through the link
        with open(os.path.join(elsewhere, "run1.log")) as f:
            self.assertIn("loading...", f.read())
        self.assertEqual(
            sorted(os.listdir(elsewhere)), ["run1.json", "run1.log", "run1.nsys-rep"]
        )  # no staging
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))
        # A FIFO where a stale capture would be is neither removed nor replaced: refused.
        os.remove(self.prefix + ".nsys-rep")
        os.mkfifo(self.prefix + ".nsys-rep")
        r = self.run_sh("--prefix", self.prefix, "--", sys.executable, self.py, "/data")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(self.prefix + ".nsys-rep").st_mode))


class ProfileShUntracedTest(ProfileShCase):
    """The untraced run after each capture: the same command without nsys, with a report of its
    own."""

    def setUp(self):
        super().setUp()
        self.order_log = os.path.join(self.tmp, "order.jsonl")

    def order(self):
        return self.calls(self.order_log)

    def test_the_untraced_run_follows_the_capture(self):
        other = os.path.join(self.tmp, "mine.json")
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--steps",
            "2",
            "--report",
            other,
            FAKE_ORDER_LOG=self.order_log,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        self.assertEqual(
            self.order(),
            [
                ["nsys", "profile", p],
                ["train", other, True],
                ["train", p + ".untraced.json", False],
                ["nsys", "export", p + ".sqlite"],
                ["nsys", "stats", p],
            ],
        )
        with open(p + ".untraced.json") as f:
            # No nsys, and the user's --report gave way to profile.sh's own.
            self.assertEqual(
                json.load(f)["argv"], ["--steps", "2", "--report", p + ".untraced.json"]
            )
        self.assertEqual(
            [c[0] for c in self.calls()], ["profile", "export", "stats"]
        )  # nsys saw no second run
        with open(p + ".untraced.log") as f:
            self.assertEqual(f.read(), "fake train_resnet50 untraced\n")
        with open(p + ".log") as f:
            self.assertNotIn("untraced", f.read())
        self.assertIn("untraced:    %s.untraced.json" % p, r.stdout)
        self.assertIn("untraced log: %s.untraced.log" % p, r.stdout)
        self.assertIn(
            "profile.sh: %s --steps 2 --report %s.untraced.json" % (self.train, p), r.stderr
        )

    def test_the_untraced_run_never_shares_the_captures_checkpoints(self):
        ckpt = os.path.join(self.tmp, "ckpt")
        os.makedirs(ckpt)
        for e in (1, 2):
            with open(os.path.join(ckpt, "checkpoint-e%06d.ckpt" % e), "w") as f:
                f.write("epoch %d" % e)
        for resume in (True, False):
            with self.subTest(resume=resume):
                flags = ["--epochs", "3", "--checkpoint-dir", ckpt] + (
                    ["--resume"] if resume else []
                )
                r = self.run_sh("--prefix", self.prefix, "--binary", self.train, *flags)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(self.prefix + ".json") as f:
                    self.assertEqual(json.load(f)["argv"][: len(flags)], flags)
                with open(self.prefix + ".untraced.json") as f:
                    untraced = json.load(f)
                args = untraced["argv"]
                private = args[args.index("--checkpoint-dir") + 1]
                self.assertNotEqual(os.path.realpath(private), os.path.realpath(ckpt))
                self.assertNotIn(ckpt, args)
                self.assertEqual("--resume" in args, resume)
                # With --resume a copy of the checkpoint the capture resumed from, and nothing else.
                self.assertEqual(
                    untraced["checkpoint_files"],
                    {"checkpoint-e000002.ckpt": "epoch 2"} if resume else {},
                )
                self.assertFalse(os.path.exists(private), "removed after the untraced run")
                self.assertEqual(
                    sorted(os.listdir(ckpt)), ["checkpoint-e000001.ckpt", "checkpoint-e000002.ckpt"]
                )

    def test_no_untraced(self):
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--no-untraced",
            FAKE_ORDER_LOG=self.order_log,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(
            [o[:2] for o in self.order()],
            [
                ["nsys", "profile"],
                ["train", self.prefix + ".json"],
                ["nsys", "export"],
                ["nsys", "stats"],
            ],
        )
        for absent in (".untraced.json", ".untraced.log"):
            self.assertFalse(os.path.exists(self.prefix + absent), absent)
        self.assertNotIn("untraced", r.stdout)
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--no-untraced", "--binary", self.train)
        self.assertEqual(len(r.stdout.splitlines()), 3)
        self.assertNotIn("untraced", r.stdout)

    def test_a_wrapped_commands_untraced_report_is_its_json_line(self):
        r = self.run_sh("--prefix", self.prefix, "--", sys.executable, self.py, "/data")
        self.assertEqual(r.returncode, 0, r.stderr)
        for suffix, ips in ((".json", 4236.5), (".untraced.json", 5000.0)):
            with open(self.prefix + suffix) as f:
                self.assertEqual(json.load(f)["images_per_s"], ips, suffix)

    def test_a_failing_untraced_run_stops_with_its_status(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--fail-untraced")
        self.assertEqual(r.returncode, 4, r.stderr)
        self.assertIn(
            "profile.sh: error: the untraced run failed (exit 4); output in %s.untraced.log"
            % self.prefix,
            r.stderr,
        )
        self.assertEqual([c[0] for c in self.calls()], ["profile"])  # no export after it

    def test_untraced_outputs_are_checked_up_front(self):
        os.makedirs(self.prefix + ".untraced.json")
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train)
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(
            "profile.sh: error: --prefix %s: %s.untraced.json: is a directory"
            % (self.prefix, self.prefix),
            r.stderr,
        )
        self.assertFalse(os.path.exists(self.log))
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--no-untraced")
        self.assertEqual(r.returncode, 0, r.stderr)  # not an output without the untraced run


class ProfileShRepeatTest(ProfileShCase):
    """--repeat N: N captures, each followed by its untraced run, outputs named PREFIX.k."""

    def setUp(self):
        super().setUp()
        self.order_log = os.path.join(self.tmp, "order.jsonl")

    def test_usage_errors(self):
        for value in ("0", "-1", "x", ""):
            r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--repeat", value)
            self.assertEqual(r.returncode, 2, value)
            self.assertIn(
                "expected --repeat to be a positive integer (captures, each with its untraced "
                "run), got '%s'" % value,
                r.stderr,
            )
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--repeat",
            "2",
            "--nproc",
            "2",
            "--dry-run",
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "--repeat 2 conflicts with --nproc 2: repeated captures of several ranks are not "
            "supported",
            r.stderr,
        )
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--repeat=1",
            "--nproc",
            "2",
            "--dry-run",
            PROFILE_LAUNCHER="local",
        )
        self.assertEqual(
            r.returncode, 0, r.stderr
        )  # one capture of several ranks is the plain --nproc
        self.assertFalse(os.path.exists(self.log))

    def test_captures_alternate_with_untraced_runs(self):
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--repeat",
            "3",
            "--steps",
            "2",
            FAKE_ORDER_LOG=self.order_log,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        expected = []
        for k in (1, 2, 3):
            expected += [
                ["nsys", "profile", "%s.%d" % (p, k)],
                ["train", "%s.%d.json" % (p, k), True],
                ["train", "%s.%d.untraced.json" % (p, k), False],
            ]
        for k in (1, 2, 3):
            expected += [
                ["nsys", "export", "%s.%d.sqlite" % (p, k)],
                ["nsys", "stats", "%s.%d" % (p, k)],
            ]
        self.assertEqual(self.calls(self.order_log), expected)
        for k in (1, 2, 3):
            for suffix in (".nsys-rep", ".sqlite", ".json", ".untraced.json") + STATS_CSVS:
                self.assertTrue(os.path.isfile("%s.%d%s" % (p, k, suffix)), suffix)
            self.assertIn("capture %d:\ncapture:     %s.%d.nsys-rep" % (k, p, k), r.stdout)
        for absent in (".nsys-rep", ".sqlite", ".json", ".untraced.json", ".4.nsys-rep"):
            self.assertFalse(os.path.exists(p + absent), absent)
        with open(p + ".log") as f:  # one log of every capture, one of every untraced run
            self.assertEqual(f.read().count("fake train_resnet50 traced"), 3)
        with open(p + ".untraced.log") as f:
            self.assertEqual(f.read(), "fake train_resnet50 untraced\n" * 3)

    def test_dry_run_lists_every_command_in_order(self):
        r = self.run_sh(
            "--prefix",
            "out/x",
            "--dry-run",
            "--repeat",
            "2",
            "--analyze",
            "--binary",
            self.train,
            "--steps",
            "8",
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        lines = r.stdout.splitlines()
        nsys = "nsys profile " + " ".join(PROFILE_OPTS)
        self.assertEqual(
            lines[:8],
            [
                nsys + " --output=out/x.1 %s --steps 8 --report out/x.1.json" % self.train,
                "%s --steps 8 --report out/x.1.untraced.json" % self.train,
                nsys + " --output=out/x.2 %s --steps 8 --report out/x.2.json" % self.train,
                "%s --steps 8 --report out/x.2.untraced.json" % self.train,
                "nsys export --type=sqlite --force-overwrite=true --output=out/x.1.sqlite "
                "out/x.1.nsys-rep",
                "nsys stats "
                + STATS
                + " --format=csv --force-overwrite=true --output=out/x.1 out/x.1.sqlite",
                "nsys export --type=sqlite --force-overwrite=true --output=out/x.2.sqlite "
                "out/x.2.nsys-rep",
                "nsys stats "
                + STATS
                + " --format=csv --force-overwrite=true --output=out/x.2 out/x.2.sqlite",
            ],
        )
        python, analysis = lines[8].split(" ", 1)  # python: whichever has matplotlib here
        self.assertIn("python", os.path.basename(python))
        self.assertEqual(
            analysis,
            "%s out/x.1.sqlite out/x.2.sqlite --repeats --report out/x.1.json "
            "--report out/x.2.json --untraced out/x.1.untraced.json "
            "--untraced out/x.2.untraced.json --repeat-out out/x.1_analysis "
            "--repeat-out out/x.2_analysis --out out/x_analysis --repeats-json out/x_repeats.json "
            "--repeats-md out/x_repeats.md" % os.path.join(REPO, "scripts", "analyze.py"),
        )
        self.assertEqual(len(lines), 9)
        # One capture with --analyze: the analysis gets its untraced report.
        r = self.run_sh("--prefix", "out/x", "--dry-run", "--analyze", "--binary", self.train)
        self.assertTrue(
            r.stdout.splitlines()[-1].endswith(
                "analyze.py out/x.sqlite --report out/x.json --untraced out/x.untraced.json "
                "--out out/x_analysis"
            ),
            r.stdout,
        )

    def test_every_capture_output_is_checked_up_front(self):
        os.makedirs(os.path.dirname(self.prefix))
        os.mkfifo(self.prefix + ".2.sqlite")
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--repeat", "2")
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("--prefix %s: %s.2.sqlite: is a FIFO" % (self.prefix, self.prefix), r.stderr)
        os.remove(self.prefix + ".2.sqlite")
        os.mkdir(self.prefix + "_repeats.md")
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--repeat", "2", "--analyze"
        )
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn(
            "--prefix %s: %s_repeats.md: is a directory" % (self.prefix, self.prefix), r.stderr
        )
        with open(self.prefix + ".1_analysis", "w") as f:
            f.write("x")
        os.rmdir(self.prefix + "_repeats.md")
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--repeat", "2", "--analyze"
        )
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("%s.1_analysis: is not a directory" % self.prefix, r.stderr)
        self.assertFalse(os.path.exists(self.log))  # nsys never ran

    @unittest.skipUnless(HAVE_MPL, "matplotlib not installed for %s" % sys.executable)
    def test_analyze_picks_the_median_capture(self):
        exports = os.path.join(self.tmp, "exports")
        os.mkdir(exports)
        for k in (1, 2, 3):
            tracer_cost_export().write(os.path.join(exports, "capture%d.sqlite" % k))
        # Runs in order: capture 1, untraced 1, capture 2, ...: traced 320, 250, 300;
        # untraced 480, 500, 520.
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--repeat",
            "3",
            "--steps",
            "3",
            "--analyze",
            FAKE_NSYS_SQLITE_DIR=exports,
            FAKE_IPS="320,480,250,500,300,520",
            FAKE_IPS_STATE=os.path.join(self.tmp, "ips_state"),
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        with open(p + "_analysis/summary.json") as f:
            s = json.load(f)
        self.assertEqual(s["export"], p + ".3.sqlite")  # 300 images/s: the median of 320, 250, 300
        self.assertEqual(
            [u["images_per_s"] for u in s["capture_cost"]["throughput"]["untraced_runs"]],
            [480.0, 500.0, 520.0],
        )
        self.assertTrue(os.path.isfile(p + "_analysis/fig3_timeline.png"))
        for k in (1, 2, 3):
            self.assertEqual(
                sorted(os.listdir("%s.%d_analysis" % (p, k))), ["summary.json", "summary.md"]
            )
        with open(p + "_repeats.json") as f:
            rep = json.load(f)
        self.assertEqual((rep["captures"], rep["median_capture"]), (3, 3))
        with open(p + "_repeats.md") as f:
            md = f.read()
        self.assertIn("| traced images/s | 250.0 | 300.0 | 320.0 | 320.0 / 250.0 / 300.0 |", md)
        self.assertIn(
            "| untraced images/s (each run) | 480.0 | 500.0 | 520.0 | 480.0 / 500.0 / 520.0 |", md
        )
        self.assertIn("| traced / untraced | 0.500 | 0.600 | 0.640 | 0.640 / 0.500 / 0.600 |", md)
        self.assertIn("| CUDA calls per step, loader/gpu | 11.000 | 11.000 | 11.000 |", md)
        self.assertIn("| step_count | 3 of 3 |", md)
        self.assertIn("repeats:     %s_repeats.md" % p, r.stdout)


class ProfileShRanksTest(ProfileShCase):
    """--nproc: one nsys per rank under torchrun (a fake one) or scripts/launch_local.sh."""

    def add_torchrun(self):
        self.fake("torchrun", FAKE_TORCHRUN)

    def path_without_torchrun(self):
        """PATH with the fake nsys first and no torchrun: a directory that holds one (Debian's
        python3-torch puts it in /usr/bin, beside dirname and the rest) is replaced by a directory
        of links to everything else in it."""
        dirs = []
        for i, d in enumerate(d for d in os.environ["PATH"].split(os.pathsep) if d):
            if os.access(os.path.join(d, "torchrun"), os.X_OK):
                mirror = os.path.join(self.tmp, "path_without_torchrun_%d" % i)
                os.makedirs(mirror, exist_ok=True)
                for name in os.listdir(d):
                    if name != "torchrun" and not os.path.lexists(os.path.join(mirror, name)):
                        os.symlink(os.path.join(d, name), os.path.join(mirror, name))
                d = mirror
            dirs.append(d)
        return os.pathsep.join([self.bin] + dirs)

    def post_commands(self, prefix, n=2):
        out = []
        for r in range(n):
            p = "%s.rank%d" % (prefix, r)
            out += [
                [
                    "export",
                    "--type=sqlite",
                    "--force-overwrite=true",
                    "--output=" + p + ".sqlite",
                    p + ".nsys-rep",
                ],
                [
                    "stats",
                    STATS,
                    "--format=csv",
                    "--force-overwrite=true",
                    "--output=" + p,
                    p + ".sqlite",
                ],
            ]
        return out

    def test_nproc_usage_errors(self):
        for value in ("0", "-1", "two", "1.5", ""):
            r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--nproc", value)
            self.assertEqual(r.returncode, 2, value)
            self.assertIn(
                "expected --nproc to be a positive integer (ranks on this machine), got '%s'"
                % value,
                r.stderr,
            )
        r = self.run_sh("--prefix", self.prefix, "--nproc")
        self.assertEqual(r.returncode, 2)
        self.assertIn("expected a value after --nproc", r.stderr)
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--nproc=2", PROFILE_LAUNCHER="mpirun"
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "expected PROFILE_LAUNCHER to be torchrun, local or auto, got 'mpirun'", r.stderr
        )
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc=2",
            PROFILE_LAUNCHER="torchrun",
            path=self.path_without_torchrun(),
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("torchrun is not on PATH (PROFILE_LAUNCHER=torchrun)", r.stderr)
        self.assertFalse(os.path.exists(self.log))

    def test_nproc_dry_run_picks_the_launcher(self):
        args = (
            "--prefix",
            "out/x",
            "--nproc",
            "2",
            "--dry-run",
            "--binary",
            self.train,
            "--steps",
            "8",
        )
        nsys = (
            "nsys profile "
            + " ".join(PROFILE_OPTS)
            + " --output=out/x.rank%%q{RANK} %s --steps 8 --report out/x.json" % self.train
        )
        post = [" ".join(["nsys"] + c) for c in self.post_commands("out/x")]
        bare = "%s --steps 8 --report out/x.untraced.json" % self.train  # the untraced run: no nsys
        local = [LAUNCH_LOCAL + " 2 -- " + nsys, LAUNCH_LOCAL + " 2 -- " + bare] + post
        torchrun = [
            "torchrun --standalone --nproc-per-node 2 --no-python " + nsys,
            "torchrun --standalone --nproc-per-node 2 --no-python " + bare,
        ] + post
        r = self.run_sh(*args, path=self.path_without_torchrun())
        self.assertEqual((r.returncode, r.stdout.splitlines()), (0, local), r.stderr)
        self.add_torchrun()
        r = self.run_sh(*args)
        self.assertEqual((r.returncode, r.stdout.splitlines()), (0, torchrun), r.stderr)
        r = self.run_sh(*args, PROFILE_LAUNCHER="local")
        self.assertEqual(r.stdout.splitlines(), local)
        self.assertFalse(os.path.exists(self.log))

    def check_ranks_run(self, r, launcher_calls):
        """The outputs and nsys calls of a two-rank run of the fake train_resnet50 with
        --steps 3."""
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        profile = (
            ["profile"]
            + PROFILE_OPTS
            + [
                "--output=" + p + ".rank%q{RANK}",
                self.train,
                "--steps",
                "3",
                "--report",
                p + ".json",
            ]
        )
        calls = self.calls()
        self.assertEqual(calls[:2], [profile, profile])
        self.assertEqual(calls[2:], self.post_commands(p))
        untraced = [self.train, "--steps", "3", "--report", p + ".untraced.json"]
        self.assertEqual(
            launcher_calls,
            [
                ["--standalone", "--nproc-per-node", "2", "--no-python", "nsys"] + profile,
                ["--standalone", "--nproc-per-node", "2", "--no-python"] + untraced,
            ]
            if launcher_calls
            else [],
        )
        for rank in (0, 1):
            rp = "%s.rank%d" % (p, rank)
            for suffix in (".nsys-rep", ".sqlite", ".json") + STATS_CSVS:
                self.assertTrue(os.path.isfile(rp + suffix), rp + suffix)
                self.assertIn(rp + suffix, r.stdout)
            with open(rp + ".json") as f:
                self.assertEqual(json.load(f)["dist"], {"rank": rank, "world_size": 2})
            # Each rank's untraced run names its report itself, from PREFIX.untraced.json.
            with open("%s.untraced.rank%d.json" % (p, rank)) as f:
                self.assertEqual(json.load(f)["argv"], untraced[1:])
            self.assertIn("untraced:    %s.untraced.rank%d.json" % (p, rank), r.stdout)
        self.assertIn("log:         " + p + ".log", r.stdout)
        for absent in (".nsys-rep", ".sqlite", ".json", ".rank2.nsys-rep"):
            self.assertFalse(os.path.exists(p + absent), absent)

    def test_nproc_under_torchrun(self):
        self.add_torchrun()
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--nproc", "2", "--steps", "3"
        )
        self.check_ranks_run(r, self.calls(self.torchrun_log))
        self.assertIn(
            "profile.sh: torchrun --standalone --nproc-per-node 2 --no-python nsys profile",
            r.stderr,
        )

    def test_nproc_without_torchrun_uses_launch_local(self):
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc",
            "2",
            "--steps",
            "3",
            path=self.path_without_torchrun(),
        )
        self.check_ranks_run(r, [])
        self.assertIn("profile.sh: %s 2 -- nsys profile" % LAUNCH_LOCAL, r.stderr)
        self.assertFalse(os.path.exists(self.torchrun_log))
        # PROFILE_LAUNCHER=local even where torchrun is on PATH.
        self.add_torchrun()
        os.remove(self.log)
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc",
            "2",
            "--steps",
            "3",
            PROFILE_LAUNCHER="local",
        )
        self.check_ranks_run(r, [])

    def test_nproc_given_report_copied_per_rank(self):
        self.add_torchrun()
        other = os.path.join(self.tmp, "elsewhere.json")
        r = self.run_sh(
            "--prefix", self.prefix, "--binary", self.train, "--nproc", "2", "--report", other
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.calls()[0][-2:], ["--report", other])  # not appended twice
        for rank in (0, 1):
            with open("%s.rank%d.json" % (self.prefix, rank)) as f:
                self.assertEqual(json.load(f)["dist"]["rank"], rank)
            self.assertTrue(os.path.isfile(os.path.join(self.tmp, "elsewhere.rank%d.json" % rank)))

    def test_nproc_failures(self):
        self.add_torchrun()
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc",
            "2",
            FAKE_NSYS_NO_REP_RANK="1",
        )
        self.assertEqual(r.returncode, 1)
        self.assertIn(
            "nsys produced no %s.rank1.nsys-rep: the capture range never started" % self.prefix,
            r.stderr,
        )
        self.assertEqual(len(self.calls()), 2)  # no export or stats
        os.remove(self.log)
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--nproc", "2", "--fail")
        self.assertEqual(r.returncode, 1)
        self.assertIn(
            "the ranks' nsys profile (the launcher, nsys or the profiled program) failed (exit 1 "
            "from torchrun)",
            r.stderr,
        )
        os.remove(self.log)
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc",
            "2",
            "--fail",
            PROFILE_LAUNCHER="local",
        )
        self.assertEqual(
            r.returncode, 3
        )  # launch_local.sh passes the first failing rank's status on
        self.assertIn("the profiled program) failed (exit 3 from local)", r.stderr)

    @unittest.skipUnless(HAVE_MPL, "matplotlib not installed for %s" % sys.executable)
    def test_nproc_analyze(self):
        exports = os.path.join(self.tmp, "exports")
        os.mkdir(exports)
        for rank in (0, 1):
            rank_export(rank).write(os.path.join(exports, "rank%d.sqlite" % rank))
        r = self.run_sh(
            "--prefix",
            self.prefix,
            "--binary",
            self.train,
            "--nproc",
            "2",
            "--steps",
            "3",
            "--analyze",
            path=self.path_without_torchrun(),
            FAKE_NSYS_SQLITE_DIR=exports,
            PYTHON=sys.executable,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        p = self.prefix
        with open(p + "_ranks_analysis/ranks.json") as f:
            ranks = json.load(f)
        self.assertEqual(
            ranks["analysis_dirs"], ["../run1.rank0_analysis", "../run1.rank1_analysis"]
        )
        self.assertEqual(ranks["reports"], [p + ".rank0.json", p + ".rank1.json"])
        self.assertEqual(ranks["stragglers"][2]["straggler"], 1)
        self.assertTrue(ranks["all_checks_pass"], ranks["check_details"])
        for rank in (0, 1):
            self.assertTrue(os.path.isfile("%s.rank%d_analysis/fig3_timeline.png" % (p, rank)))
            self.assertIn("analysis:    %s.rank%d_analysis/summary.md" % (p, rank), r.stdout)
        self.assertIn("ranks:       %s_ranks_analysis/ranks.md" % p, r.stdout)
        self.assertFalse(os.path.exists(p + "_analysis"))


class ProfileShGuardTest(ProfileShCase):
    """What profile.sh checks before it touches anything (the probe of the binary that never trains,
    outputs inside the dataset or named twice, --nproc's bound, a % in --prefix), what it removes
    and lists, and how it stops on a signal sent to it alone."""

    def setUp(self):
        super().setUp()
        self.strict = self.fake(
            "train_resnet50", FAKE_STRICT_TRAIN, os.path.join(self.tmp, "strict")
        )
        self.trained = os.path.join(self.tmp, "trained.jsonl")

    def test_the_probe_never_trains(self):
        """--print-config comes first: a last flag without its value cannot take it as its value
        (the binary refuses the line, its message passed on, exit 2), and the user's own
        --print-config (=false would make the probe train) is refused."""
        for dry in ((), ("--dry-run",)):
            for flag in ("--report", "--checkpoint-dir", "--data"):
                r = self.run_sh(
                    "--prefix",
                    self.prefix,
                    *dry,
                    "--binary",
                    self.strict,
                    "--steps",
                    "2",
                    flag,
                    cwd=self.tmp,
                    FAKE_TRAINED=self.trained,
                )
                self.assertEqual(r.returncode, 2, (dry, flag, r.stderr))
                self.assertIn("Option '%s' is missing an argument" % flag[2:], r.stderr)
                self.assertIn(
                    "%s --print-config --steps 2 %s failed (exit 2)" % (self.strict, flag),
                    r.stderr,
                )
                self.assertFalse(os.path.exists(self.trained), (dry, flag))
                self.assertFalse(os.path.lexists(os.path.join(self.tmp, "--print-config")))
        for given in ("--print-config=false", "--print-config"):
            r = self.run_sh(
                "--prefix",
                self.prefix,
                "--binary",
                self.strict,
                given,
                cwd=self.tmp,
                FAKE_TRAINED=self.trained,
            )
            self.assertEqual(r.returncode, 2, given)
            self.assertIn("profile.sh: error: %s: " % given, r.stderr)
            self.assertFalse(os.path.exists(self.trained))
        self.assertFalse(os.path.exists(self.log))

    @unittest.skipUnless(
        os.access(os.path.join(REPO, "build", "bin", "train_resnet50"), os.X_OK),
        "build/bin/train_resnet50 not built",
    )
    def test_the_probe_with_the_real_binary(self):
        """The real train_resnet50 takes --print-config first and refuses a last flag without its
        value."""
        binary = os.path.join(REPO, "build", "bin", "train_resnet50")
        work = os.path.join(self.tmp, "work")
        os.mkdir(work)
        r = self.run_sh(
            "--prefix",
            "out/x",
            "--dry-run",
            "--binary",
            binary,
            "--device",
            "cpu",
            "--data",
            self.tmp,
            "--checkpoint-dir",
            cwd=work,
        )
        self.assertEqual(r.returncode, 2, r.stderr)
        self.assertIn("checkpoint-dir", r.stderr.splitlines()[0])
        self.assertIn("--print-config --device cpu --data", r.stderr)
        self.assertEqual(os.listdir(work), [])  # nothing written

    def test_a_prefix_inside_the_dataset_is_refused_before_anything_is_removed(self):
        data = os.path.join(self.tmp, "data")
        meta = os.path.join(data, "food-101", "meta")
        os.makedirs(meta)
        for name in ("test.json", "test.log"):
            with open(os.path.join(meta, name), "w") as f:
                f.write("keep")
        for dry in ((), ("--dry-run",)):
            for root in (data, os.path.join(data, "food-101")):
                r = self.run_sh(
                    "--prefix",
                    os.path.join(meta, "test"),
                    *dry,
                    "--binary",
                    self.train,
                    "--data",
                    root,
                )
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(
                    "profile.sh: error: --prefix %s: %s: inside the dataset --data %s reads (%s)"
                    % (
                        os.path.join(meta, "test"),
                        os.path.join(meta, "test.log"),
                        root,
                        os.path.join(data, "food-101"),
                    ),
                    r.stderr,
                )
        for name in ("test.json", "test.log"):
            with open(os.path.join(meta, name)) as f:
                self.assertEqual(f.read(), "keep")
        self.assertFalse(os.path.exists(self.log))
        # Beside the dataset (--data's root holds food-101/): fine.
        r = self.run_sh("--prefix", os.path.join(data, "x"), "--binary", self.train, "--data", data)
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_stale_csvs_are_removed_and_only_written_files_listed(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, "--no-untraced")
        self.assertEqual(r.returncode, 0, r.stderr)
        for suffix in STATS_CSVS:
            self.assertTrue(os.path.isfile(self.prefix + suffix))
        for prefix in (self.prefix, os.path.join(self.tmp, "fresh")):
            r = self.run_sh(
                "--prefix", prefix, "--binary", self.train, "--no-untraced", FAKE_NSYS_NO_CSV="1"
            )
            self.assertEqual(r.returncode, 0, r.stderr)
            for suffix in STATS_CSVS:
                self.assertFalse(os.path.exists(prefix + suffix), suffix)
                self.assertNotIn(suffix, r.stdout)
                self.assertIn(prefix + suffix, r.stderr)  # the warning names it
            self.assertIn("capture:     %s.nsys-rep" % prefix, r.stdout)
            self.assertIn("sqlite:      %s.sqlite" % prefix, r.stdout)

    def test_a_given_output_that_is_one_of_the_prefixs(self):
        p = self.prefix
        for report in (p + ".log", p + ".nsys-rep", p + ".untraced.json", p + "_nvtx_sum.csv"):
            r = self.run_sh("--prefix", p, "--binary", self.train, "--report", report)
            self.assertEqual(r.returncode, 2, report)
            self.assertIn(
                "profile.sh: error: --report %s: is %s, an output of --prefix %s"
                % (report, report, p),
                r.stderr,
            )
            self.assertFalse(os.path.exists(self.log))
        r = self.run_sh(
            "--prefix", p, "--repeat", "2", "--binary", self.train, "--report", p + ".1.json"
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("--report %s: is %s.1.json, an output" % (p + ".1.json", p), r.stderr)
        # Under --nproc each rank's file (.rank<r> before the extension) is compared.
        r = self.run_sh(
            "--prefix",
            p,
            "--nproc",
            "2",
            "--dry-run",
            "--binary",
            self.train,
            "--report",
            p + ".sqlite",
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "--report %s: is %s.rank0.sqlite (rank 0's), an output of --prefix"
            % (p + ".sqlite", p),
            r.stderr,
        )
        r = self.run_sh("--prefix", p, "--binary", self.train, "--checkpoint-dir", p + ".log")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--checkpoint-dir %s: is %s.log, an output" % (p + ".log", p), r.stderr)
        config = {"cuda_graph": False, "report": "", "torch_profiler_trace": p + ".sqlite"}
        r = self.run_sh("--prefix", p, "--binary", self.train, FAKE_PRINT_CONFIG=json.dumps(config))
        self.assertEqual(r.returncode, 2)
        self.assertIn(
            "--torch-profiler-trace %s: is %s.sqlite, an output" % (p + ".sqlite", p), r.stderr
        )
        self.assertFalse(os.path.exists(self.log))
        # The run report itself is fine: the program writes it in place.
        r = self.run_sh("--prefix", p, "--binary", self.train, "--report", p + ".json")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("run report:  %s.json" % p, r.stdout)

    def stop_by_signal(self, sig):
        pidfile = os.path.join(self.tmp, "train.pid")
        proc = subprocess.Popen(
            [BASH, SCRIPT, "--prefix", self.prefix, "--binary", self.train, "--hang"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=self.sh_env(FAKE_PIDFILE=pidfile),
            start_new_session=True,  # only the test's signal reaches profile.sh
        )
        self.kill_at_end(proc.pid)
        for _ in range(600):
            if os.path.exists(pidfile) or proc.poll() is not None:
                break
            time.sleep(0.05)
        if not os.path.exists(pidfile):
            self.fail("the program never started: %s" % (proc.communicate(timeout=60),))
        with open(pidfile) as f:
            train = int(f.read())
        self.kill_at_end(train)
        os.kill(proc.pid, sig)  # profile.sh alone, as `kill PID` and schedulers send it
        out, err = proc.communicate(timeout=60)
        return proc.returncode, err, train

    def test_a_signal_to_profile_sh_alone_stops_its_children(self):
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            status, err, train = self.stop_by_signal(sig)
            self.assertEqual(status, 128 + sig, err)
            # The Python scripts' one line (common/exit_status.exit_with()); none for SIGHUP.
            word = {signal.SIGTERM: "terminated", signal.SIGINT: "interrupted"}.get(sig)
            if word:
                self.assertIn("profile.sh: %s\n" % word, err)
            self.assertFalse(alive(train), "the program outlived profile.sh")
            self.assertFalse(os.path.exists(self.prefix + ".json"))
            self.assertFalse(os.path.exists(self.prefix + ".nsys-rep"))
            os.remove(os.path.join(self.tmp, "train.pid"))

    def test_nsys_failing_is_not_blamed_on_the_program(self):
        r = self.run_sh("--prefix", self.prefix, "--binary", self.train, FAKE_NSYS_PROFILE_FAIL="1")
        self.assertEqual(r.returncode, 1)
        self.assertIn(
            "profile.sh: error: nsys profile (nsys or the profiled program) failed (exit 1); "
            "output in %s.log" % self.prefix,
            r.stderr,
        )

    def test_nproc_beyond_the_launchers_limit(self):
        for dry in ((), ("--dry-run",)):
            r = self.run_sh("--prefix", self.prefix, *dry, "--binary", self.train, "--nproc", "65")
            self.assertEqual(r.returncode, 2)
            self.assertIn(
                "expected --nproc to be at most 64 (ranks on this machine), got '65'", r.stderr
            )
        r = self.run_sh(
            "--prefix", self.prefix, "--dry-run", "--binary", self.train, "--nproc", "064"
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertFalse(os.path.exists(self.log))

    def test_a_percent_in_the_prefix(self):
        for prefix in ("out/a%p", "out/%q{RANK}x", "out/100%"):
            r = self.run_sh("--prefix", prefix, "--dry-run", "--binary", self.train)
            self.assertEqual(r.returncode, 2, prefix)
            self.assertIn(
                "expected --prefix without '%%' (nsys profile expands %%p, %%q{VAR}, ... in its "
                "--output), got '%s'" % prefix,
                r.stderr,
            )


if __name__ == "__main__":
    unittest.main()
