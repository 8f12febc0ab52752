"""Several captures of one configuration (scripts/profile.sh --repeat N): which one is the median
capture (median_capture()), and the spread of every headline figure across them (compute_repeats()),
so that one capture's numbers are read against the run-to-run variation and the untraced runs beside
them."""

import statistics
from collections import OrderedDict

from .report import report_metrics


def _ips(report):
    return report_metrics(report)["images_per_s"] if report is not None else None


def median_capture(reports):
    """The index of the median capture by its run report's images/s (the lower middle one of an even
    count; the earlier capture on a tie), or None when a report gives no images/s."""
    values = [_ips(rep) for rep in reports]
    if not values or any(v is None for v in values):
        return None
    order = sorted(range(len(values)), key=lambda i: (values[i], i))
    return order[(len(order) - 1) // 2]


def spread(values):
    """{min, median, max, values} of the values that are not None (min, median and max None when
    none is); values keeps every one, in order."""
    known = [v for v in values if v is not None]
    return OrderedDict(
        min=min(known) if known else None,
        median=round(statistics.median(known), 6) if known else None,
        max=max(known) if known else None,
        values=list(values),
    )


def _cost(s, *keys):
    """s["capture_cost"][keys[0]][keys[1]]..., None where a level is missing."""
    value = s.get("capture_cost")
    for key in keys:
        if not isinstance(value, dict):
            return None
        value = value.get(key)
    return value


# The headline figures of one capture: (key, label, how to read it from its summary).
HEADLINES = (
    (
        "traced_images_per_s",
        "traced images/s",
        lambda s: _cost(s, "throughput", "traced_images_per_s"),
    ),
    (
        "traced_over_untraced",
        "traced / untraced",
        lambda s: _cost(s, "throughput", "traced_over_untraced"),
    ),
    ("no_activity_pct", "window without device activity, %", lambda s: s.get("no_activity_pct")),
    ("batch_wait_total_ms", "batch_wait total ms", lambda s: s.get("batch_wait_total_ms")),
    ("batch_wait_max_ms", "longest batch_wait ms", lambda s: s.get("batch_wait_max_ms")),
    ("h2d_submit_total_ms", "h2d_submit total ms", lambda s: s.get("h2d_submit_total_ms")),
    (
        "profiler_overhead_ms",
        "profiler overhead in the window, ms",
        lambda s: _cost(s, "profiler_overhead", "total_ms"),
    ),
    (
        "idle_explained_ms",
        "idle the tracer explains, ms",
        lambda s: _cost(s, "idle_explained", "explained_ms"),
    ),
    (
        "idle_explained_share",
        "idle the tracer explains, share",
        lambda s: _cost(s, "idle_explained", "explained_share"),
    ),
)
MAIN_THREAD = "(main thread)"


def _calls_by_thread(s):
    """{thread label: CUDA calls per captured step}: the main thread as MAIN_THREAD, the others by
    name, summed over the threads sharing one (loader workers, say): thread ids differ from capture
    to capture, names do not."""
    calls = _cost(s, "api_calls")
    out: OrderedDict[str, float] = OrderedDict()
    for t in (calls or {}).get("threads") or ():
        if t["calls_per_step"] is None:
            continue
        label = MAIN_THREAD if t["main"] else t["thread"]
        out[label] = round(out.get(label, 0) + t["calls_per_step"], 3)
    return out


def _figures(summaries, untraced_ips):
    """The rows of repeats.json's figures: each headline, the untraced runs' images/s, calls per
    step."""
    rows = []
    for key, label, get in HEADLINES:
        values = spread([get(s) for s in summaries])
        rows.append(OrderedDict([("figure", key), ("label", label)] + list(values.items())))
        if key == "traced_images_per_s":
            rows.append(
                OrderedDict(
                    [("figure", "untraced_images_per_s"), ("label", "untraced images/s (each run)")]
                    + list(spread(untraced_ips).items())
                )
            )
    per = [_calls_by_thread(s) for s in summaries]
    threads = sorted({t for p in per for t in p}, key=lambda t: (t != MAIN_THREAD, t))
    for t in threads:
        label = (
            "CUDA calls per step, main thread"
            if t == MAIN_THREAD
            else "CUDA calls per step, %s" % t
        )
        rows.append(
            OrderedDict(
                [("figure", "calls_per_step:%s" % t), ("label", label)]
                + list(spread([p.get(t) for p in per]).items())
            )
        )
    units = [_calls_per_unit(s) for s in summaries]
    for unit_key in sorted({k for u in units for k in u}):
        thread, unit = unit_key
        rows.append(
            OrderedDict(
                [
                    ("figure", "calls_per_unit:%s:%s" % (thread, unit)),
                    ("label", "CUDA calls per %s, %s" % (unit, thread)),
                ]
                + list(spread([u.get(unit_key) for u in units]).items())
            )
        )
    return rows


def _calls_per_unit(s):
    """{(thread name, unit range): calls per unit of work} of the helper threads that have one (a
    thread name shared by several threads: the first, by calls)."""
    calls = _cost(s, "api_calls")
    out: OrderedDict[tuple[str, str], float] = OrderedDict()
    for t in (calls or {}).get("threads") or ():
        u = t.get("unit")
        if u and u["calls_per_range"] is not None:
            out.setdefault((t["thread"], u["range"]), u["calls_per_range"])
    return out


def _checks(summaries):
    """Each check's pass count over the captures that have it; values: each capture's result (true,
    false, null when not evaluable, "absent" where the capture has no such check)."""
    names = []
    for s in summaries:
        names += [n for n in s["checks"] if n not in names]
    out = []
    for name in names:
        values = [s["checks"].get(name, "absent") for s in summaries]
        present = [v for v in values if v != "absent"]
        passed = sum(1 for v in present if v is True)
        out.append(
            OrderedDict(
                check=name,
                passed=passed,
                of=len(present),
                text="%d of %d" % (passed, len(present)),
                values=values,
            )
        )
    return out


def compute_repeats(
    summaries, exports, reports, untraced_paths, untraced_reports, analysis_dirs, median, median_dir
):
    """repeats.json's numbers: summaries (summary.compute_summary() of each capture, in capture
    order, each with every untraced run), their exports, run reports (paths) and analysis
    directories; the untraced runs' report paths and reports; median, the index of the median
    capture (median_capture()), analysed with figures in median_dir. Figures and checks are listed
    by capture number, 1 = the first."""
    tracer_bound = [_cost(s, "tracer_bound") for s in summaries]
    return OrderedDict(
        captures=len(summaries),
        exports=list(exports),
        reports=list(reports),
        untraced_reports=list(untraced_paths),
        analysis_dirs=list(analysis_dirs),
        median_capture=median + 1,
        median_by="the run reports' traced images/s, the lower middle capture of an even count",
        median_analysis=median_dir,
        tracer_bound=OrderedDict(
            count=sum(1 for v in tracer_bound if v), of=len(tracer_bound), values=tracer_bound
        ),
        figures=_figures(summaries, [_ips(rep) for rep in untraced_reports]),
        checks=_checks(summaries),
    )
