"""The step's phases on the device: every device activity of the capture window (kernel, copy,
memset, graph recorded whole) charged to the main thread's step-level phase in which it was launched
(gpu_time_by_phase()); intervals.SpanIndex over the phases attributes a time or an interval to one.

A step-level phase is a default-domain range directly inside a captured torch_step, on the step's
thread (the main thread): data_load, forward, zero_grad, backward, optimizer_step, loss_item
(--sync-every-step); with --cuda-graph, data_load and graph_replay (whose graph's nodes, traced with
--cuda-graph-trace=node, or the whole graph without it, correlate with its cudaGraphLaunch). Deeper
ranges belong to the phase around them: batch_wait, h2d_submit and normalize count under data_load,
the layer ranges of --nvtx-detail layers under forward. The epoch boundary's eval and checkpoint
ranges (records.BOUNDARY_RANGES; siblings of torch_step, with batch_wait, h2d_submit, normalize and
forward of their own inside eval_step) are no step's phases: work launched inside one is charged to
it, as "eval" or "checkpoint".
"""

import bisect
from collections import OrderedDict, defaultdict
from typing import NamedTuple

from .intervals import SpanIndex, ms
from .records import LOADER_DOMAIN, STEP, WINDOW

# Buckets of gpu_time_by_phase() besides the phases themselves.
# OUTSIDE: launched while the main thread was in no step-level phase, eval or checkpoint
OUTSIDE = "(outside phases)"
INPUT_PIPELINE = (
    "(input pipeline)"  # launched by a thread of the loader's domain (the GPU decode stage)
)
UNATTRIBUTED = "(unattributed)"  # no runtime call correlates with it
OTHER_BUCKETS = (OUTSIDE, INPUT_PIPELINE, UNATTRIBUTED)


class Phase(NamedTuple):
    """One step-level phase range of the captured step with index step (0 = first in the window)."""

    name: str
    start: int
    end: int
    step: int


def step_phases(ranges, steps):
    """The step-level phases of steps (the captured torch_step ranges, by start): the default-domain
    ranges lying directly inside each step on its thread, not inside another such range; by start.
    """
    by_tid = defaultdict(list)
    for r in ranges:
        if r.name not in (STEP, WINDOW):
            by_tid[r.tid].append(r)
    for rs in by_tid.values():
        rs.sort(key=lambda r: (r.start, -r.end))
    starts = {tid: [r.start for r in rs] for tid, rs in by_tid.items()}
    out = []
    for i, st in enumerate(steps):
        rs = by_tid.get(st.tid, [])
        last_end = None
        for j in range(bisect.bisect_left(starts.get(st.tid, []), st.start), len(rs)):
            r = rs[j]
            if r.start > st.end:
                break
            if r.end > st.end or (last_end is not None and r.start < last_end):
                continue  # crosses the step's end, or nests inside the previous phase
            out.append(Phase(r.name, r.start, r.end, i))
            last_end = r.end
    return out


def phase_names(phases):
    """Phase names in the order they first appear in a step (data_load, forward, ...)."""
    seen: OrderedDict[str, None] = OrderedDict()
    for p in sorted(phases, key=lambda p: (p.step, p.start)):
        seen.setdefault(p.name, None)
    return list(seen)


def input_pipeline_tids(ex, main_tids=()):
    """Threads holding ranges of the loader's domain (LOADER_DOMAIN): the loader's workers and the
    GPU decode stage. The main thread never counts as one."""
    return {
        r.tid for r in ex.other_ranges if r.domain == LOADER_DOMAIN and r.tid is not None
    } - set(main_tids)


def charge(op, index, pipeline_tids, boundary=None):
    """(bucket, Phase or None) of one device activity: its launching runtime call's phase (index: a
    SpanIndex of the phases), else the epoch-boundary range holding that call (boundary: a SpanIndex
    of them, None for none), named as the range (eval, checkpoint), with no Phase."""
    if op.launch_ns is None:
        return UNATTRIBUTED, None
    if op.launch_tid in pipeline_tids:
        return INPUT_PIPELINE, None
    p = index.find(op.launch_ns)
    if p is not None:
        return p.name, p
    b = boundary.find(op.launch_ns) if boundary is not None else None
    return (b.name, None) if b is not None else (OUTSIDE, None)


def gpu_time_by_phase(ex, lo, hi, phases, steps, main_tids, pipeline_tids, boundary=()):
    """Device time of the window (kernels, copies, memsets and graph executions recorded whole, each
    clipped to [lo, hi]; a whole graph counts from its first node's start to its last's end) by the
    main thread's step-level phase in which its runtime call started, whatever thread made the call
    (backward's kernels come from autograd's thread while the main thread sits in backward); work
    launched while the main thread was in one of boundary (the window's eval and checkpoint ranges:
    epochs.boundary_ranges()) is charged to that range's name instead.

    Returns an OrderedDict:
      by_phase_ms     phase -> ms, phases in step order, then eval and checkpoint (only when
                      boundary holds such a range), then OTHER_BUCKETS: OUTSIDE (launched while the
                      main thread was in no phase of a captured step nor in boundary: before the
                      window, between steps, in capture_drain), INPUT_PIPELINE (launched by a thread
                      of the loader's domain, which works for later steps, not for the phase it
                      happens to overlap), UNATTRIBUTED (no correlated runtime call). They add up to
                      total_ms.
      per_step_ms     phase -> [ms per captured step], None where that step has no such range
      main_thread_ms  phase (and eval, checkpoint) -> ms of the part launched from the main thread
                      itself
      counts          bucket -> activities
      total_ms        the summed device time of the window's activities (overlapping streams count
                      twice, so it may exceed device_busy_ms, the union)
      launch_tids     the threads that launched work charged to a phase (the step's threads)
    """
    names = phase_names(phases)
    index, edges = SpanIndex(phases), SpanIndex(boundary)
    edge_names = list(OrderedDict((b.name, None) for b in edges.spans))
    total = OrderedDict((n, 0) for n in names + edge_names + list(OTHER_BUCKETS))
    counts = OrderedDict((n, 0) for n in total)
    main = OrderedDict((n, 0) for n in names + edge_names)
    per_step: OrderedDict[str, list[int | None]] = OrderedDict(
        (n, [None] * len(steps)) for n in names
    )
    for p in phases:
        per_step[p.name][p.step] = 0
    launch_tids = set()
    for op in ex.device_activities():
        if op.end <= lo or op.start >= hi:
            continue
        ns = min(op.end, hi) - max(op.start, lo)
        bucket, p = charge(op, index, pipeline_tids, edges)
        total[bucket] += ns
        counts[bucket] += 1
        if bucket in main and op.launch_tid in main_tids:
            main[bucket] += ns
        if p is not None:
            per_step[bucket][p.step] += ns
            launch_tids.add(op.launch_tid)
    return OrderedDict(
        by_phase_ms=OrderedDict((k, ms(v)) for k, v in total.items()),
        per_step_ms=OrderedDict((k, [ms(v) for v in vs]) for k, vs in per_step.items()),
        main_thread_ms=OrderedDict((k, ms(v)) for k, v in main.items()),
        counts=counts,
        total_ms=ms(sum(total.values())),
        launch_tids=launch_tids,
    )
