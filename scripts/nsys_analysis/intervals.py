"""Interval arithmetic on nanosecond times: ms conversion, union length, uncovered gaps, grouped
duration statistics."""

from collections import OrderedDict, defaultdict
from typing import NamedTuple


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


class GroupStats(NamedTuple):
    """Durations (ns) and bytes of the items of one group_stats() key."""
    count: int
    total_ns: int
    min_ns: int
    max_ns: int
    nbytes: int


def group_stats(items):
    """items: (key, duration_ns[, bytes]) -> OrderedDict key -> GroupStats, largest total first (ties by
    the key's text)."""
    groups = defaultdict(list)
    nbytes = defaultdict(int)
    for item in items:
        groups[item[0]].append(item[1])
        if len(item) > 2:
            nbytes[item[0]] += item[2]
    out = OrderedDict()
    for key, durs in sorted(groups.items(), key=lambda kv: (-sum(kv[1]), str(kv[0]))):
        out[key] = GroupStats(len(durs), sum(durs), min(durs), max(durs), nbytes.get(key, 0))
    return out
