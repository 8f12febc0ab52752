"""Where the device sat idle inside the capture window, and why (idle_gaps()); the host stalls among
those gaps, measured on the host and attributed to a step and phase (host_stalls())."""

import bisect
from collections import OrderedDict, defaultdict
from typing import NamedTuple, Optional

from .epochs import BoundaryIndex
from .intervals import SpanIndex, ms
from .kernels import short_kernel_label
from .records import STEP, WINDOW, Kernel


# Upper bounds (microseconds) of the idle-gap histogram's buckets; the last bucket is open.
GAP_BUCKETS_US = (2, 10, 100, 1000)
GAP_CAUSES = ("host", "device", "unattributed", "tail")
GAP_BUCKET_LABELS = (
    ["< %d us" % GAP_BUCKETS_US[0]]
    + ["%d-%d us" % pair for pair in zip(GAP_BUCKETS_US, GAP_BUCKETS_US[1:])]
    + [">= %d us" % GAP_BUCKETS_US[-1]]
)
# The shortest gap host_stalls() lists.
HOST_STALL_MIN_MS = 1.0


class _Activity(NamedTuple):
    """A device activity as idle_gaps() sees it; name is the demangled kernel name, or the memory
    operation ("[memcpy Host-to-Device]", "[memset]") or graph recorded whole ("[CUDA graph 3]")."""

    start: int
    end: int
    name: str
    launch_ns: Optional[int]
    launch_tid: Optional[int]


class Gap(NamedTuple):
    """An interval of the window with no device activity, ns. next_name: the activity that ends it
    (None for the tail); host_range: for a host gap, the innermost range it began in;
    next_launch_ns: when the runtime call that enqueued the ending activity started (None when
    uncorrelated)."""

    start: int
    end: int
    cause: str
    next_name: Optional[str]
    host_range: Optional[str]
    next_launch_ns: Optional[int] = None

    @property
    def duration(self):
        return self.end - self.start


def _gap_bucket(ns):
    """The histogram label of a gap of ns nanoseconds."""
    return GAP_BUCKET_LABELS[bisect.bisect_right(GAP_BUCKETS_US, ns / 1000.0)]


class _RangeIndex:
    """Innermost default-domain range containing a time, per thread, for push/pop ranges (which
    nest on their thread: the containing range that started last is the innermost). A range lying in
    one of boundary (the window's eval and checkpoint ranges) is named by it: eval, checkpoint
    (epochs.BoundaryIndex.label())."""

    def __init__(self, ranges, boundary=()):
        self.boundary = BoundaryIndex(boundary)
        ranges = [r for r in ranges if r.name != WINDOW]
        self.by_tid = defaultdict(list)
        for r in sorted(ranges, key=lambda r: (r.start, -r.end)):
            self.by_tid[r.tid].append(r)
        self.all = sorted(ranges, key=lambda r: (r.start, -r.end))
        self.starts = {tid: [r.start for r in rs] for tid, rs in self.by_tid.items()}
        self.all_starts = [r.start for r in self.all]

    def _find(self, ranges, starts, t):
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0:
            if ranges[i].end >= t:
                return self.boundary.label(ranges[i])
            i -= 1
        return None

    def innermost(self, tid, t):
        """The name of the innermost range holding t on thread tid when it has a range there, else
        on any thread; None when none contains t."""
        if tid in self.by_tid:
            name = self._find(self.by_tid[tid], self.starts[tid], t)
            if name is not None:
                return name
        return self._find(self.all, self.all_starts, t)


def _activities(ex, lo, hi, skip_tids=()):
    """The device activities (Export.device_activities()) overlapping [lo, hi] (but those launched
    from skip_tids), by start."""
    acts = [
        _Activity(
            op.start,
            op.end,
            op.name if isinstance(op, Kernel) else op.operation,
            op.launch_ns,
            op.launch_tid,
        )
        for op in ex.device_activities()
    ]
    # Stable sort: activities starting together stay kernels, copies, memsets, graphs, in export
    # order.
    return sorted(
        (
            a
            for a in acts
            if a.end > lo
            and a.start < hi
            and (a.launch_tid is None or a.launch_tid not in skip_tids)
        ),
        key=lambda a: (a.start, a.launch_ns is None, a.launch_ns or 0),
    )


def _find_gaps(acts, lo, hi, index):
    """The uncovered intervals of [lo, hi] between acts (by start), with their causes
    (idle_gaps())."""
    gaps, cursor = [], lo
    for act in acts:
        if act.start > cursor:
            if act.launch_ns is None:
                cause, where = "unattributed", None
            elif act.launch_ns >= cursor:
                cause, where = "host", index.innermost(act.launch_tid, cursor)
            else:
                cause, where = "device", None
            gaps.append(Gap(cursor, act.start, cause, act.name, where, act.launch_ns))
        cursor = max(cursor, min(act.end, hi))
    if cursor < hi:
        gaps.append(Gap(cursor, hi, "tail", None, None))
    return gaps


def _next_label(name):
    """How a table names the activity that ends a gap: a memory operation as is, a kernel by its
    label."""
    return None if name is None else name if name.startswith("[") else short_kernel_label(name)


def idle_gaps(ex, lo, hi, ranges, top_n=8, boundary=()):
    """Every interval of [lo, hi] with no kernel, copy, memset or graph execution recorded whole,
    and why the device was idle there.

    A gap ends when the next device activity starts. Its cause:
      host          that activity was enqueued (its runtime call started) at or after the gap began:
                    the device had nothing queued, so the host set the gap's length. host_range is
                    the innermost default-domain range containing the gap's start on the enqueuing
                    thread (on any thread when that one has none): batch_wait means the loader,
                    h2d_submit the copy submission, a compute phase the launch rate; eval or
                    checkpoint, a range of the epoch boundary (boundary: the window's eval and
                    checkpoint ranges), whatever range nested in it (eval's own forward, batch_wait,
                    ...) holds the gap's start.
      device        that activity was enqueued before the gap began: the work was waiting on the
                    device (launch latency between queued operations, a wait on another stream's
                    event).
      unattributed  no runtime call correlates with that activity.
      tail          no activity follows inside the window (the end of the capture).
    Gap totals add up to the window minus the busy time of no_activity_pct.
    """
    gaps = _find_gaps(_activities(ex, lo, hi), lo, hi, _RangeIndex(ranges, boundary))
    causes = OrderedDict((c, {"count": 0, "total_ns": 0}) for c in GAP_CAUSES)
    buckets = OrderedDict((label, {"count": 0, "total_ns": 0}) for label in GAP_BUCKET_LABELS)
    host_ranges: defaultdict[str, dict[str, int]] = defaultdict(lambda: {"count": 0, "total_ns": 0})
    for g in gaps:
        for d in (causes[g.cause], buckets[_gap_bucket(g.duration)]) + (
            (host_ranges[g.host_range or "(no range)"],) if g.cause == "host" else ()
        ):
            d["count"] += 1
            d["total_ns"] += g.duration

    def out(d):
        return OrderedDict(count=d["count"], total_ms=ms(d["total_ns"]))

    largest = sorted(gaps, key=lambda g: (-g.duration, g.start))[:top_n]
    return OrderedDict(
        count=len(gaps),
        total_ms=ms(sum(g.duration for g in gaps)),
        causes=OrderedDict((c, out(d)) for c, d in causes.items()),
        histogram=[OrderedDict(bucket=k, **out(d)) for k, d in buckets.items()],
        host_by_range=OrderedDict(
            (k, out(d))
            for k, d in sorted(host_ranges.items(), key=lambda kv: (-kv[1]["total_ns"], kv[0]))
        ),
        largest=[
            OrderedDict(
                at_ms=ms(g.start - lo),
                gap_ms=ms(g.duration),
                cause=g.cause,
                host_range=g.host_range,
                next=_next_label(g.next_name),
            )
            for g in largest
        ],
    )


def _merged_calls(api_calls, tids):
    """(starts, ends) of the merged intervals in which a thread of tids was inside a runtime
    call."""
    merged: list[list[int]] = []  # [start, end]
    for c in sorted((c for c in api_calls if c.tid in tids), key=lambda c: c.start):
        if merged and c.start <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], c.end)
        else:
            merged.append([c.start, c.end])
    return [s for s, _ in merged], [e for _, e in merged]


def _quiet_interval(calls, gap, lo):
    """The longest interval in [lo, the gap's ending launch] that ends after the gap began and in
    which no thread of the merged calls was inside a runtime call (the earlier on a tie): (start,
    end, index of the merged call it follows, -1 when it starts at lo), or None when there is
    none."""
    starts, ends = calls
    launch = gap.next_launch_ns
    best = None
    k = bisect.bisect_right(starts, gap.start)
    while True:
        after = k - 1 if k > 0 and ends[k - 1] > lo else -1
        free_lo = ends[after] if after >= 0 else lo
        if free_lo >= launch:
            break
        free_hi = min(starts[k], launch) if k < len(starts) else launch
        if free_hi > max(free_lo, gap.start) and (
            best is None or free_hi - free_lo > best[1] - best[0]
        ):
            best = (free_lo, free_hi, after)
        if k >= len(starts):
            break
        k += 1
    return best


def _usual_quiet(calls, phases, phase, after):
    """The (lower) median length, over the other captured steps, of the call-free interval at the
    place of the one that follows merged call `after` in phase's step: the interval after the call
    as many merged calls from the start of that step's phase of the same name as `after` is from
    phase's start. None when no other step has it."""
    starts, ends = calls
    rel = after - bisect.bisect_left(starts, phase.start)
    lengths = []
    for p in phases:
        if p.name != phase.name or p.step == phase.step:
            continue
        i = bisect.bisect_left(starts, p.start) + rel
        if 0 <= i < len(starts) - 1:
            lengths.append(starts[i + 1] - ends[i])
    # The lower median: of two steps, one may hold a stall of its own there.
    return sorted(lengths)[(len(lengths) - 1) // 2] if lengths else None


def _innermost_longest(ranges, a, b):
    """The name of the range that is innermost for the longest time within [a, b], of ranges (one
    thread's push/pop ranges, which nest; by start), else None."""
    inside = [r for r in ranges if r.start < b and r.end > a]
    cuts = sorted({a, b} | {min(max(t, a), b) for r in inside for t in (r.start, r.end)})
    time: defaultdict[str, int] = defaultdict(int)
    for x, y in zip(cuts, cuts[1:]):
        holding = [r for r in inside if r.start <= x and y <= r.end]
        if holding:
            time[max(holding, key=lambda r: (r.start, -r.end)).name] += y - x
    return max(sorted(time), key=lambda name: time[name]) if time else None


def _shared(span, a, b):
    """ns that span (None: none) shares with [a, b]."""
    return 0 if span is None else max(0, min(span.end, b) - max(span.start, a))


def host_stalls(
    ex,
    lo,
    hi,
    ranges,
    phases,
    steps,
    step_tids,
    skip_tids=(),
    min_ms=HOST_STALL_MIN_MS,
    boundary=(),
):
    """The host gaps of at least min_ms in which the device ran none of the step's work, each
    attributed to a captured step and to the main thread's step-level phase (phases.step_phases())
    in which the host held the work back, or to the epoch-boundary range (boundary: the window's
    eval and checkpoint ranges) in which it did. A list, by start, of:

      start_ms, gap_ms   the gap: from the end of the step work the device had queued to the start
                         of the next, which the host enqueued only after the device had gone idle
                         (ms from the window start; its length). Activities launched from skip_tids
                         (the input pipeline's threads: the GPU decode stage) neither end nor split
                         a gap: they run beside the steps, not for them.
      quiet_start_ms, quiet_ms
                         the host's quiet interval: the longest interval, ending after the gap began
                         and before the runtime call that ended it, in which no thread of step_tids
                         (the main thread and the threads that launched phase work, e.g. autograd's)
                         was inside a CUDA runtime call. A host stall (a sleep, a blocked
                         batch_wait) is such an interval, whatever the device still had queued when
                         it began: quiet_ms measures the stall itself, plus the host's CPU time
                         without runtime calls on either side of it. None without a runtime table.
      usual_quiet_ms     the (lower) median length, over the other captured steps, of the call-free
                         interval at the same place in the same phase (after as many runtime calls
                         from the phase's start): the host's CPU time without runtime calls that the
                         quiet interval holds besides the stall (e.g. ~1 ms at the start of the C++
                         optimizer_step). None when no other step has the phase, or the quiet
                         interval starts at the window's start.
      stall_ms           quiet_ms - usual_quiet_ms (quiet_ms without a usual one): the stall itself.
      held_ms            gap end - quiet start = gap_ms + (gap start - quiet start): from the host's
                         last call before the stall to the device resuming. The gap alone is shorter
                         than the stall by the work the device drained first (held_ms - gap_ms: the
                         queue when the host went quiet); a stall shorter than that queue leaves no
                         gap at its place (the device runs dry later, at the host's next call-free
                         stretch, if at all).
      step, phase        the captured step and the main thread's step-level phase sharing the most
                         time with the quiet interval (with the gap where there is none); phase None
                         when no phase overlaps it (before the first step, in capture_drain), step
                         None when no captured step does either. Where a range of boundary shares
                         more of it than any phase, phase is that range's name (eval, checkpoint),
                         step None: no training step's stall, and usual_quiet_ms None.
      range              the main thread's range that is innermost for the longest part of that
                         interval: the phase itself, or a range nested in it (batch_wait, h2d_submit
                         or normalize in data_load; a layer of --nvtx-detail layers in forward; in
                         eval, eval's own eval_step, batch_wait, forward, ...).
      host_range, next   as in idle_gaps()'s largest: the innermost range at the gap's start on the
                         enqueuing thread, and the activity that ended the gap.
    """
    gaps = _find_gaps(_activities(ex, lo, hi, skip_tids), lo, hi, _RangeIndex(ranges, boundary))
    calls = _merged_calls(ex.api_calls, step_tids) if ex.api_calls is not None else None
    index, step_index, edges = SpanIndex(phases), SpanIndex(steps), SpanIndex(boundary)
    main_tids = {st.tid for st in steps}
    main_ranges = sorted(
        (r for r in ranges if r.tid in main_tids and r.name not in (STEP, WINDOW)),
        key=lambda r: (r.start, -r.end),
    )
    out = []
    for g in gaps:
        if g.cause != "host" or g.duration < round(min_ms * 1e6):
            continue
        quiet = _quiet_interval(calls, g, lo) if calls is not None else None
        a, b = quiet[:2] if quiet else (g.start, g.end)
        p, edge = index.longest_overlap(a, b), edges.longest_overlap(a, b)
        if _shared(edge, a, b) > _shared(p, a, b):
            # an eval or checkpoint range holds more of it than any phase: no training step's stall
            p = None
        else:
            edge = None
        holder = p if p is not None else edge
        if p is not None:
            step = p.step
        else:
            step = None if edge is not None else step_index.longest_overlap_index(a, b)
        usual = (
            _usual_quiet(calls, phases, p, quiet[2])
            if quiet is not None and p is not None and quiet[2] >= 0
            else None
        )
        out.append(
            OrderedDict(
                start_ms=ms(g.start - lo),
                gap_ms=ms(g.duration),
                quiet_start_ms=ms(quiet[0] - lo) if quiet else None,
                quiet_ms=ms(quiet[1] - quiet[0]) if quiet else None,
                usual_quiet_ms=ms(usual),
                stall_ms=ms(max(quiet[1] - quiet[0] - (usual or 0), 0)) if quiet else None,
                held_ms=ms(g.end - quiet[0]) if quiet else None,
                step=step,
                phase=holder.name if holder is not None else None,
                range=_innermost_longest(main_ranges, a, b) if holder is not None else None,
                host_range=g.host_range,
                next=_next_label(g.next_name),
            )
        )
    return out
