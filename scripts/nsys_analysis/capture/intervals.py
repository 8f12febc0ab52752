"""Interval arithmetic on nanosecond times: ms conversion, union length, uncovered gaps, the span
holding a time (SpanIndex), grouped duration statistics."""

import bisect
from collections import OrderedDict, defaultdict
from typing import Hashable, NamedTuple


def ms(ns):
    """ns -> ms, rounded to the ns so that exact inputs give exact outputs."""
    return None if ns is None else round(ns / 1e6, 6)


def union_length(intervals, lo, hi):
    """Length covered by intervals clipped to [lo, hi]; overlaps count once."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi)
    total, cur_s, cur_e = 0, None, None
    for s, e in clipped:
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def merged_gaps(intervals, lo, hi):
    """Gaps in [lo, hi] not covered by any interval, as (start, end) pairs."""
    gaps, cursor = [], lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if s > cursor:
            gaps.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < hi:
        gaps.append((cursor, hi))
    return gaps


class SpanIndex:
    """Which of some spans (anything with start and end: the captured steps, a step's phases, one
    thread's graph_replay ranges) holds a time or overlaps an interval, by bisection: the one lookup
    the analysis makes for "which step does this timestamp fall in". The spans must not overlap;
    spans holds them sorted by start."""

    def __init__(self, spans):
        self.spans = sorted(spans, key=lambda s: s.start)
        self.starts = [s.start for s in self.spans]

    def index_of(self, t):
        """The position in spans of the span with start <= t <= end (the later one where two meet),
        else None."""
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and t <= self.spans[i].end:
            return i
        return None

    def find(self, t):
        """The span holding t (index_of()), else None."""
        i = self.index_of(t)
        return None if i is None else self.spans[i]

    def longest_overlap_index(self, a, b):
        """The position in spans of the span sharing the most time with [a, b] (the earlier on a
        tie), else None."""
        best, best_ns = None, 0
        i = max(bisect.bisect_right(self.starts, a) - 1, 0)
        while i < len(self.spans) and self.spans[i].start < b:
            shared = min(self.spans[i].end, b) - max(self.spans[i].start, a)
            if shared > best_ns:
                best, best_ns = i, shared
            i += 1
        return best

    def longest_overlap(self, a, b):
        """The span sharing the most time with [a, b] (longest_overlap_index()), else None."""
        i = self.longest_overlap_index(a, b)
        return None if i is None else self.spans[i]


class GroupStats(NamedTuple):
    """Durations (ns) and bytes of the items of one group_stats() key."""

    # The field count shadows tuple.count(), which mypy reports as an incompatible override; its
    # readers (summary, checks) use the field, so the name stays.
    count: int  # type: ignore[assignment]
    total_ns: int
    min_ns: int
    max_ns: int
    nbytes: int


def group_stats(items):
    """items: (key, duration_ns[, bytes]) -> OrderedDict key -> GroupStats, largest total first
    (ties by the key's text)."""
    groups: defaultdict[Hashable, list[int]] = defaultdict(list)
    nbytes: defaultdict[Hashable, int] = defaultdict(int)
    for item in items:
        groups[item[0]].append(item[1])
        if len(item) > 2:
            nbytes[item[0]] += item[2]
    out = OrderedDict()
    for key, durs in sorted(groups.items(), key=lambda kv: (-sum(kv[1]), str(kv[0]))):
        out[key] = GroupStats(len(durs), sum(durs), min(durs), max(durs), nbytes.get(key, 0))
    return out
