"""The sweep's runs: each (configuration, seed) run with a time limit and one retry, its report and
capture checked, its numbers collected; the whole plan with --resume and --deadline.

Every run lives in OUT/runs/<config>_<seed>/: attempt<N>.log, the run report (run.json, or
capture.json beside the capture with nsys), the capture and its analysis/, and result.json
(RunOutcome.to_json()). With nsys, each captured run is followed by its untraced run, the same
command without nsys (unless SweepSettings.untraced is False): untraced_attempt<N>.log and
untraced.json beside the capture; the analysis compares the two (summary capture_cost), and a
tracer-bound capture is reported (metrics tracer_bound), not excluded: its untraced images/s are the
figure to read.
"""

import json
import math
import os
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence

from ..capture.export import AnalysisError
from ..capture.pipeline import analyze, capture_outputs, check_outputs
from ..capture.report import load_report, report_metrics
from ..common import runner
from ..common.files import (
    OutputError,
    check_output_dir,
    check_output_file,
    make_dirs,
    remove_stale,
    write_text,
)
from ..common.paths import PROFILE_SH
from .plan import DEFAULT_SEEDS, expected_steps, run_args


@dataclass
class SweepSettings:
    """How every run of a sweep is made and reported (sweep.py's flags). timeout: seconds per
    attempt; deadline: seconds after which no new run starts (0: none)."""

    out: str
    binary: str
    data: Optional[str] = None
    extra: Sequence[str] = ()  # arguments after `--`, added to every run
    seeds: Sequence[int] = DEFAULT_SEEDS
    order_seed: int = 1
    timeout: float = 600
    no_nsys: bool = False  # run the binary directly, use only the run reports
    run_figures: bool = False  # figures 1-3 and 5 for every capture
    resume: bool = False
    deadline: float = 0
    fig5_left: Sequence[str] = ("reset_8", "reuse_8")
    fig5_right: Sequence[str] = ("reuse_64",)
    profile_script: str = PROFILE_SH
    untraced: bool = True  # with nsys, an untraced run after each captured one


class Attempt(NamedTuple):
    """One attempt of a run: status is runner's ok / failed / timeout; exit_code None after a
    timeout or when the command could not start; seconds rounded to 0.01."""

    attempt: int
    status: str
    exit_code: Optional[int]
    seconds: float
    log: str


@dataclass
class RunOutcome:
    """What one (configuration, seed) run gave. status: "ok" (the last attempt exited 0, and so did
    its untraced run's), "failed" or "timeout" (both attempts, of the run or of its untraced run);
    aggregated: ok and every check passed; reason: why it is not aggregated. metrics: the run's
    numbers keyed as sweep.csv's columns (images_per_s, no_activity_pct, batch_wait_ms,
    batch_wait_total_ms, h2d_submit_total_ms, longest_wait_ms, longest_wait_step, source,
    untraced_images_per_s, traced_over_untraced, tracer_bound), empty when the run gave none.
    untraced: its untraced run (command, report, attempts, status, kept: taken from an earlier sweep
    by --resume), empty without one.
    """

    config: str
    seed: int
    order: int
    run_dir: str
    command: List[str]
    expected_steps: int
    attempts: List[Attempt] = field(default_factory=list)
    status: Optional[str] = None
    aggregated: bool = False
    reason: Optional[str] = None
    checks: Dict[str, Optional[bool]] = field(default_factory=dict)
    check_details: Dict[str, str] = field(default_factory=dict)
    metrics: Dict[str, object] = field(default_factory=dict)
    untraced: Dict[str, object] = field(default_factory=dict)

    @property
    def name(self):
        """<config>_<seed>, the name of its folder."""
        return "%s_%d" % (self.config, self.seed)

    @property
    def timeouts(self):
        return sum(1 for at in self.attempts if at.status == runner.TIMEOUT)

    def to_json(self):
        """result.json's and sweep.json's form of the run."""
        return OrderedDict(
            [
                ("config", self.config),
                ("seed", self.seed),
                ("order", self.order),
                ("run_dir", self.run_dir),
                ("command", self.command),
                ("expected_steps", self.expected_steps),
                ("attempts", [at._asdict() for at in self.attempts]),
                ("status", self.status),
                ("aggregated", self.aggregated),
                ("reason", self.reason),
                ("checks", self.checks),
                ("check_details", self.check_details),
                ("metrics", self.metrics),
                ("untraced", self.untraced),
            ]
        )

    @classmethod
    def from_json(cls, doc):
        """The run as to_json() wrote it (a result.json kept by --resume)."""
        doc = OrderedDict(doc)
        doc["attempts"] = [Attempt(**at) for at in doc["attempts"]]
        return cls(**doc)


class DeadlineReached(Exception):
    """--deadline passed before every run of the plan ran; sweep.py exits 4
    (exit_status.DEADLINE)."""


def run_folder(settings, name, seed):
    """OUT/runs/<config>_<seed>/, where one run lives."""
    return os.path.join(settings.out, "runs", "%s_%d" % (name, seed))


# The untraced run's files in a run's folder.
UNTRACED_REPORT = "untraced.json"
UNTRACED_LOG = "untraced_attempt%d.log"


def has_untraced(settings):
    """Whether each run gets an untraced run: with nsys only (--no-nsys runs are all untraced),
    unless --no-untraced."""
    return settings.untraced and not settings.no_nsys


def check_run_outputs(plan, settings):
    """Before any run: raises files.UsageError naming --out unless every run's folder, its logs,
    report, result.json and (with nsys) analysis/ can be written. profile.sh checks the capture's
    own files.
    """
    for name, seed in plan:
        d = run_folder(settings, name, seed)
        check_output_dir("--out", d)
        for f in _run_files(settings):
            check_output_file("--out", os.path.join(d, f), create_dirs=True)
        if not settings.no_nsys:
            check_outputs(
                "--out", os.path.join(d, "analysis"), capture_outputs(settings.run_figures)
            )


def _run_files(settings):
    """The files a run writes in its folder (with nsys, profile.sh's capture too)."""
    files = ["attempt1.log", "attempt2.log", "result.json"]
    files += (
        ["run.json"]
        if settings.no_nsys
        else ["capture.json", "capture.log", "capture.nsys-rep", "capture.sqlite"]
    )
    if has_untraced(settings):
        files += [UNTRACED_LOG % 1, UNTRACED_LOG % 2, UNTRACED_REPORT]
    return files


def run_output_paths(plan, settings):
    """Every file the runs of plan write in their folders (their analyses' included)."""
    out = []
    for name, seed in plan:
        d = run_folder(settings, name, seed)
        out += [os.path.join(d, f) for f in _run_files(settings)]
        if not settings.no_nsys:
            analysis = os.path.join(d, "analysis")
            out += [os.path.join(analysis, f) for f in capture_outputs(settings.run_figures)]
    return out


def report_checks(metrics, steps):
    """Checks a run report can answer on its own (used with and without a capture): (checks,
    details), both keyed by check name. metrics: report.report_metrics()'s dict."""
    checks, details = OrderedDict(), OrderedDict()
    n = metrics["steps"]
    records = metrics["step_records"]
    checks["report_step_count"] = n == steps and (records is None or records == steps)
    details["report_step_count"] = "report capture.steps %s, %s step records, expected %d" % (
        n,
        "no" if records is None else records,
        steps,
    )
    checks["report_not_interrupted"] = not metrics["interrupted"]
    details["report_not_interrupted"] = "interrupted: %s" % str(metrics["interrupted"]).lower()
    ips = metrics["images_per_s"]
    checks["report_throughput"] = ips is not None and ips > 0 and ips == ips and ips != float("inf")
    details["report_throughput"] = "images_per_s %s" % ips
    return checks, details


class _Command(NamedTuple):
    """How one PlannedRun is made: its folder, the steps it must capture, train_resnet50's
    arguments, the capture's prefix, the report's path and the command line."""

    folder: str
    steps: int
    args: List[str]
    prefix: str
    report_path: str
    cmd: List[str]


def _command(planned, cfg, settings):
    name, seed = planned
    folder = run_folder(settings, name, seed)
    steps = expected_steps(cfg, settings.extra)
    args = run_args(cfg, seed, settings.data, settings.extra)
    prefix = os.path.join(folder, "capture")
    if settings.no_nsys:
        report_path = os.path.join(folder, "run.json")
        cmd = [settings.binary] + args + ["--report", report_path]
    else:
        report_path = prefix + ".json"
        # The untraced run is the sweep's own (its attempts, its --resume), not profile.sh's.
        cmd = (
            [
                settings.profile_script,
                "--prefix",
                prefix,
                "--no-untraced",
                "--binary",
                settings.binary,
                "--",
            ]
            + args
            + ["--report", report_path]
        )
    return _Command(folder, steps, args, prefix, report_path, cmd)


def execute_run(planned, cfg, order, settings):
    """Run one PlannedRun of configuration cfg: attempts (a timeout is retried once), its untraced
    run, report, capture analysis, checks. Blocks until done; returns a RunOutcome."""
    name, seed = planned
    folder, steps, args, prefix, report_path, cmd = _command(planned, cfg, settings)
    make_dirs(folder)
    r = RunOutcome(name, seed, order, folder, cmd, steps)
    r.attempts = _attempts(cmd, report_path, folder, "attempt%d.log", settings.timeout, name, seed)
    if not _finished(r, r.attempts[-1], settings.timeout, ""):
        return r
    untraced_path = None
    if has_untraced(settings):
        untraced_path = _untraced_run(r, args, settings)
        if untraced_path is None:
            return r
    r.status = "ok"
    _measure(
        r,
        report_path,
        None if settings.no_nsys else prefix + ".sqlite",
        settings.run_figures,
        untraced_path,
    )
    failed = [k for k, v in r.checks.items() if v is not True]
    if r.reason is None and failed:
        r.reason = "checks failed: " + "; ".join(
            "%s (%s)" % (k, r.check_details.get(k, "")) for k in failed
        )
    r.aggregated = r.reason is None
    return r


def _finished(r, last, timeout, what):
    """True when the last Attempt exited 0; else sets r.status and r.reason (what: "" for the run
    itself, "untraced run: " for its untraced run) and returns False."""
    if last.status == runner.TIMEOUT:
        r.status = "timeout"
        r.reason = "%stimed out after %d s on both attempts" % (what, timeout)
        return False
    if last.status == runner.FAILED:
        r.status = "failed"
        r.reason = "%sexit status %s (see %s)" % (what, last.exit_code, last.log)
        return False
    return True


def _attempts(cmd, report_path, folder, log_name, timeout, config, seed):
    """Runs cmd up to twice: a second time only after a timeout. Returns the Attempts; log_name
    names each attempt's log in folder ("attempt%d.log")."""
    attempts = []
    for attempt in (1, 2):
        remove_stale(report_path)
        log_path = os.path.join(folder, log_name % attempt)
        run = runner.run(cmd, log_path, timeout)
        attempts.append(
            Attempt(attempt, run.status, run.returncode, round(run.seconds, 2), log_path)
        )
        if run.status != runner.TIMEOUT:
            break
        print(
            "sweep: %s seed %d%s timed out after %ds (attempt %d)%s"
            % (
                config,
                seed,
                " (untraced)" if log_name == UNTRACED_LOG else "",
                timeout,
                attempt,
                ", retrying" if attempt == 1 else "",
            ),
            file=sys.stderr,
        )
    return attempts


def _usable_untraced(path, steps):
    """None when the untraced run's report at path is one a finished run wrote (readable, steps as
    expected, not interrupted, a throughput), else why not."""
    try:
        metrics = report_metrics(load_report(path))
    except AnalysisError as e:
        return str(e)
    checks, details = report_checks(metrics, steps)
    bad = [k for k, v in checks.items() if v is not True]
    return "; ".join("%s (%s)" % (k, details[k]) for k in bad) or None


def _untraced_run(r, args, settings):
    """The untraced run of r's command (the binary itself, the same flags and seed), or with
    --resume the one an earlier sweep finished; records it in r.untraced. Returns its report's path,
    or None after a failure (r.status and r.reason then say what failed)."""
    path = os.path.join(r.run_dir, UNTRACED_REPORT)
    cmd = [settings.binary] + args + ["--report", path]
    r.untraced = OrderedDict(
        [("command", cmd), ("report", path), ("attempts", []), ("status", None), ("kept", False)]
    )
    if (
        settings.resume
        and os.path.exists(path)
        and _usable_untraced(path, r.expected_steps) is None
    ):
        r.untraced["status"], r.untraced["kept"] = "ok", True
        print(
            "sweep: %s seed %d: untraced run kept from an earlier sweep (--resume)"
            % (r.config, r.seed),
            file=sys.stderr,
        )
        return path
    attempts = _attempts(cmd, path, r.run_dir, UNTRACED_LOG, settings.timeout, r.config, r.seed)
    r.untraced["attempts"] = [at._asdict() for at in attempts]
    r.untraced["status"] = attempts[-1].status
    if not _finished(r, attempts[-1], settings.timeout, "untraced run: "):
        return None
    why = _usable_untraced(path, r.expected_steps)
    if why is not None:
        r.status, r.untraced["status"] = "failed", "failed"
        r.reason = "untraced run: unusable report: %s" % why
        return None
    return path


def _measure(r, report_path, export_path, figures, untraced_path=None):
    """Fills r's checks, details and metrics from its report, (export_path not None) its capture and
    (untraced_path) its untraced run; sets r.reason when either cannot be used. The capture's check
    capture_cost decides nothing here: the table says which runs are tracer-bound."""
    try:
        metrics = report_metrics(load_report(report_path))
    except AnalysisError as e:
        r.reason = "unusable run report: %s" % e
        return
    checks, details = report_checks(metrics, r.expected_steps)
    m = OrderedDict(
        [
            ("images_per_s", metrics["images_per_s"]),
            ("no_activity_pct", None),
            ("batch_wait_ms", metrics["batch_wait_ms"]),
            ("batch_wait_total_ms", metrics["batch_wait_total_ms"]),
            ("h2d_submit_total_ms", metrics["h2d_submit_total_ms"]),
            ("longest_wait_ms", metrics["batch_wait_max_ms"]),
            ("longest_wait_step", metrics["batch_wait_max_step"]),
            ("source", "run report"),
            ("untraced_images_per_s", None),
            ("traced_over_untraced", None),
            ("tracer_bound", None),
        ]
    )
    if export_path is not None:
        try:
            summary = analyze(
                export_path,
                os.path.join(r.run_dir, "analysis"),
                report_path,
                expected_steps=r.expected_steps,
                figures=figures,
                untraced_paths=[untraced_path] if untraced_path else (),
            )
        except (AnalysisError, OutputError) as e:
            r.reason = "capture analysis failed: %s" % e
            return
        checks.update((k, v) for k, v in summary["checks"].items() if k != "capture_cost")
        details.update(summary["check_details"])
        m["no_activity_pct"] = summary["no_activity_pct"]
        if summary["batch_wait_total_ms"] is not None:  # NVTX ranges of the capture, when present
            m["batch_wait_ms"] = summary["batch_wait_ms"]
            m["batch_wait_total_ms"] = summary["batch_wait_total_ms"]
            m["longest_wait_ms"] = summary["batch_wait_max_ms"]
            m["longest_wait_step"] = summary["batch_wait_max_step"]
            m["source"] = "capture (NVTX) + run report"
        if summary["h2d_submit_total_ms"] is not None:
            m["h2d_submit_total_ms"] = summary["h2d_submit_total_ms"]
        cost = summary["capture_cost"]
        m["untraced_images_per_s"] = cost["throughput"]["untraced_images_per_s"]
        m["traced_over_untraced"] = cost["throughput"]["traced_over_untraced"]
        m["tracer_bound"] = cost["tracer_bound"]
    r.checks, r.check_details, r.metrics = checks, details, m


# The numbers of a RunOutcome's metrics: each a finite number or None.
_METRIC_NUMBERS = (
    "images_per_s",
    "no_activity_pct",
    "batch_wait_total_ms",
    "h2d_submit_total_ms",
    "longest_wait_ms",
    "longest_wait_step",
    "untraced_images_per_s",
    "traced_over_untraced",
)


def _finite(value):
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return ok and math.isfinite(value)


def _unusable(r, command, settings):
    """Why an earlier sweep's RunOutcome r cannot stand for this sweep's run of `command` (a
    _Command), or None: another command or step count (the configuration, `--` arguments, --data,
    --binary or nsys changed), the untraced run asked for now and not then or the other way, or
    fields of the wrong type."""
    if r.command != command.cmd:
        return "made by another command: %s" % " ".join(map(str, r.command))
    if r.expected_steps != command.steps:
        return "%s steps expected then, %d now" % (r.expected_steps, command.steps)
    if bool(r.untraced) != has_untraced(settings):
        return "untraced run %s then, %s now" % (
            "made" if r.untraced else "not made",
            "asked for" if has_untraced(settings) else "not asked for",
        )
    if not isinstance(r.aggregated, bool):
        return "aggregated is %r, expected true or false" % (r.aggregated,)
    if not (isinstance(r.metrics, dict) and isinstance(r.checks, dict)):
        return "metrics or checks are not objects"
    for key in _METRIC_NUMBERS:
        if r.metrics.get(key) is not None and not _finite(r.metrics[key]):
            return "metrics.%s is %r, expected a finite number or null" % (key, r.metrics[key])
    waits = r.metrics.get("batch_wait_ms")
    if waits is not None and not (isinstance(waits, list) and all(_finite(w) for w in waits)):
        return "metrics.batch_wait_ms is not a list of numbers"
    if r.aggregated and r.metrics.get("images_per_s") is None:
        return "aggregated without images_per_s"
    return None


def _kept(saved, order, plan, name, seed, command, settings):
    """The RunOutcome of an earlier sweep's result.json at saved when it says "ok" and is the run
    this sweep would make (--resume), else None; one that cannot be read or used is reported on
    stderr and the run made again."""
    if not os.path.exists(saved):
        return None
    try:
        with open(saved) as f:
            doc = json.load(f, object_pairs_hook=OrderedDict)
        if not isinstance(doc, dict) or doc.get("status") != "ok":
            return None
        r = RunOutcome.from_json(doc)
        if (r.config, r.seed) != (name, seed):
            raise ValueError("the run of %r seed %r" % (r.config, r.seed))
        why = _unusable(r, command, settings)
        if why is not None:
            raise ValueError(why)
    except (OSError, ValueError, TypeError, KeyError, AttributeError, RecursionError) as e:
        print(
            "sweep: [%d/%d] %s seed %d: cannot use %s (%s: %s); running it again"
            % (order, len(plan), name, seed, saved, type(e).__name__, e),
            file=sys.stderr,
        )
        return None
    print(
        "sweep: [%d/%d] %s seed %d: kept from an earlier run (--resume)"
        % (order, len(plan), name, seed),
        file=sys.stderr,
    )
    r.order = order
    return r


def run_sweep(plan, configs, settings):
    """Runs every PlannedRun of plan in order (progress on stderr) and returns their RunOutcomes,
    each also saved as its folder's result.json. With settings.resume, a run whose result.json says
    "ok" is kept, not run again. Raises DeadlineReached when settings.deadline seconds have passed
    before a run starts; at least one run always runs, so that repeated --resume calls progress.
    Raises files.OutputError when a run's files cannot be written."""
    results = []
    started = time.monotonic()
    ran_any = False
    for order, (name, seed) in enumerate(plan, 1):
        saved = os.path.join(run_folder(settings, name, seed), "result.json")
        command = _command(plan[order - 1], configs[name], settings)
        r = _kept(saved, order, plan, name, seed, command, settings) if settings.resume else None
        if r is not None:
            results.append(r)
            continue
        if settings.deadline and ran_any and time.monotonic() - started > settings.deadline:
            raise DeadlineReached(
                "--deadline of %d s reached before %s seed %d; rerun with --resume to "
                "continue" % (settings.deadline, name, seed)
            )
        print("sweep: [%d/%d] %s seed %d" % (order, len(plan), name, seed), file=sys.stderr)
        r = execute_run(plan[order - 1], configs[name], order, settings)
        ran_any = True
        write_text(saved, json.dumps(r.to_json(), indent=2))
        results.append(r)
        if not r.aggregated:
            print("sweep: not aggregating %s seed %d: %s" % (name, seed, r.reason), file=sys.stderr)
    return results
