"""Run reports: train_resnet50's JSON document or seed_workload.py's JSON line, normalised."""

import json
import math
import os
import select
import stat
import time
from collections import OrderedDict

from .export import AnalysisError


# How long a report given as a stream (a FIFO, `<(command)`) may take to arrive whole.
STREAM_SECONDS = 60.0
# The most a run report holds (a long --epochs run's: megabytes); a larger file is no report, and is
# refused before it is read.
MAX_REPORT_BYTES = 256 << 20


def _read_stream(path, seconds=STREAM_SECONDS):
    """The text of the FIFO or pipe at path, read without blocking on a writer that never comes:
    AnalysisError when nothing has ended it within `seconds`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    chunks, deadline = [], time.monotonic() + seconds
    try:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise AnalysisError(
                    "report %s: a stream that did not end within %g s (is anything "
                    "writing to it?)" % (path, seconds)
                )
            ready, _, _ = select.select([fd], [], [], left)
            if not ready:
                continue
            try:
                chunk = os.read(fd, 1 << 16)
            except BlockingIOError:
                continue
            if not chunk:
                break
            chunks.append(chunk)
            if sum(len(c) for c in chunks) > MAX_REPORT_BYTES:
                raise AnalysisError(
                    "report %s: more than the %d bytes a run report holds"
                    % (path, MAX_REPORT_BYTES)
                )
    finally:
        os.close(fd)
    return b"".join(chunks).decode("utf-8", errors="replace")


def load_report(path):
    """Read a run report: train_resnet50's JSON document, or seed_workload.py's one JSON line (the
    last line of a log that parses as a JSON object). A FIFO or pipe is read for at most
    STREAM_SECONDS.
    """
    if not os.path.exists(path):
        raise AnalysisError("no such report: %s" % path)
    if os.path.isdir(path):
        raise AnalysisError("report %s is a directory, expected a run report file" % path)
    try:
        st = os.stat(path)
        if stat.S_ISFIFO(st.st_mode):
            text = _read_stream(path)
        elif st.st_size > MAX_REPORT_BYTES:
            raise AnalysisError(
                "report %s: %d bytes, more than the %d a run report holds"
                % (path, st.st_size, MAX_REPORT_BYTES)
            )
        else:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read()
    except OSError as e:
        raise AnalysisError("cannot read report %s: %s" % (path, e.strerror or e))
    text = text.removeprefix("\ufeff")  # a byte-order mark some editors write
    doc = None
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError):  # RecursionError: nested deeper than Python reads
        pass
    if not isinstance(doc, dict):
        doc = last_json_object(text.splitlines())
    if doc is None:
        raise AnalysisError("expected a JSON object in report %s, found none" % path)
    _check_numbers(path, doc)
    return doc


def _check_numbers(path, doc):
    """Raises AnalysisError naming the report and the key when a count the analysis relies on
    (capture.steps, capture.batch_size; seed_workload's steps, batch_size) is not a whole number >=
    0, or its images/s is not a finite number >= 0. Absent (or null) keys are left to the checks
    that need them."""
    trainer = isinstance(doc.get("capture"), dict) or isinstance(doc.get("steps"), list)
    where, section = ("capture.", doc.get("capture") or {}) if trainer else ("", doc)
    if not isinstance(section, dict):
        return
    for key, whole in (("steps", True), ("batch_size", True), ("images_per_s", False)):
        v = section.get(key)
        if v is None:
            continue
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
        ok = ok and v >= 0 and (not whole or float(v).is_integer())
        if not ok:
            raise AnalysisError(
                "report %s: %s%s is %s, expected %s"
                % (
                    path,
                    where,
                    key,
                    json.dumps(v)[:40],
                    "a whole number >= 0" if whole else "a finite number >= 0",
                )
            )


def last_json_object(lines):
    """The last of lines that parses as a JSON object, else None."""
    for line in reversed(lines):
        line = line.strip().removeprefix("\ufeff")
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except (ValueError, RecursionError):
                continue
            if isinstance(doc, dict):
                return doc
    return None


def _num(value):
    """A finite number, else None (JSON's NaN and Infinity, which Python's json reads, are no
    figure)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    return value if ok and math.isfinite(value) else None


def _count(value):
    """A report's count (steps, batch size): a whole number >= 0, else None."""
    value = _num(value)
    return int(value) if value is not None and value >= 0 and float(value).is_integer() else None


def _dict(value):
    """A report section that must be an object: value, or {} when it is anything else."""
    return value if isinstance(value, dict) else {}


def report_metrics(report):
    """Normalise either report form to: format, images_per_s, batch_size, steps, elapsed_s,
    interrupted, and the host-timed input numbers (per-step lists only in train_resnet50's form;
    ms)."""
    if report is None:
        return None
    if isinstance(report.get("capture"), dict) or isinstance(report.get("steps"), list):
        cap = _dict(report.get("capture"))
        steps = report.get("steps")
        steps = [s for s in steps if isinstance(s, dict)] if isinstance(steps, list) else []
        waits = [_num(s.get("batch_wait_ms")) for s in steps]
        subs = [_num(s.get("h2d_submit_ms")) for s in steps]
        summ = _dict(report.get("summary"))
        out = {
            "format": "train_resnet50",
            "images_per_s": _num(cap.get("images_per_s")),
            "batch_size": _count(cap.get("batch_size")),
            "steps": _count(cap.get("steps")),
            "step_records": len(steps),
            "elapsed_s": _num(cap.get("elapsed_s")),
            "interrupted": bool(report.get("interrupted", False)),
            "batch_wait_ms": waits if steps and None not in waits else None,
            "h2d_submit_ms": subs if steps and None not in subs else None,
            "batch_wait_total_ms": _num(summ.get("batch_wait_total_ms")),
            "h2d_submit_total_ms": _num(summ.get("h2d_submit_total_ms")),
            "batch_wait_max_ms": _num(summ.get("batch_wait_max_ms")),
            "batch_wait_max_step": _num(summ.get("batch_wait_max_step")),
        }
        if out["batch_wait_ms"]:
            w = out["batch_wait_ms"]
            if out["batch_wait_total_ms"] is None:
                out["batch_wait_total_ms"] = sum(w)
            if out["batch_wait_max_ms"] is None:
                out["batch_wait_max_ms"] = max(w)
                out["batch_wait_max_step"] = w.index(max(w))
        if out["h2d_submit_ms"] and out["h2d_submit_total_ms"] is None:
            out["h2d_submit_total_ms"] = sum(out["h2d_submit_ms"])
        return out
    # seed_workload.py's line: totals in seconds, the longest wait in ms, no per-step list.
    wait_s, sub_s = _num(report.get("batch_wait_s")), _num(report.get("h2d_submit_s"))
    return {
        "format": "seed_workload",
        "images_per_s": _num(report.get("images_per_s")),
        "batch_size": _count(report.get("batch_size")),
        "steps": _count(report.get("steps")),
        "step_records": None,
        "elapsed_s": None,
        "interrupted": False,
        "batch_wait_ms": None,
        "h2d_submit_ms": None,
        "batch_wait_total_ms": None if wait_s is None else wait_s * 1e3,
        "h2d_submit_total_ms": None if sub_s is None else sub_s * 1e3,
        "batch_wait_max_ms": _num(report.get("max_wait_ms")),
        "batch_wait_max_step": None,
    }


# The per-step fields every train_resnet50 report has, by the range they time (step_ms: torch_step
# itself).
STEP_FIELDS = (
    ("torch_step", "step_ms"),
    ("batch_wait", "batch_wait_ms"),
    ("h2d_submit", "h2d_submit_ms"),
)
PHASE_MS = "phase_ms"
# step_phase_ms()'s sources.
FROM_PHASE_MS = "phase_ms"
FROM_STEP_FIELDS = "step_ms, batch_wait_ms, h2d_submit_ms (no phase_ms)"
FROM_NOTHING = "no per-step records"


def step_phase_ms(report):
    """Host time per range and captured step of a train_resnet50 report: (OrderedDict name -> [ms of
    each captured step that opened it], source). Each `steps` element's phase_ms object (the ranges
    the step opened, in the order they opened; newer binaries), plus torch_step from step_ms and
    batch_wait / h2d_submit from their own fields where phase_ms lacks them (every binary writes
    those). source says which: FROM_PHASE_MS when any step has phase_ms, FROM_STEP_FIELDS, or
    FROM_NOTHING (no report, seed_workload.py's line, no step records)."""
    out: OrderedDict[str, list[float]] = OrderedDict()
    steps = report.get("steps") if isinstance(report, dict) else None
    steps = [st for st in steps if isinstance(st, dict)] if isinstance(steps, list) else []
    any_phase_ms = False
    for st in steps:
        phases = st.get(PHASE_MS)
        phases = phases if isinstance(phases, dict) else {}
        any_phase_ms = any_phase_ms or bool(phases)
        values = OrderedDict((name, _finite(phases.get(name))) for name in phases)
        for name, key in STEP_FIELDS:
            if values.get(name) is None:
                values[name] = _finite(st.get(key))
        for name, value in values.items():
            if value is not None:
                out.setdefault(name, []).append(value)
    source = FROM_PHASE_MS if any_phase_ms else FROM_STEP_FIELDS if out else FROM_NOTHING
    return out, source


_finite = _num


# The config fields an untraced run may hold apart from its capture's: where its outputs go
# (profile.sh gives it its own report and checkpoint directory), and a command line that names them.
UNTRACED_MAY_DIFFER = (
    "report",
    "torch_profiler_trace",
    "checkpoint_dir",
    "resume",
    "start_over",
    "argv",
)


def check_untraced(report, untraced):
    """Raises AnalysisError unless each untraced run, [(path, report)], is complete (not
    interrupted, not stopped by a non-finite loss) and, when the capture's run report is given, a
    run of the same program and configuration: every config field but UNTRACED_MAY_DIFFER equal (the
    first that differs named). A comparison of unlike runs would blame the tracer for the
    difference."""
    for path, u in untraced:
        if u.get("interrupted"):
            raise AnalysisError(
                "--untraced %s: the run was interrupted (%s): its images/s are no "
                "baseline" % (path, u.get("interrupt_signal") or "stopped")
            )
        if u.get("nonfinite_stopped"):
            raise AnalysisError(
                "--untraced %s: the run stopped at a non-finite loss (%s)"
                % (path, u.get("nonfinite_loss"))
            )
        if not report:
            continue
        if u.get("program") != report.get("program"):
            raise AnalysisError(
                "--untraced %s: a report of %s, the capture's of %s"
                % (path, u.get("program"), report.get("program"))
            )
        mine, theirs = report.get("config"), u.get("config")
        if not isinstance(mine, dict) or not isinstance(theirs, dict):
            continue
        for key in sorted(set(mine) | set(theirs)):
            if key in UNTRACED_MAY_DIFFER or mine.get(key) == theirs.get(key):
                continue
            raise AnalysisError(
                "--untraced %s: config.%s is %s, the capture's %s: not a run of the "
                "same command" % (path, key, json.dumps(theirs.get(key)), json.dumps(mine.get(key)))
            )
