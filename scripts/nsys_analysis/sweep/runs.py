"""The sweep's runs: each (configuration, seed) run with a time limit and one retry, its report and
capture checked, its numbers collected; the whole plan with --resume and --deadline.

Every run lives in OUT/runs/<config>_<seed>/: attempt<N>.log, the run report (run.json, or capture.json
beside the capture with nsys), the capture and its analysis/, and result.json (RunOutcome.to_json()).
"""

import json
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
from ..common.files import OutputError, check_output_dir, check_output_file, make_dirs, remove_stale, write_text
from ..common.paths import PROFILE_SH
from .plan import DEFAULT_SEEDS, expected_steps, run_args


@dataclass
class SweepSettings:
    """How every run of a sweep is made and reported (sweep.py's flags). timeout: seconds per attempt;
    deadline: seconds after which no new run starts (0: none)."""
    out: str
    binary: str
    data: Optional[str] = None
    extra: Sequence[str] = ()                  # arguments after `--`, added to every run
    seeds: Sequence[int] = DEFAULT_SEEDS
    order_seed: int = 1
    timeout: float = 600
    no_nsys: bool = False                      # run the binary directly, use only the run reports
    run_figures: bool = False                  # figures 1-3 and 5 for every capture
    resume: bool = False
    deadline: float = 0
    fig5_left: Sequence[str] = ("reset_8", "reuse_8")
    fig5_right: Sequence[str] = ("reuse_64",)
    profile_script: str = PROFILE_SH


class Attempt(NamedTuple):
    """One attempt of a run: status is runner's ok / failed / timeout; exit_code None after a timeout
    or when the command could not start; seconds rounded to 0.01."""
    attempt: int
    status: str
    exit_code: Optional[int]
    seconds: float
    log: str


@dataclass
class RunOutcome:
    """What one (configuration, seed) run gave. status: "ok" (the last attempt exited 0), "failed" or
    "timeout" (both attempts); aggregated: ok and every check passed; reason: why it is not aggregated.
    metrics: the run's numbers keyed as sweep.csv's columns (images_per_s, no_activity_pct,
    batch_wait_ms, batch_wait_total_ms, h2d_submit_total_ms, longest_wait_ms, longest_wait_step,
    source), empty when the run gave none."""
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

    @property
    def name(self):
        """<config>_<seed>, the name of its folder."""
        return "%s_%d" % (self.config, self.seed)

    @property
    def timeouts(self):
        return sum(1 for at in self.attempts if at.status == runner.TIMEOUT)

    def to_json(self):
        """result.json's and sweep.json's form of the run."""
        return OrderedDict([("config", self.config), ("seed", self.seed), ("order", self.order),
                            ("run_dir", self.run_dir), ("command", self.command),
                            ("expected_steps", self.expected_steps),
                            ("attempts", [at._asdict() for at in self.attempts]), ("status", self.status),
                            ("aggregated", self.aggregated), ("reason", self.reason), ("checks", self.checks),
                            ("check_details", self.check_details), ("metrics", self.metrics)])

    @classmethod
    def from_json(cls, doc):
        """The run as to_json() wrote it (a result.json kept by --resume)."""
        doc = OrderedDict(doc)
        doc["attempts"] = [Attempt(**at) for at in doc["attempts"]]
        return cls(**doc)


class DeadlineReached(Exception):
    """--deadline passed before every run of the plan ran; sweep.py exits 4 (exit_status.DEADLINE)."""


def run_folder(settings, name, seed):
    """OUT/runs/<config>_<seed>/, where one run lives."""
    return os.path.join(settings.out, "runs", "%s_%d" % (name, seed))


def check_run_outputs(plan, settings):
    """Before any run: raises files.UsageError naming --out unless every run's folder, its logs, report,
    result.json and (with nsys) analysis/ can be written. profile.sh checks the capture's own files."""
    for name, seed in plan:
        d = run_folder(settings, name, seed)
        check_output_dir("--out", d)
        files = ["attempt1.log", "attempt2.log", "result.json"] + (["run.json"] if settings.no_nsys else [])
        for f in files:
            check_output_file("--out", os.path.join(d, f), create_dirs=True)
        if not settings.no_nsys:
            check_outputs("--out", os.path.join(d, "analysis"), capture_outputs(settings.run_figures))


def report_checks(metrics, steps):
    """Checks a run report can answer on its own (used with and without a capture): (checks,
    details), both keyed by check name. metrics: report.report_metrics()'s dict."""
    checks, details = OrderedDict(), OrderedDict()
    n = metrics["steps"]
    records = metrics["step_records"]
    checks["report_step_count"] = n == steps and (records is None or records == steps)
    details["report_step_count"] = "report capture.steps %s, %s step records, expected %d" % (
        n, "no" if records is None else records, steps)
    checks["report_not_interrupted"] = not metrics["interrupted"]
    details["report_not_interrupted"] = "interrupted: %s" % str(metrics["interrupted"]).lower()
    ips = metrics["images_per_s"]
    checks["report_throughput"] = ips is not None and ips > 0 and ips == ips and ips != float("inf")
    details["report_throughput"] = "images_per_s %s" % ips
    return checks, details


def execute_run(planned, cfg, order, settings):
    """Run one PlannedRun of configuration cfg: attempts (a timeout is retried once), report, capture
    analysis, checks. Blocks until done; returns a RunOutcome."""
    name, seed = planned
    folder = run_folder(settings, name, seed)
    make_dirs(folder)
    steps = expected_steps(cfg, settings.extra)
    args = run_args(cfg, seed, settings.data, settings.extra)
    prefix = os.path.join(folder, "capture")
    if settings.no_nsys:
        report_path = os.path.join(folder, "run.json")
        cmd = [settings.binary] + args + ["--report", report_path]
    else:
        report_path = prefix + ".json"
        cmd = [settings.profile_script, "--prefix", prefix, "--binary", settings.binary, "--"] + args + [
            "--report", report_path]
    r = RunOutcome(name, seed, order, folder, cmd, steps)
    _attempt(r, report_path, settings.timeout)
    last = r.attempts[-1]
    if last.status == runner.TIMEOUT:
        r.status = "timeout"
        r.reason = "timed out after %d s on both attempts" % settings.timeout
        return r
    if last.status == runner.FAILED:
        r.status = "failed"
        r.reason = "exit status %s (see %s)" % (last.exit_code, last.log)
        return r
    r.status = "ok"
    _measure(r, report_path, None if settings.no_nsys else prefix + ".sqlite", settings.run_figures)
    failed = [k for k, v in r.checks.items() if v is not True]
    if r.reason is None and failed:
        r.reason = "checks failed: " + "; ".join("%s (%s)" % (k, r.check_details.get(k, "")) for k in failed)
    r.aggregated = r.reason is None
    return r


def _attempt(r, report_path, timeout):
    """Runs r.command up to twice: a second time only after a timeout. Appends to r.attempts."""
    for attempt in (1, 2):
        remove_stale(report_path)
        log_path = os.path.join(r.run_dir, "attempt%d.log" % attempt)
        run = runner.run(r.command, log_path, timeout)
        r.attempts.append(Attempt(attempt, run.status, run.returncode, round(run.seconds, 2), log_path))
        if run.status != runner.TIMEOUT:
            break
        print("sweep: %s seed %d timed out after %ds (attempt %d)%s" % (
            r.config, r.seed, timeout, attempt, ", retrying" if attempt == 1 else ""), file=sys.stderr)


def _measure(r, report_path, export_path, figures):
    """Fills r's checks, details and metrics from its report and (export_path not None) its capture;
    sets r.reason when either cannot be used."""
    try:
        metrics = report_metrics(load_report(report_path))
    except AnalysisError as e:
        r.reason = "unusable run report: %s" % e
        return
    checks, details = report_checks(metrics, r.expected_steps)
    m = OrderedDict([("images_per_s", metrics["images_per_s"]), ("no_activity_pct", None),
                     ("batch_wait_ms", metrics["batch_wait_ms"]),
                     ("batch_wait_total_ms", metrics["batch_wait_total_ms"]),
                     ("h2d_submit_total_ms", metrics["h2d_submit_total_ms"]),
                     ("longest_wait_ms", metrics["batch_wait_max_ms"]),
                     ("longest_wait_step", metrics["batch_wait_max_step"]),
                     ("source", "run report")])
    if export_path is not None:
        try:
            summary = analyze(export_path, os.path.join(r.run_dir, "analysis"), report_path,
                              expected_steps=r.expected_steps, figures=figures)
        except (AnalysisError, OutputError) as e:
            r.reason = "capture analysis failed: %s" % e
            return
        checks.update(summary["checks"])
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
    r.checks, r.check_details, r.metrics = checks, details, m


def _kept(saved, order, plan, name, seed):
    """The RunOutcome of an earlier sweep's result.json at saved when it says "ok" (--resume), else None;
    one that cannot be read is reported on stderr and the run made again."""
    if not os.path.exists(saved):
        return None
    try:
        with open(saved) as f:
            doc = json.load(f, object_pairs_hook=OrderedDict)
        if not isinstance(doc, dict) or doc.get("status") != "ok":
            return None
        r = RunOutcome.from_json(doc)
    except (OSError, ValueError, TypeError, KeyError, AttributeError) as e:
        print("sweep: [%d/%d] %s seed %d: cannot use %s (%s: %s); running it again" % (
            order, len(plan), name, seed, saved, type(e).__name__, e), file=sys.stderr)
        return None
    print("sweep: [%d/%d] %s seed %d: kept from an earlier run (--resume)" % (order, len(plan), name, seed),
          file=sys.stderr)
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
        r = _kept(saved, order, plan, name, seed) if settings.resume else None
        if r is not None:
            results.append(r)
            continue
        if settings.deadline and ran_any and time.monotonic() - started > settings.deadline:
            raise DeadlineReached("--deadline of %d s reached before %s seed %d; rerun with --resume to "
                                  "continue" % (settings.deadline, name, seed))
        print("sweep: [%d/%d] %s seed %d" % (order, len(plan), name, seed), file=sys.stderr)
        r = execute_run(plan[order - 1], configs[name], order, settings)
        ran_any = True
        write_text(saved, json.dumps(r.to_json(), indent=2))
        results.append(r)
        if not r.aggregated:
            print("sweep: not aggregating %s seed %d: %s" % (name, seed, r.reason), file=sys.stderr)
    return results
