"""The capture checks and the cross-check with nsys stats CSVs."""

import csv
import os
import re
from collections import OrderedDict

from .intervals import group_stats
from .records import BOUNDARY_RANGES


def capture_checks(s, window, device_data, report=None):
    """The checks of one capture, from the summary's numbers (compute_summary() fills s up to
    expected_steps_source first), its Window and the run report, if any. Returns (checks, details):
    OrderedDicts by check name; a check is True, False, or None when the export lacks what it needs.

      step_count             torch_step ranges in the window == the expected count (>= 1 without
                             one); the epoch boundary's eval and checkpoint ranges are no steps
      copy_count             host-to-device copies in the window == 2 x steps (images and labels of
                             each step; the evaluation's, enqueued inside eval, do not count); with
                             --decode gpu, none launched from the main thread and at least one from
                             the GPU decode stage's thread, which makes them all (the labels, the
                             crop list, the CPU path's images, nvJPEG's bitstream transfers); with
                             --synthetic (the run report's config), none at all
      capture_boundary       exactly one capture_window, every torch_step range inside it
      no_sync_in_steps       no synchronizing runtime call inside a step (see compute_summary)
      no_layout_conversions  no NCHW <-> NHWC conversion kernel launched inside a step (not
                             evaluable when none is seen but graphs were recorded whole, their
                             kernels unseen)
      injected_stalls        only when the run report's config.inject_stall names stalls: each is
                             found among s["host_stalls"] and no other host stall is
                             (injected_stalls_check())
      capture_cost           only when untraced runs' reports are given: traced / untraced images/s
                             >= 1 - max_slowdown, the capture not tracer-bound
                             (capture_cost_check())
      graph_replay           only in a --cuda-graph run: every captured step launches exactly one
                             graph, from its graph_replay range; the export holds the graphs'
                             kernels (nsys --cuda-graph-trace=node: graphs recorded whole count as
                             device activity but fail this); no kernel is launched in a step outside
                             a graph (graph_replay_check())
    """
    checks, details = OrderedDict(), OrderedDict()
    exp, exp_src = s["expected_steps"], s["expected_steps_source"]
    windows, all_steps, outside, lo = window.ranges, window.all_steps, window.outside, window.lo
    if exp is not None:
        checks["step_count"] = s["steps"] == exp
        details["step_count"] = "%d torch_step ranges in the window, expected %d (%s)" % (
            s["steps"],
            exp,
            exp_src,
        )
    else:
        checks["step_count"] = s["steps"] >= 1
        details["step_count"] = (
            "%d torch_step ranges in the window, expected >= 1 (no expected count given)"
            % s["steps"]
        )

    if not device_data:
        checks["copy_count"] = None
        details["copy_count"] = "not evaluable: the export has no CUDA tables"
    elif s.get("synthetic"):
        checks["copy_count"] = s["h2d_copies"] == 0
        details["copy_count"] = (
            "--synthetic: %d host-to-device copies in the window, expected 0 (the batch is "
            "made once on the device)" % s["h2d_copies"]
        )
    elif s.get("decode") == "gpu":
        main, stage = s.get("h2d_copies_main_thread"), s.get("h2d_copies_gpu_stage")
        checks["copy_count"] = (main or 0) == 0 and (stage or 0) >= 1
        details["copy_count"] = (
            "--decode gpu: %d host-to-device copies in the window, %s from the main thread "
            "(expected 0) and %s from the GPU decode stage's thread (expected >= 1)"
            % (s["h2d_copies"], "?" if main is None else main, "none" if stage is None else stage)
        )
    else:
        checks["copy_count"] = s["h2d_copies"] == 2 * s["steps"]
        details[
            "copy_count"
        ] = "%d host-to-device copies in the window, expected 2 x %d steps = %d" % (
            s["h2d_copies"],
            s["steps"],
            2 * s["steps"],
        )
    if device_data and s.get("epoch_boundary"):
        evals = s["epoch_boundary"]["evals"]
        details["copy_count"] += " (not counted: %d enqueued inside %d eval range%s)" % (
            sum(e["h2d_copies"] or 0 for e in evals),
            len(evals),
            "" if len(evals) == 1 else "s",
        )

    problems = []
    if len(windows) != 1:
        problems.append(
            "%d capture_window ranges (expected exactly 1)%s"
            % (
                len(windows),
                "; window taken as the span of the torch_step ranges"
                if not windows and all_steps
                else "",
            )
        )
    if outside:
        problems.append(
            "%d torch_step range(s) outside capture_window (first at %+.3f ms from the window "
            "start)" % (len(outside), (outside[0].start - lo) / 1e6)
        )
    if not all_steps:
        problems.append("no torch_step ranges")
    checks["capture_boundary"] = not problems
    details["capture_boundary"] = (
        "; ".join(problems)
        if problems
        else "1 capture_window; all %d torch_step ranges inside it" % len(all_steps)
    )

    if s["sync_calls_in_steps"] is None:
        checks["no_sync_in_steps"] = None
        details["no_sync_in_steps"] = "not evaluable: the export has no CUDA API (runtime) table"
    else:
        checks["no_sync_in_steps"] = s["sync_calls_in_steps"] == 0
        details["no_sync_in_steps"] = "%d synchronizing call(s) inside torch_step ranges%s" % (
            s["sync_calls_in_steps"],
            ""
            if not s["sync_calls_in_steps_by_name"]
            else ": " + ", ".join("%s x%d" % kv for kv in s["sync_calls_in_steps_by_name"].items()),
        )

    if s["layout_conversion_kernels"] is None:
        checks["no_layout_conversions"] = None
        details["no_layout_conversions"] = "not evaluable: the export has no CUDA tables"
    elif not s["layout_conversion_kernels"] and s.get("graph_executions"):
        # Zero conversions seen proves nothing when the graphs' kernels were not recorded.
        checks["no_layout_conversions"] = None
        details["no_layout_conversions"] = (
            "not evaluable: the window's %d graph executions were recorded whole, without their "
            "kernels (capture with nsys --cuda-graph-trace=node); 0 conversion kernels among the "
            "others" % s["graph_executions"]
        )
    else:
        checks["no_layout_conversions"] = s["layout_conversion_kernels"] == 0
        details[
            "no_layout_conversions"
        ] = "%d NCHW<->NHWC conversion kernel(s) launched inside torch_step ranges" % (
            s["layout_conversion_kernels"]
        )

    stalls = injected_stalls_check(s, report)
    if stalls is not None:
        checks["injected_stalls"], details["injected_stalls"] = stalls
    if s.get("cuda_graph"):
        checks["graph_replay"], details["graph_replay"] = graph_replay_check(s)
    cost = capture_cost_check(s)
    if cost is not None:
        checks["capture_cost"], details["capture_cost"] = cost
    return checks, details


def capture_cost_check(s):
    """The check capture_cost: None when no untraced run's report was given (the check is then
    absent, so that all_checks_pass and analyze.py --check are as without it); else (result,
    detail): True when the traced images/s are at least 1 - max_slowdown of the untraced median,
    False when less, None when either figure is missing."""
    cost = s.get("capture_cost")
    if not cost or not cost["throughput"]["untraced_runs"]:
        return None
    t, floor = cost["throughput"], 1 - cost["max_slowdown"]
    ratio = t["traced_over_untraced"]
    if ratio is None:
        return None, "not evaluable: %s" % t["note"]
    runs = sum(1 for r in t["untraced_runs"] if r["images_per_s"] is not None)
    detail = "traced %.1f images/s, %.3fx the untraced %.1f (%s); at least %.2fx needed" % (
        t["traced_images_per_s"],
        ratio,
        t["untraced_images_per_s"],
        "one run" if runs == 1 else "median of %d runs" % runs,
        floor,
    )
    if ratio < floor:
        detail += (
            ": tracer-bound, trust the untraced figures for throughput and the capture for order "
            "and overlap"
        )
    return ratio >= floor, detail


def graph_replay_check(s):
    """(result, detail) of the check graph_replay of a --cuda-graph run (see capture_checks())."""
    per_step = s.get("graph_launches_per_step")
    if per_step is None or s.get("graph_kernels") is None:
        return None, "not evaluable: the export has no CUDA runtime or kernel table"
    problems = []
    wrong = [(i, n) for i, n in enumerate(per_step) if n != 1]
    if wrong:
        problems.append(
            "step(s) without exactly one cudaGraphLaunch in graph_replay: %s"
            % ", ".join("%d (%d)" % w for w in wrong[:8])
            + (", ..." if len(wrong) > 8 else "")
        )
    whole = s.get("graph_executions") or 0
    if not s["graph_kernels"] and whole:
        problems.append(
            "the window's %d graph executions were recorded whole (nsys's default "
            "--cuda-graph-trace=graph), so device time, idle gaps and GPU time by phase count them "
            "as one activity each, but their kernels are not in the export: per-kernel detail "
            "needs a capture with nsys --cuda-graph-trace=node (scripts/profile.sh adds it for "
            "--cuda-graph)" % whole
        )
    elif not s["graph_kernels"]:
        problems.append(
            "no kernel of the window was launched by a cudaGraphLaunch: capture with nsys "
            "--cuda-graph-trace=node (scripts/profile.sh adds it for --cuda-graph), without which "
            "nsys records a replay as one range and not its kernels"
        )
    if s["kernels_outside_graphs_in_steps"]:
        problems.append(
            "%d kernel(s) launched inside steps outside a graph"
            % s["kernels_outside_graphs_in_steps"]
        )
    summary = (
        "%d of %d steps launch one graph from graph_replay; %d graph kernels in the window; %d "
        "kernels launched in steps outside a graph"
        % (
            len(per_step) - len(wrong),
            len(per_step),
            s["graph_kernels"],
            s["kernels_outside_graphs_in_steps"] or 0,
        )
    )
    return not problems, summary + ("; " + "; ".join(problems) if problems else "")


# train_resnet50 --inject-stall PHASE@STEP:MS, as the run report's config.inject_stall lists it.
STALL_SPEC = re.compile(r"^\s*([A-Za-z_]\w*)@(\d+):(\S+?)\s*$")
# How far a found stall's measured length may be from the injected MS, as a fraction of MS.
STALL_TOLERANCE = 0.05


def injected_stalls(report):
    """The stalls a train_resnet50 run report's config.inject_stall injected (a list of
    "PHASE@STEP:MS" strings; one string is taken as a list of one): [(text, phase, step, ms)], phase
    None where the text does not parse. [] when the report injected none."""
    config = report.get("config") if isinstance(report, dict) else None
    specs = config.get("inject_stall") if isinstance(config, dict) else None
    if specs is not None and not isinstance(specs, list):
        specs = [specs]  # one string is one stall; anything else one unreadable entry
    out: list[tuple[str, str | None, int | None, float | None]] = []
    for spec in specs or ():
        m = STALL_SPEC.match(spec) if isinstance(spec, str) else None
        try:
            ms = float(m.group(3)) if m else None
        except ValueError:
            ms = None
        # ms is a number only where m matched; testing m too tells mypy so.
        if m is not None and ms is not None and ms > 0 and ms != float("inf"):
            out.append((str(spec), m.group(1), int(m.group(2)), ms))
        else:
            out.append((str(spec), None, None, None))
    return out


def stall_length_ms(stall):
    """A host stall's measured length (an entry of summary host_stalls): stall_ms, the host's quiet
    interval less its usual length there; the gap itself without a runtime table."""
    for key in ("stall_ms", "quiet_ms", "gap_ms"):
        if stall.get(key) is not None:
            return stall[key]
    return None


def injected_stalls_check(s, report, tolerance=STALL_TOLERANCE, min_ms=1.0):
    """The check `injected_stalls` of a run that injected host stalls (train_resnet50 --inject-stall
    PHASE@STEP:MS sleeps MS ms on the main thread inside range PHASE of captured step STEP): None
    when the report injected none, so that the check is absent and all_checks_pass unchanged; else
    (result, detail): True when every injected stall is found and no other host stall is, None when
    the export cannot tell (no device data), False otherwise.

    Found: an entry of s["host_stalls"] (idle_gaps.host_stalls()) with the same step, and PHASE as
    its phase or its innermost range (batch_wait, h2d_submit and normalize nest in data_load), whose
    measured length (stall_length_ms()) is within tolerance (5 %) of MS; each entry matches one
    injection at most, the closest. No other: every unmatched entry measuring min_ms (1 ms) or more
    fails the check; shorter ones (the host at its usual pace where the device, no longer ahead
    after a stall, runs dry) are named in the detail and pass, and so are those of the epoch
    boundary (phase eval or checkpoint: the evaluation's and the checkpoint's own host time, no
    injection's). The length is the host's (the quiet interval less its usual length), not the
    device gap's, which the work still queued shortens: docs/BENCHMARKS.md, "Known-answer stalls",
    says how much.
    """
    wanted = injected_stalls(report)
    if not wanted:
        return None
    bad = [text for text, phase, _, _ in wanted if phase is None]
    if bad:
        return False, "unreadable config.inject_stall entr%s %s (expected PHASE@STEP:MS)" % (
            "y" if len(bad) == 1 else "ies",
            ", ".join(repr(b) for b in bad),
        )
    stalls = s.get("host_stalls")
    if stalls is None:
        return None, "not evaluable: the export has no CUDA tables (%d stall(s) injected)" % len(
            wanted
        )
    edge = [st for st in stalls if st["phase"] in BOUNDARY_RANGES]
    stalls = [st for st in stalls if st["phase"] not in BOUNDARY_RANGES]
    host_ms = _report_step_ms(report)
    used, found, missing = set(), [], []
    for text, phase, step, want in wanted:
        cands = [
            (abs(stall_length_ms(st) - want), i)
            for i, st in enumerate(stalls)
            if i not in used and st["step"] == step and phase in (st["phase"], st.get("range"))
        ]
        ok = [c for c in cands if c[0] <= tolerance * want]
        note = _report_note(host_ms, step)
        if ok:
            i = min(ok)[1]
            used.add(i)
            st = stalls[i]
            got = stall_length_ms(st)
            found.append(
                "%s: %.3f ms (%+.1f%%; gap %.3f ms at %.3f ms, quiet %s ms, usual %s ms)%s"
                % (
                    text,
                    got,
                    100.0 * (got - want) / want,
                    st["gap_ms"],
                    st["start_ms"],
                    _ms_text(st.get("quiet_ms")),
                    _ms_text(st.get("usual_quiet_ms")),
                    note,
                )
            )
        else:
            near = [st for st in stalls if st["step"] == step]
            missing.append(
                "%s not found (%s)%s"
                % (
                    text,
                    "; ".join(
                        "%s: %.3f ms, gap %.3f ms" % (_where(st), stall_length_ms(st), st["gap_ms"])
                        for st in near
                    )
                    if near
                    else "no host-caused gap >= 1 ms at step %d" % step,
                    note,
                )
            )
    extra: list[str] = []
    passed: list[str] = []
    for i, st in enumerate(stalls):
        if i in used:
            continue
        text = "%.3f ms at %.3f ms (gap %.3f ms; step %s, %s)" % (
            stall_length_ms(st),
            st["start_ms"],
            st["gap_ms"],
            "?" if st["step"] is None else st["step"],
            _where(st),
        )
        (extra if stall_length_ms(st) >= min_ms else passed).append(text)
    parts = ["%d injected, %d found within %g%%" % (len(wanted), len(found), 100 * tolerance)]
    parts += found + missing
    parts.append(
        "unexpected host stall(s): " + "; ".join(extra)
        if extra
        else "no other host stall >= %g ms" % min_ms
    )
    if passed:
        parts.append(
            "gaps >= 1 ms with the host at its usual pace (not stalls): " + "; ".join(passed)
        )
    if edge:
        parts.append(
            "host stalls of the epoch boundary (not injected): "
            + "; ".join(
                "%s %.3f ms at %.3f ms" % (st["phase"], stall_length_ms(st), st["start_ms"])
                for st in edge
            )
        )
    return not missing and not extra, "; ".join(parts)


def _where(stall):
    """ "forward", or "data_load/batch_wait" where the innermost range is a nested one."""
    phase, inner = stall["phase"], stall.get("range")
    if phase is None:
        return "no phase"
    return phase if inner in (None, phase) else "%s/%s" % (phase, inner)


def _ms_text(v):
    return "?" if v is None else "%.3f" % v


def _report_step_ms(report):
    """The run report's step_ms per captured step index, {} when it has none."""
    out = {}
    for rec in (report or {}).get("steps") or ():
        if (
            isinstance(rec, dict)
            and isinstance(rec.get("index"), int)
            and isinstance(rec.get("step_ms"), (int, float))
        ):
            out[rec["index"]] = rec["step_ms"]
    return out


def _report_note(host_ms, step):
    """ ", report step_ms X (median of the others Y)" for the step, "" without the report's
    timings."""
    others = sorted(v for k, v in host_ms.items() if k != step)
    if step not in host_ms or not others:
        return ""
    n = len(others)
    median = others[n // 2] if n % 2 else (others[n // 2 - 1] + others[n // 2]) / 2
    return ", report step_ms %.3f (median of the others %.3f)" % (host_ms[step], median)


def failed_checks(summary):
    """[(name, detail)] for checks that are false or not evaluable."""
    return [
        (k, summary["check_details"].get(k, ""))
        for k, v in summary["checks"].items()
        if v is not True
    ]


def crosscheck_stats(ex, csv_prefix):
    """Compare per-range totals with an nsys stats nvtx_sum CSV beside the export (names with or
    without the ':' domain prefix), and kernel / memcpy counts with the kernel and memory CSVs.
    Returns a dict (None when no CSV is found)."""
    out = OrderedDict()
    nvtx_csv = csv_prefix + "_nvtx_sum.csv"
    if os.path.isfile(nvtx_csv):
        mine = group_stats((r.name, r.duration) for r in ex.ranges)
        mismatches, compared = [], 0
        for row in read_stats_csv(nvtx_csv):
            domain, name = normalize_nvtx_name(row.get("Range") or row.get("Name") or "")
            if domain is not None:
                continue
            compared += 1
            got = mine.get(name)
            want = (int(float(row["Instances"])), int(float(row["Total Time (ns)"])))
            if got is None or (got.count, got.total_ns) != want:
                mismatches.append(name)
        out["nvtx_sum"] = OrderedDict(csv=nvtx_csv, compared=compared, mismatches=mismatches)
    kern_csv = csv_prefix + "_cuda_gpu_kern_sum.csv"
    if os.path.isfile(kern_csv) and ex.kernels is not None:
        rows = read_stats_csv(kern_csv)
        csv_n = sum(int(float(r["Instances"])) for r in rows)
        out["cuda_gpu_kern_sum"] = OrderedDict(
            csv=kern_csv,
            csv_launches=csv_n,
            export_launches=len(ex.kernels),
            match=csv_n == len(ex.kernels),
        )
    mem_csv = csv_prefix + "_cuda_gpu_mem_time_sum.csv"
    if os.path.isfile(mem_csv) and ex.memcpys is not None:
        rows = read_stats_csv(mem_csv)
        csv_h2d = sum(
            int(float(r["Count"])) for r in rows if "Host-to-Device" in r.get("Operation", "")
        )
        mine_h2d = sum(1 for c in ex.memcpys if c.is_htod)
        out["cuda_gpu_mem_time_sum"] = OrderedDict(
            csv=mem_csv, csv_h2d=csv_h2d, export_h2d=mine_h2d, match=csv_h2d == mine_h2d
        )
    return out or None


def normalize_nvtx_name(name):
    """Split an nsys-stats range name into (domain, name): ':torch_step' and 'torch_step' are the
    default domain (None); 'data_pipeline:load_batch' is domain data_pipeline; '::' (C++ scopes)
    never splits.
    """
    if name.startswith(":") and not name.startswith("::"):
        return None, name[1:]
    m = re.match(r"^([^:]+):(?!:)(.+)$", name)
    if m:
        return m.group(1), m.group(2)
    return None, name


def read_stats_csv(path):
    """Rows of an nsys stats CSV as dicts (header names as nsys writes them)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
