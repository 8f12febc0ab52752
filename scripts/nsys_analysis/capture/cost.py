"""What the capture itself cost: summary.json's capture_cost (capture_cost()), from the export, the
traced run's report and the reports of untraced runs of the same command (analyze.py --untraced;
scripts/profile.sh makes one after each capture).

Nsight Systems' CUDA trace wraps every runtime call (a traced cudaLaunchKernel takes 7-8 us on an
H200), so a thread that makes hundreds of calls a step, such as the GPU decode stage, can run slower
traced than the device does: the capture then shows a starved device that the untraced run keeps
busy, and its idle gaps blame the host phases whose calls the tracer slowed. capture_cost says how
much of that there is:

  throughput         traced images/s (the traced report's capture.images_per_s), the untraced runs'
                     (each, and their median) and traced / untraced
  tracer_bound       traced / untraced < 1 - max_slowdown (None without both figures)
  phases             host time per range and captured step (the reports' phase_ms, or step_ms,
                     batch_wait_ms and h2d_submit_ms where a report has no phase_ms): the median of
                     the traced report's steps and of the untraced reports' steps pooled, their
                     difference and ratio; `unknown` names the capture's phases a side cannot give
  api_calls          the window's CUDA runtime calls (those starting inside it, but not inside an
                     eval or checkpoint range of the epoch boundary, which no step made) per thread:
                     calls and traced time inside them (clipped to the window) per captured step,
                     and the most frequent calls; threads named from nsys's ThreadNames, the main
                     thread (the one of the torch_step ranges) marked; for the other threads, their
                     calls per unit of work (unit: the outermost NVTX range of the thread holding
                     most of its calls, gpu_decode for the decode stage; see _unit_of_work)
  profiler_overhead  nsys's PROFILER_OVERHEAD rows overlapping the window (clipped to it): by name,
                     by the thread they ran on, and by the main thread's step-level phase they
                     overlap (their time split by overlap; a row counts once, for its largest share;
                     "eval" and "checkpoint" inside the epoch boundary's ranges, "between steps"
                     outside every torch_step and those); the rows outside the window in total
  idle_explained     how much of the window's time without device activity the tracer explains
                     (below)
  trust              what to read from where, in words

The estimate of idle_explained. W: the traced window's duration; S: its captured steps; B: the batch
size (the traced report's capture.batch_size); U: the untraced images/s (median). The untraced run
takes W_u = S x B / U for the same steps, so the tracer added max(0, W - W_u); with I the window's
time without device activity (no_activity_pct of W), the tracer explains min(I, W - W_u) of it (ms,
and as a share of I). A window across an epoch's end leaves its eval and checkpoint ranges out of W,
and their time without device activity out of I (epoch_boundary_ms, epoch_boundary_idle_ms); the
untraced runs' images/s count their own evaluation and checkpoint of the same epochs, so W_u is
S x B / U less those runs' reported eval and checkpoint times (untraced_epoch_boundary_ms, the
median; W_u unknown when no untraced report gives them).
Per host range of the idle gaps (idle_gaps.host_by_range: host-caused gaps by the range they began
in, forward, backward, batch_wait, ...): the host time that range gained under the tracer,
(traced - untraced median) x S, next to the host-caused idle charged to it, and the share of that
idle it explains (the smaller of the two over the idle). Limits: it assumes the device work itself
takes as long traced as untraced (CUPTI adds a little to each kernel, so it slightly overstates the
tracer's share), and that the untraced run has the same idle structure (it cannot see the untraced
run's gaps); it bounds from above what removing the tracer could take off the idle time, that is
what cannot be blamed on the input pipeline, and is no measurement of either.
"""

import bisect
import math
import statistics
from collections import Counter, OrderedDict, defaultdict
from typing import Hashable

from .epochs import BoundaryIndex, report_boundary_ms
from .intervals import ms
from .phases import phase_names, step_phases
from .records import BATCH_WAIT, DATA_LOAD, H2D_SUBMIT, NORMALIZE, STEP, Range
from .report import FROM_NOTHING, report_metrics, step_phase_ms

# analyze.py --max-tracer-slowdown's default: a capture slower than 0.90x untraced is tracer-bound.
DEFAULT_MAX_SLOWDOWN = 0.10
# Call names listed per thread.
TOP_CALLS = 5
# profiler_overhead's buckets outside the main thread's step-level phases.
BETWEEN_STEPS = "between steps"
IN_STEP = "torch_step (no phase)"


def capture_cost(ex, s, window, report=None, untraced=(), max_slowdown=DEFAULT_MAX_SLOWDOWN):
    """summary.json's capture_cost (the module docstring says what each part holds). s: the summary
    so far (compute_summary() fills capture_window_ms, steps, no_activity_pct and idle_gaps first);
    window: its Window; report: the traced run's report (None when none); untraced: [(path, report)]
    of the untraced runs, [] when none was given."""
    out = OrderedDict()
    out["max_slowdown"] = max_slowdown
    out["throughput"] = _throughput(report, untraced)
    ratio = out["throughput"]["traced_over_untraced"]
    out["tracer_bound"] = None if ratio is None else ratio < 1 - max_slowdown
    out["phases"] = _phases(ex, window, report, [rep for _, rep in untraced], bool(untraced))
    main_tids = {r.tid for r in window.steps}
    out["api_calls"] = _api_calls(ex, window, main_tids)
    out["profiler_overhead"] = _profiler_overhead(ex, window, main_tids)
    out["idle_explained"] = _idle_explained(s, report, [rep for _, rep in untraced], out)
    out["trust"] = _trust(out)
    return out


def _ips(report):
    """A report's images/s when it is a positive finite number, else None."""
    value = report_metrics(report)["images_per_s"] if report is not None else None
    return value if value is not None and math.isfinite(value) and value > 0 else None


def _throughput(report, untraced):
    """Traced and untraced images/s, and their ratio."""
    traced = _ips(report)
    runs = [OrderedDict(report=path, images_per_s=_ips(rep)) for path, rep in untraced]
    values = [r["images_per_s"] for r in runs if r["images_per_s"] is not None]
    median = statistics.median(values) if values else None
    ratio = round(traced / median, 6) if traced is not None and median is not None else None
    if not untraced:
        note = (
            "no untraced run was given (analyze.py --untraced REPORT; scripts/profile.sh makes "
            "one): the traced figure alone, which the tracer may have slowed"
        )
    elif not values:
        note = "no untraced report gives images_per_s"
    elif traced is None:
        note = (
            "the traced run's report gives no images_per_s"
            if report is not None
            else "no traced run report"
        )
    else:
        note = (
            "untraced: one run"
            if len(values) == 1
            else "untraced: the median of %d runs" % len(values)
        )
    return OrderedDict(
        traced_images_per_s=traced,
        untraced_images_per_s=median,
        untraced_runs=runs,
        traced_over_untraced=ratio,
        note=note,
    )


def _median(values):
    return round(statistics.median(values), 6) if values else None


def _capture_phase_names(ex, window):
    """The capture's step-level phases in step order, data_load's nested ranges right after it
    (those of the training steps: eval's own batch_wait, h2d_submit and normalize do not count)."""
    names = phase_names(step_phases(ex.ranges, window.steps))
    main = {r.tid for r in window.steps}
    edge = BoundaryIndex(window.boundary)
    nested = {
        r.name
        for r in ex.ranges
        if r.tid in main
        and r.name in (BATCH_WAIT, H2D_SUBMIT, NORMALIZE)
        and window.holds(r)
        and edge.holding(r) is None
    }
    out = []
    for name in names:
        out.append(name)
        if name == DATA_LOAD:
            out += [n for n in (BATCH_WAIT, H2D_SUBMIT, NORMALIZE) if n in nested]
    return out


def _phases(ex, window, report, untraced_reports, untraced_given):
    """Host time per range, traced vs untraced (medians over captured steps)."""
    traced, traced_source = step_phase_ms(report)
    pooled: OrderedDict[str, list[float]] = OrderedDict()
    sources: list[str] = []
    for rep in untraced_reports:
        per, source = step_phase_ms(rep)
        sources.append(source)
        for name, values in per.items():
            pooled.setdefault(name, []).extend(values)
    names = [STEP] + _capture_phase_names(ex, window)
    names += [n for n in list(traced) + list(pooled) if n not in names]
    rows = []
    for name in names:
        t, u = _median(traced.get(name)), _median(pooled.get(name))
        rows.append(
            OrderedDict(
                phase=name,
                traced_ms=t,
                untraced_ms=u,
                difference_ms=round(t - u, 6) if t is not None and u is not None else None,
                ratio=round(t / u, 6) if t is not None and u else None,
                traced_steps=len(traced.get(name, ())),
                untraced_steps=len(pooled.get(name, ())),
            )
        )
    unknown = [
        r["phase"]
        for r in rows
        if r["traced_ms"] is None or (untraced_given and r["untraced_ms"] is None)
    ]
    if not untraced_given:
        untraced_source = None
    elif len(set(sources)) == 1:
        untraced_source = sources[0]
    else:
        untraced_source = "; ".join("%s: %s" % (i + 1, src) for i, src in enumerate(sources))
    return OrderedDict(
        traced_source=traced_source if report is not None else FROM_NOTHING,
        untraced_source=untraced_source,
        rows=rows,
        unknown=unknown,
    )


def _per_step(value, steps, digits=3):
    return round(value / steps, digits) if steps and value is not None else None


def _api_calls(ex, window, main_tids):
    """The window's runtime calls per thread, per captured step, but those starting inside an
    epoch-boundary range; None without a runtime table or window."""
    lo, hi = window.lo, window.hi
    if ex.api_calls is None or lo is None:
        return None
    steps = len(window.steps)
    edge = BoundaryIndex(window.boundary)
    by_tid = defaultdict(list)
    for call in ex.api_calls:
        if lo <= call.start < hi and edge.at(call.start) is None:
            by_tid[call.tid].append(call)
    threads = []
    for tid, calls in by_tid.items():
        traced_ns = sum(min(c.end, hi) - c.start for c in calls)
        counts = Counter(c.name for c in calls)
        top = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_CALLS]
        threads.append(
            OrderedDict(
                thread=ex.thread_name(tid),
                tid=tid,
                main=tid in main_tids,
                calls=len(calls),
                calls_per_step=_per_step(len(calls), steps),
                traced_ms=ms(traced_ns),
                traced_ms_per_step=_per_step(ms(traced_ns), steps, 6),
                top=[
                    OrderedDict(name=name, calls=n, per_step=_per_step(n, steps)) for name, n in top
                ],
                unit=None if tid in main_tids else _unit_of_work(ex, tid, calls, lo, hi, edge),
            )
        )
    threads.sort(key=lambda t: (-t["calls"], t["thread"], t["tid"] or 0))
    total = sum(t["calls"] for t in threads)
    return OrderedDict(
        steps=steps, calls=total, calls_per_step=_per_step(total, steps), threads=threads
    )


def _unit_of_work(ex, tid, calls, lo, hi, edge):
    """A helper thread's calls per unit of its work: among its outermost NVTX ranges (any domain)
    lying inside the window, the name whose ranges hold the most of its calls (gpu_decode for the
    GPU decode stage) and their count; the thread's window calls per such range (calls_per_range:
    every call of the thread, those of the work between the units too, such as the stage's resize)
    and the calls inside them per range (inside_per_range); None when no range of the thread holds a
    call. Like the calls, ranges starting inside an eval or checkpoint range of the epoch boundary
    (edge) are left out. A stage that runs ahead of the steps (by up to its prefetch) does a varying
    number of units inside a window of S steps, so its calls per step vary from capture to capture
    where its calls per unit do not."""
    if tid is None:
        return None
    mine = sorted(
        (
            r
            for r in list(ex.ranges) + list(ex.other_ranges)
            if r.tid == tid and lo <= r.start and r.end <= hi and edge.at(r.start) is None
        ),
        key=lambda r: (r.start, -r.end),
    )
    outer: list[Range] = []
    for r in mine:
        if (
            not outer or r.start >= outer[-1].end
        ):  # else inside (or across) the last outermost range
            outer.append(r)
    if not outer:
        return None
    starts = [r.start for r in outer]
    # name: [ranges, calls inside]
    by_name: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])
    for r in outer:
        by_name[r.name][0] += 1
    for c in calls:
        i = bisect.bisect_right(starts, c.start) - 1
        if i >= 0 and c.start < outer[i].end:
            by_name[outer[i].name][1] += 1
    name, (count, inside) = min(by_name.items(), key=lambda kv: (-kv[1][1], kv[0]))
    if not inside:
        return None
    return OrderedDict(
        range=name,
        ranges=count,
        calls_per_range=_per_step(len(calls), count),
        calls_inside=inside,
        inside_per_range=_per_step(inside, count),
    )


def _overlap(a, b, spans):
    """ns of [a, b] inside spans (which do not overlap), by span name."""
    out: defaultdict[str, int] = defaultdict(int)
    for sp in spans:
        if sp.start < b and sp.end > a:
            out[sp.name] += min(sp.end, b) - max(sp.start, a)
    return out


def _charge(a, b, steps, phases, boundary=()):
    """{bucket: ns} of [a, b]: each main-thread step-level phase it overlaps, the rest of a
    torch_step (IN_STEP), each epoch-boundary range of boundary (eval, checkpoint: outside every
    step) and the time outside every step and those (BETWEEN_STEPS). A zero-length row:
    {its bucket: 0}."""
    if a == b:
        holder = next((p.name for p in phases if p.start <= a < p.end), None)
        if holder is None and any(st.start <= a < st.end for st in steps):
            holder = IN_STEP
        if holder is None:
            holder = next((e.name for e in boundary if e.start <= a < e.end), BETWEEN_STEPS)
        return {holder: 0}
    shares = _overlap(a, b, phases)
    in_steps = sum(_overlap(a, b, steps).values())
    in_phases = sum(shares.values())
    if in_steps > in_phases:
        shares[IN_STEP] += in_steps - in_phases
    edges = _overlap(a, b, boundary)
    shares.update(edges)
    outside = b - a - in_steps - sum(edges.values())
    if outside > 0:
        shares[BETWEEN_STEPS] += outside
    return shares


def _grouped(items):
    """[(key, ns)] -> [{key, count, total_ms}], largest total first."""
    groups: OrderedDict[Hashable, list[int]] = OrderedDict()  # key: [count, ns]
    for key, ns in items:
        g = groups.setdefault(key, [0, 0])
        g[0] += 1
        g[1] += ns
    return sorted(
        ([k, n, t] for k, (n, t) in groups.items()), key=lambda g: (-g[2], -g[1], str(g[0]))
    )


def _profiler_overhead(ex, window, main_tids):
    """nsys's own time in the window, by name, thread and main-thread phase; None without the
    table."""
    rows = ex.profiler_overhead
    if rows is None:
        return None
    lo, hi = window.lo, window.hi
    # A zero-length row (nsys writes some) overlaps the window when it lies in it.
    held = [
        lo is not None and (o.start < hi and o.end > lo or lo <= o.start == o.end < hi)
        for o in rows
    ]
    inside = [o for o, h in zip(rows, held) if h]
    outside = [o for o, h in zip(rows, held) if not h]
    clipped = [(o, min(o.end, hi) - max(o.start, lo)) for o in inside]
    phases = step_phases(ex.ranges, window.steps)
    by_phase: defaultdict[str, list[int]] = defaultdict(lambda: [0, 0])  # bucket: [rows, ns]
    for o, _ in clipped:
        shares = _charge(max(o.start, lo), min(o.end, hi), window.steps, phases, window.boundary)
        for bucket, ns in shares.items():
            by_phase[bucket][1] += ns
        by_phase[max(sorted(shares), key=lambda k: shares[k])][0] += 1
    names = {o.tid: ex.thread_name(o.tid) for o in inside}
    return OrderedDict(
        count=len(inside),
        total_ms=ms(sum(ns for _, ns in clipped)),
        by_name=[
            OrderedDict(name=k, count=n, total_ms=ms(t))
            for k, n, t in _grouped((o.name, ns) for o, ns in clipped)
        ],
        by_thread=[
            OrderedDict(thread=names[tid], tid=tid, main=tid in main_tids, count=n, total_ms=ms(t))
            for tid, n, t in _grouped((o.tid, ns) for o, ns in clipped)
        ],
        by_phase=[
            OrderedDict(phase=k, count=v[0], total_ms=ms(v[1]))
            for k, v in sorted(by_phase.items(), key=lambda kv: (-kv[1][1], kv[0]))
        ],
        outside_window=OrderedDict(
            count=len(outside), total_ms=ms(sum(o.end - o.start for o in outside))
        ),
    )


def _idle_explained(s, report, untraced_reports, cost):
    """The share of the window's time without device activity that the tracer explains (module
    docstring)."""
    window_ms, steps, pct = s.get("capture_window_ms"), s.get("steps"), s.get("no_activity_pct")
    batch = report_metrics(report)["batch_size"] if report is not None else None
    untraced = cost["throughput"]["untraced_images_per_s"]
    eb = s.get("epoch_boundary")
    edge_ms, edge_idle = _boundary_time(eb)
    span = window_ms - edge_ms if window_ms is not None else None
    idle = (
        window_ms * pct / 100.0 - edge_idle if window_ms is not None and pct is not None else None
    )
    untraced_ms = steps * batch / untraced * 1e3 if steps and batch and untraced else None
    untraced_edge = None
    if eb:
        # The untraced runs' images/s count their own evaluation and checkpoint inside the window:
        # take those out as the traced side's are (their reports' times for the same epochs,
        # median).
        known = [
            v for v in (report_boundary_ms(eb, rep) for rep in untraced_reports) if v is not None
        ]
        untraced_edge = statistics.median(known) if known else None
        untraced_ms = (
            untraced_ms - untraced_edge
            if untraced_ms is not None and untraced_edge is not None
            else None
        )
    extra = max(0.0, span - untraced_ms) if untraced_ms is not None and span is not None else None
    explained = min(idle, extra) if idle is not None and extra is not None else None
    out = OrderedDict(
        method="min(I, W - S x B / U): I the window's time without device activity, W the window, "
        "S its steps, B the batch size, U the untraced images/s"
        + (
            "; W and I without the epoch boundary's eval and checkpoint ranges, S x B / U without "
            "the untraced runs' own evaluation and checkpoint time (their reports', median)"
            if eb
            else ""
        ),
        window_ms=window_ms,
    )
    if eb:
        out["epoch_boundary_ms"], out["epoch_boundary_idle_ms"] = _round(edge_ms), _round(edge_idle)
        out["untraced_epoch_boundary_ms"] = _round(untraced_edge)
    out.update(
        steps=steps,
        batch_size=batch,
        untraced_images_per_s=untraced,
        untraced_window_ms=_round(untraced_ms),
        tracer_extra_ms=_round(extra),
        no_activity_ms=_round(idle),
        explained_ms=_round(explained),
        explained_share=_round(explained / idle) if explained is not None and idle else None,
    )
    out["by_host_range"] = _by_host_range(s, cost["phases"]["rows"], steps)
    return out


def _boundary_time(eb):
    """(ms, ms without device activity) of the epoch boundary's eval and checkpoint ranges (summary
    epoch_boundary; None: none), (0, 0) without them; the second None without device data."""
    edges = (eb["evals"] + eb["checkpoints"]) if eb else []
    idle = [e["gpu_idle_ms"] for e in edges]
    return sum(e["ms"] for e in edges), None if None in idle else sum(idle)


def _round(value):
    return None if value is None else round(value, 6)


def _by_host_range(s, phase_rows, steps):
    """Per host range of the idle gaps: its host-caused idle, and the host time the tracer added to
    it."""
    gaps = (s.get("idle_gaps") or {}).get("host_by_range") or {}
    rows = {r["phase"]: r for r in phase_rows}
    out = []
    for name, d in gaps.items():
        diff = rows.get(name, {}).get("difference_ms")
        inflation = max(0.0, diff) * steps if diff is not None and steps else None
        explained = min(inflation, d["total_ms"]) if inflation is not None else None
        out.append(
            OrderedDict(
                host_range=name,
                gaps=d["count"],
                host_idle_ms=d["total_ms"],
                inflation_per_step_ms=diff,
                inflation_ms=_round(inflation),
                explained_ms=_round(explained),
                explained_share=_round(explained / d["total_ms"])
                if explained is not None and d["total_ms"]
                else None,
            )
        )
    return out


def _trust(cost):
    """What to read from where, in a few words each."""
    t = cost["throughput"]
    if cost["tracer_bound"]:
        first = (
            "throughput: the untraced %.1f images/s (the capture ran at %.2fx, the tracer's pace)"
            % (t["untraced_images_per_s"], t["traced_over_untraced"])
        )
    elif t["untraced_images_per_s"] is not None:
        first = (
            "throughput: the untraced %.1f images/s (the capture, at %s, is within the allowed "
            "slowdown)"
            % (
                t["untraced_images_per_s"],
                "?" if t["traced_over_untraced"] is None else "%.2fx" % t["traced_over_untraced"],
            )
        )
    else:
        first = (
            "throughput: the traced figure only, no untraced run given (the tracer's cost is "
            "unknown)"
        )
    out = [first, "order and overlap: the capture (what ran where, in which phase, beside what)"]
    idle = cost["idle_explained"]
    if cost["tracer_bound"] and idle["explained_ms"] is not None:
        out.append(
            "idle gaps and host stalls: up to %.1f ms of the window's %.1f ms without device "
            "activity are the tracer's (idle_explained), not the input pipeline's"
            % (idle["explained_ms"], idle["no_activity_ms"])
        )
    return out
