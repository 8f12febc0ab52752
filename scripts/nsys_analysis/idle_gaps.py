"""Where the device sat idle inside the capture window, and why (idle_gaps())."""

import bisect
from collections import OrderedDict, defaultdict
from typing import NamedTuple, Optional

from .intervals import ms
from .kernels import short_kernel_label
from .records import WINDOW


# Upper bounds (microseconds) of the idle-gap histogram's buckets; the last bucket is open.
GAP_BUCKETS_US = (2, 10, 100, 1000)
GAP_CAUSES = ("host", "device", "unattributed", "tail")
GAP_BUCKET_LABELS = (["< %d us" % GAP_BUCKETS_US[0]]
                     + ["%d-%d us" % pair for pair in zip(GAP_BUCKETS_US, GAP_BUCKETS_US[1:])]
                     + [">= %d us" % GAP_BUCKETS_US[-1]])


class _Activity(NamedTuple):
    """A kernel, copy or memset as idle_gaps() sees it; name is the demangled kernel name or the
    memory operation ("[memcpy Host-to-Device]", "[memset]")."""
    start: int
    end: int
    name: str
    launch_ns: Optional[int]
    launch_tid: Optional[int]


class Gap(NamedTuple):
    """An interval of the window with no device activity, ns. next_name: the activity that ends it
    (None for the tail); host_range: for a host gap, the innermost range it began in."""
    start: int
    end: int
    cause: str
    next_name: Optional[str]
    host_range: Optional[str]

    @property
    def duration(self):
        return self.end - self.start


def _gap_bucket(ns):
    """The histogram label of a gap of ns nanoseconds."""
    return GAP_BUCKET_LABELS[bisect.bisect_right(GAP_BUCKETS_US, ns / 1000.0)]


class _RangeIndex:
    """Innermost default-domain range containing a time, per thread, for push/pop ranges (which
    nest on their thread: the containing range that started last is the innermost)."""

    def __init__(self, ranges):
        ranges = [r for r in ranges if r.name != WINDOW]
        self.by_tid = defaultdict(list)
        for r in sorted(ranges, key=lambda r: (r.start, -r.end)):
            self.by_tid[r.tid].append(r)
        self.all = sorted(ranges, key=lambda r: (r.start, -r.end))
        self.starts = {tid: [r.start for r in rs] for tid, rs in self.by_tid.items()}
        self.all_starts = [r.start for r in self.all]

    @staticmethod
    def _find(ranges, starts, t):
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0:
            if ranges[i].end >= t:
                return ranges[i].name
            i -= 1
        return None

    def innermost(self, tid, t):
        """On thread tid when it has a range there, else on any thread; None when none contains t."""
        if tid in self.by_tid:
            name = self._find(self.by_tid[tid], self.starts[tid], t)
            if name is not None:
                return name
        return self._find(self.all, self.all_starts, t)


def idle_gaps(ex, lo, hi, ranges, top_n=8):
    """Every interval of [lo, hi] with no kernel, copy or memset, and why the device was idle there.

    A gap ends when the next device activity starts. Its cause:
      host          that activity was enqueued (its runtime call started) at or after the gap began:
                    the device had nothing queued, so the host set the gap's length. host_range is the
                    innermost default-domain range containing the gap's start on the enqueuing thread
                    (on any thread when that one has none): batch_wait means the loader, h2d_submit the
                    copy submission, a compute phase the launch rate.
      device        that activity was enqueued before the gap began: the work was waiting on the device
                    (launch latency between queued operations, a wait on another stream's event).
      unattributed  no runtime call correlates with that activity.
      tail          no activity follows inside the window (the end of the capture).
    Gap totals add up to the window minus the busy time of no_activity_pct.
    """
    acts = ([_Activity(k.start, k.end, k.name, k.launch_ns, k.launch_tid) for k in ex.kernels]
            + [_Activity(c.start, c.end, c.operation, c.launch_ns, c.launch_tid) for c in ex.memcpys]
            + [_Activity(m.start, m.end, m.operation, m.launch_ns, m.launch_tid) for m in ex.memsets])
    # Stable sort: activities starting together stay kernels, copies, memsets, in export order.
    acts = sorted((a for a in acts if a.end > lo and a.start < hi),
                  key=lambda a: (a.start, a.launch_ns is None, a.launch_ns or 0))
    index = _RangeIndex(ranges)
    gaps, cursor = [], lo
    for act in acts:
        if act.start > cursor:
            if act.launch_ns is None:
                cause, where = "unattributed", None
            elif act.launch_ns >= cursor:
                cause, where = "host", index.innermost(act.launch_tid, cursor)
            else:
                cause, where = "device", None
            gaps.append(Gap(cursor, act.start, cause, act.name, where))
        cursor = max(cursor, min(act.end, hi))
    if cursor < hi:
        gaps.append(Gap(cursor, hi, "tail", None, None))

    causes = OrderedDict((c, {"count": 0, "total_ns": 0}) for c in GAP_CAUSES)
    buckets = OrderedDict((label, {"count": 0, "total_ns": 0}) for label in GAP_BUCKET_LABELS)
    host_ranges = defaultdict(lambda: {"count": 0, "total_ns": 0})
    for g in gaps:
        for d in (causes[g.cause], buckets[_gap_bucket(g.duration)]) + (
                (host_ranges[g.host_range or "(no range)"],) if g.cause == "host" else ()):
            d["count"] += 1
            d["total_ns"] += g.duration

    def out(d):
        return OrderedDict(count=d["count"], total_ms=ms(d["total_ns"]))

    def next_label(name):
        return None if name is None else name if name.startswith("[") else short_kernel_label(name)
    largest = sorted(gaps, key=lambda g: (-g.duration, g.start))[:top_n]
    return OrderedDict(
        count=len(gaps),
        total_ms=ms(sum(g.duration for g in gaps)),
        causes=OrderedDict((c, out(d)) for c, d in causes.items()),
        histogram=[OrderedDict(bucket=k, **out(d)) for k, d in buckets.items()],
        host_by_range=OrderedDict((k, out(d)) for k, d in sorted(
            host_ranges.items(), key=lambda kv: (-kv[1]["total_ns"], kv[0]))),
        largest=[OrderedDict(at_ms=ms(g.start - lo), gap_ms=ms(g.duration), cause=g.cause,
                             host_range=g.host_range, next=next_label(g.next_name))
                 for g in largest])
