"""The epoch boundary inside a capture window. train_resnet50 --epochs E --capture-at N can place
the window across an epoch's end, which then holds, between torch_step ranges on the main thread,
the evaluation pass (eval { eval_step { batch_wait, h2d_submit, [normalize], forward }...,
eval_reduce }) and the checkpoint written (checkpoint): records.BOUNDARY_RANGES, siblings of
torch_step in capture_window.

Neither is a training step, and the training loop's names inside eval_step are no training phases:
the analysis counts only torch_step ranges as steps and only the ranges inside them as phases; it
charges the device work launched, and the idle gaps begun, inside an eval or checkpoint range to
that range (BoundaryIndex.label()); the window's range tables list a training name nested in eval as
eval/NAME (table_name()). epoch_boundary() is summary.json's epoch_boundary: what the evaluation and
the checkpoint cost against a training step.
"""

import statistics
from collections import OrderedDict

from .intervals import SpanIndex, ms, union_length
from .records import (
    BOUNDARY_NAMES,
    BOUNDARY_RANGES,
    CHECKPOINT,
    EVAL,
    EVAL_REDUCE,
    EVAL_STEP,
    Range,
)


def boundary_ranges(ranges, window):
    """The epoch boundary's ranges of a Window (its steps found): the default-domain eval and
    checkpoint ranges (records.BOUNDARY_RANGES) lying wholly inside it, on the captured steps'
    thread (any thread when it has none), overlapping no torch_step range and inside no other such
    range. A list by start; empty in a capture without them, and without a window."""
    if window.lo is None:
        return []
    tids = {st.tid for st in window.steps}
    found = sorted(
        (
            r
            for r in ranges
            if r.name in BOUNDARY_RANGES
            and window.holds(r)
            and (not tids or r.tid in tids)
            and not any(st.start < r.end and r.start < st.end for st in window.all_steps)
        ),
        key=lambda r: (r.start, -r.end),
    )
    out: list[Range] = []
    for r in found:
        if not any(b.contains(r) for b in out):
            out.append(r)
    return out


class BoundaryIndex:
    """Which of the epoch boundary's ranges (boundary_ranges(), which do not overlap) holds a time
    or a range, by bisection."""

    def __init__(self, boundary):
        self.spans = SpanIndex(boundary)

    def at(self, t):
        """The boundary range whose span holds time t (any thread's), else None."""
        return self.spans.find(t)

    def holding(self, r):
        """The boundary range that range r lies in on its thread (r itself when it is one), else
        None."""
        b = self.spans.find(r.start)
        return b if b is not None and b.contains(r) else None

    def label(self, r):
        """The name the attribution of a time to range r gives: the boundary range's name (eval,
        checkpoint) when r lies in one, else r's own name (forward, backward, ...)."""
        b = self.holding(r)
        return r.name if b is None else b.name


def table_name(r, index):
    """The name range r counts under in the window's range tables (summary.json's phases):
    "eval/NAME" for a range nested in an eval range under a name of the training loop
    (eval/batch_wait, eval/forward, a layer range's), likewise "checkpoint/NAME", so that a training
    name's figures hold training steps' ranges only; r's own name otherwise, the boundary's own
    names (eval, eval_step, eval_reduce, checkpoint) included. index: a BoundaryIndex."""
    if r.name in BOUNDARY_NAMES:
        return r.name
    b = index.holding(r)
    return r.name if b is None else "%s/%s" % (b.name, r.name)


def is_boundary_name(name):
    """True for a name table_name() gives a range of the epoch boundary (eval, eval_step,
    eval/forward, checkpoint, ...)."""
    return name in BOUNDARY_NAMES or name.startswith(tuple("%s/" % b for b in BOUNDARY_RANGES))


def launched_in_boundary(op, index, main_tids):
    """True when device activity op was enqueued from a thread of main_tids (the steps' thread)
    while inside an epoch-boundary range (index: a BoundaryIndex): the evaluation's input copies,
    the checkpoint's device-to-host copies."""
    return (
        op.launch_ns is not None
        and op.launch_tid in main_tids
        and index.at(op.launch_ns) is not None
    )


def _num(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def _report_epochs(report):
    """(the epoch of each captured step record, in order, None where a record has none; {epoch:
    entry} of training.epochs) of a train_resnet50 run report; ([], {}) without them."""
    steps = report.get("steps") if isinstance(report, dict) else None
    epochs = [
        st.get("epoch")
        if isinstance(st, dict)
        and isinstance(st.get("epoch"), int)
        and not isinstance(st.get("epoch"), bool)
        else None
        for st in (steps if isinstance(steps, list) else ())
    ]
    training = report.get("training") if isinstance(report, dict) else None
    entries = training.get("epochs") if isinstance(training, dict) else None
    by_epoch = OrderedDict(
        (e["epoch"], e)
        for e in (entries if isinstance(entries, list) else ())
        if isinstance(e, dict) and isinstance(e.get("epoch"), int)
    )
    return epochs, by_epoch


def _epoch_of(after_step, step_epochs):
    """The epoch a boundary range after captured step after_step (None: before the first) ends: that
    step's epoch in the report, else the next captured step's less one; None when the report has
    neither.
    """
    if (
        after_step is not None
        and after_step < len(step_epochs)
        and step_epochs[after_step] is not None
    ):
        return step_epochs[after_step]
    following = 0 if after_step is None else after_step + 1
    if following < len(step_epochs) and step_epochs[following] is not None:
        return step_epochs[following] - 1
    return None


def _report_part(entry, key, fields):
    """The report's host-timed figures of an epoch's eval or checkpoint (entry[key], fields of it),
    None when the report has no such object."""
    part = entry.get(key) if isinstance(entry, dict) else None
    if not isinstance(part, dict):
        return None
    return OrderedDict((f, part.get(f) if f == "path" else _num(part.get(f))) for f in fields)


def epoch_boundary(ex, window, report=None):
    """summary.json's epoch_boundary: None when the window holds no eval or checkpoint range
    (window.boundary); else an OrderedDict, times in ms:

      step_median_ms   the median duration of the window's torch_step ranges (None without one):
                       what a training step costs, to compare with
      evals            per eval range, by start:
        start_ms, ms       its start (from the window's start) and duration
        after_step         the captured step it follows (the last torch_step ending before it), None
                           when it precedes them all
        epoch              the epoch whose end it is: the run report's epoch of that step (of the
                           step after it, less one, when it precedes them all); None without the
                           report's
        eval_steps, eval_step_median_ms
                           the eval_step ranges nested in it (same thread) and their median duration
        eval_reduce_ms     its eval_reduce range's duration (several summed), None without one
        h2d_copies         host-to-device copies it enqueued from the main thread (not in
                           h2d_copies)
        gpu_busy_pct, gpu_idle_ms
                           share of its time with any device activity (overlaps counted once) and
                           the time without; None without device data
        over_step_median   ms / step_median_ms
        report             the run report's host timing of that epoch's evaluation
                           (training.epochs[].eval: ms, steps, images, top1), None when the report
                           has none
      checkpoints      per checkpoint range, by start: start_ms, ms, after_step, epoch,
                       gpu_busy_pct, gpu_idle_ms, over_step_median as for evals, and report
                       (training.epochs[].checkpoint: ms, bytes, path)
    """
    if not window.boundary:
        return None
    steps = window.steps
    median = ms(statistics.median(st.duration for st in steps)) if steps else None
    device = ex.device_intervals() if ex.device_data else None
    main_tids = {st.tid for st in steps}
    index = BoundaryIndex(window.boundary)
    htod = (
        [c for c in ex.memcpys if c.is_htod and launched_in_boundary(c, index, main_tids)]
        if device is not None
        else []
    )
    step_epochs, by_epoch = _report_epochs(report)
    out = OrderedDict(step_median_ms=median, evals=[], checkpoints=[])
    for b in window.boundary:
        before = [i for i, st in enumerate(steps) if st.end <= b.start]
        after_step = before[-1] if before else None
        epoch = _epoch_of(after_step, step_epochs)
        row = OrderedDict(
            start_ms=ms(b.start - window.lo), ms=ms(b.duration), after_step=after_step, epoch=epoch
        )
        if b.name == EVAL:
            inner = [r for r in ex.ranges if b.contains(r)]
            evals = [r.duration for r in inner if r.name == EVAL_STEP]
            reduces = [r.duration for r in inner if r.name == EVAL_REDUCE]
            row["eval_steps"] = len(evals)
            row["eval_step_median_ms"] = ms(statistics.median(evals)) if evals else None
            row["eval_reduce_ms"] = ms(sum(reduces)) if reduces else None
            row["h2d_copies"] = (
                sum(1 for c in htod if index.at(c.launch_ns) is b) if device is not None else None
            )
        busy = union_length(device, b.start, b.end) if device is not None else None
        row["gpu_busy_pct"] = (
            round(100.0 * busy / b.duration, 6) if busy is not None and b.duration else None
        )
        row["gpu_idle_ms"] = ms(b.duration - busy) if busy is not None else None
        row["over_step_median"] = round(ms(b.duration) / median, 6) if median else None
        if b.name == EVAL:
            row["report"] = _report_part(
                by_epoch.get(epoch), EVAL, ("ms", "steps", "images", "top1")
            )
            out["evals"].append(row)
        else:
            row["report"] = _report_part(by_epoch.get(epoch), CHECKPOINT, ("ms", "bytes", "path"))
            out["checkpoints"].append(row)
    return out


def report_boundary_ms(boundary, report):
    """The host time (ms) a run report gives to the evaluations and checkpoints of summary
    epoch_boundary `boundary`, matched by their epochs (training.epochs[].eval.ms and
    .checkpoint.ms): what the same boundary took in another run of the same command, such as an
    untraced one. None when the report lacks one of them, or a boundary range's epoch is unknown."""
    _, by_epoch = _report_epochs(report)
    total = 0.0
    for key, rows in ((EVAL, boundary["evals"]), (CHECKPOINT, boundary["checkpoints"])):
        for row in rows:
            part = (
                _report_part(by_epoch.get(row["epoch"]), key, ("ms",))
                if row["epoch"] is not None
                else None
            )
            if part is None or part["ms"] is None:
                return None
            total += part["ms"]
    return total
