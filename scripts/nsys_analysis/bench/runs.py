"""How benchmarks.py runs the workload's programs: directly (timing the teardown after the report
line) or captured by scripts/profile.sh and analysed; the JSON files its commands read and write."""

import json
import os
import time
from typing import NamedTuple, Optional

from ..capture.pipeline import analyze
from ..common import runner
from ..common.files import make_dirs, write_text
from ..common.paths import PROFILE_SH, default_train_binary

# The exit code recorded for a run stopped at its time limit.
KILLED = -9


class BenchmarkError(Exception):
    """A program or tool a command needs is missing, or a result file cannot be read; benchmarks.py
    prints it and exits 1 (exit_status.FAILURE)."""


def train_binary(given=None):
    """The train_resnet50 to run: given (--binary), else $TRAIN_BIN, else build/bin/train_resnet50.
    Raises BenchmarkError when it is not executable."""
    path = given or default_train_binary()
    if os.path.isdir(path):
        raise BenchmarkError(
            "train_resnet50 expected at %s, found a directory (pass the program's path as "
            "--binary)" % path
        )
    if not os.access(path, os.X_OK):
        raise BenchmarkError("train_resnet50 not found at %s (build it, or pass --binary)" % path)
    return path


def log(msg):
    """A progress line on stdout, with the time of day."""
    print("[benchmarks %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


def exit_code(result):
    """A runner.RunResult as the exit code the JSON files record: KILLED after a timeout, None when
    the command could not start."""
    return KILLED if result.status == runner.TIMEOUT else result.returncode


class DirectRun(NamedTuple):
    """A run of run_direct(): its exit code (as exit_code() records it), its seconds, and the
    seconds from the report line to its exit (None when it printed no report line)."""

    exit_code: Optional[int]
    seconds: float
    after_report_s: Optional[float]


def run_direct(cmd, log_path, timeout):
    """Runs cmd, output to log_path, for at most timeout seconds; returns a DirectRun."""
    report_seen = []

    def on_line(line):
        # train_resnet50 prints "  report   PATH" after writing its report: the run's work
        # is done from here on, what follows is teardown.
        if line.strip().startswith("report "):
            report_seen.append(time.monotonic())

    result = runner.run(cmd, log_path, timeout, on_line=on_line)
    end = time.monotonic()
    return DirectRun(
        exit_code(result), result.seconds, (end - report_seen[-1]) if report_seen else None
    )


class Capture(NamedTuple):
    """A run of profile(): the analysis summary (None when there is no export or its analysis
    failed) and the exit code of profile.sh (as exit_code() records it)."""

    summary: Optional[dict]
    exit_code: Optional[int]


def profile(prefix, command, timeout, expected_steps=None, extra_env=None):
    """Captures COMMAND with scripts/profile.sh --prefix PREFIX --no-untraced (output in
    PREFIX.runlog), then analyses the export into PREFIX_analysis/ (checks against `expected_steps`
    when given); returns a Capture."""
    make_dirs(os.path.dirname(prefix))
    # The benchmarks measure throughput in runs of their own (paired rounds, scans), so no untraced
    # run.
    cmd = [PROFILE_SH, "--prefix", prefix, "--no-untraced"] + command
    rc = exit_code(
        runner.run(cmd, prefix + ".runlog", timeout, env=dict(os.environ, **(extra_env or {})))
    )
    if not os.path.exists(prefix + ".sqlite"):
        return Capture(None, rc)
    report = prefix + ".json" if os.path.exists(prefix + ".json") else None
    try:
        summary = analyze(
            prefix + ".sqlite",
            prefix + "_analysis",
            report_path=report,
            expected_steps=expected_steps,
            figures=True,
        )
    except Exception as e:  # keep the other runs going; the row says what failed
        log("  analysis of %s failed: %s" % (prefix, e))
        return Capture(None, rc)
    return Capture(summary, rc)


def read_report(path):
    """A run report as a dict, None when it is missing or not JSON."""
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def write_json(out, name, obj):
    """obj into OUT/NAME.json (a command's results), atomically. Raises files.OutputError."""
    make_dirs(out)
    write_text(os.path.join(out, name + ".json"), json.dumps(obj, indent=2))


def read_json(out, name):
    """OUT/NAME.json as written by write_json(), None when the file is not there; BenchmarkError
    naming the file when it cannot be read or is not a JSON object."""
    path = os.path.join(out, name + ".json")
    if not os.path.exists(path):
        return None
    try:
        with open(path) as f:
            doc = json.load(f)
    except OSError as e:
        raise BenchmarkError("cannot read %s: %s" % (path, e.strerror or e))
    except ValueError as e:
        raise BenchmarkError("%s is not JSON (%s)" % (path, e))
    if not isinstance(doc, dict):
        raise BenchmarkError(
            "%s holds %s, expected the JSON object benchmarks.py %s writes"
            % (path, type(doc).__name__, name)
        )
    return doc
