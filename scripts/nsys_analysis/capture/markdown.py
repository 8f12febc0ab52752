"""summary.md: the tables a reader of one capture needs; ranks.md: those of a data-parallel run's
ranks; repeats.md: the spread of several captures of one configuration."""

from ..common.formatting import fmt, table
from .records import BATCH_WAIT, CHECKPOINT, DATA_LOAD, EVAL, H2D_SUBMIT, STEP


def render_markdown(s):
    """summary.md: the tables a reader of the capture needs."""
    out = ["# Nsight Systems capture summary", ""]
    out += tracer_bound_paragraph(s)
    out.append(
        "- export: `%s`%s"
        % (s["export"], " (nsys %s)" % s["nsys_version"] if s["nsys_version"] else "")
    )
    out.append(
        "- capture window: %s ms (%s)" % (fmt(s["capture_window_ms"]), s["capture_window_source"])
    )
    out.append(
        "- torch_step ranges in the window: %d (expected: %s, %s)"
        % (s["steps"], fmt(s["expected_steps"]), s["expected_steps_source"])
    )
    out.append(
        "- no recorded kernel, copy, memset or graph execution: %s%% of the window"
        % fmt(s["no_activity_pct"], 2)
    )
    out.append(starved_line(s))
    if s.get("graph_executions"):
        out.append(
            "- CUDA graph executions recorded whole (no --cuda-graph-trace=node): %d in the "
            "window, counted as device activity; their kernels are not in the export"
            % s["graph_executions"]
        )
    if s.get("decode") == "gpu":
        out.append(
            "- host-to-device copies in the window: %s (--decode gpu: %s from the main thread, %s "
            "from the GPU decode stage)"
            % (
                fmt(s["h2d_copies"]),
                fmt(s.get("h2d_copies_main_thread")),
                fmt(s.get("h2d_copies_gpu_stage")),
            )
        )
    else:
        out.append("- host-to-device copies in the window: %s" % fmt(s["h2d_copies"]))
    if "images_per_s" in s:
        out.append("- throughput (run report): %s images/s" % fmt(s["images_per_s"], 1))
    if s["last_device_end_after_last_step_ms"] is not None:
        out.append(
            "- device work after the last host step ends (final drain): %s ms"
            % fmt(s["last_device_end_after_last_step_ms"])
        )
    out += _capture_cost_section(s)
    gaps = s.get("idle_gaps")
    if gaps and gaps["count"]:
        out += [
            "",
            "## Where the device sat idle (gaps between recorded activities, inside the window)",
            "",
            "A gap is `host` when the operation that ended it was enqueued only after the device "
            "had gone idle (the host, not the device, set its length), `device` when that "
            "operation was already queued (launch latency between queued work, or a wait on "
            "another stream).",
            "",
        ]
        out.append(
            table(
                ["cause", "gaps", "total ms"],
                [(c, d["count"], fmt(d["total_ms"])) for c, d in gaps["causes"].items()],
                ["l", "r", "r"],
            )
        )
        out += [""]
        out.append(
            table(
                ["gap length", "gaps", "total ms"],
                [(h["bucket"], h["count"], fmt(h["total_ms"])) for h in gaps["histogram"]],
                ["l", "r", "r"],
            )
        )
        if gaps["host_by_range"]:
            out += ["", "Host gaps by the host range they began in:", ""]
            out.append(
                table(
                    ["host range", "gaps", "total ms"],
                    [(k, d["count"], fmt(d["total_ms"])) for k, d in gaps["host_by_range"].items()],
                    ["l", "r", "r"],
                )
            )
        out += ["", "Largest gaps:", ""]
        out.append(
            table(
                ["at ms", "gap ms", "cause", "host range", "next activity"],
                [
                    (
                        fmt(g["at_ms"]),
                        fmt(g["gap_ms"]),
                        g["cause"],
                        g["host_range"] or "",
                        g["next"] or "",
                    )
                    for g in gaps["largest"]
                ],
                ["r", "r", "l", "l", "l"],
            )
        )
    out += _host_stalls_section(s)
    out += ["", "## Checks", ""]
    out.append(
        table(
            ["check", "result", "detail"],
            [
                (k, "not evaluable" if v is None else fmt(v), s["check_details"][k])
                for k, v in s["checks"].items()
            ],
            ["l", "l", "l"],
        )
    )
    out += [
        "",
        "## NVTX phases (default domain, inside the window)",
        "",
        "Ranges nest (batch_wait and h2d_submit lie inside data_load, everything inside "
        "torch_step), so totals are not exclusive buckets.%s"
        % (
            " The evaluation's own ranges nested in eval_step are listed as eval/NAME "
            "(eval/forward: its forward passes, no training phase's)."
            if s.get("epoch_boundary")
            else ""
        ),
        "",
    ]
    out.append(
        table(
            ["range", "count", "total ms", "avg ms", "min ms", "max ms"],
            [
                (
                    p["name"],
                    p["count"],
                    fmt(p["total_ms"]),
                    fmt(p["avg_ms"]),
                    fmt(p["min_ms"]),
                    fmt(p["max_ms"]),
                )
                for p in s["phases"]
            ],
        )
    )
    if s["steps"]:
        out += ["", "## Per step (host ranges, ms)", ""]
        out.append(
            table(
                ["step", STEP, DATA_LOAD, BATCH_WAIT, H2D_SUBMIT],
                [
                    (
                        i,
                        fmt(s["step_ms"][i]),
                        fmt(s["data_load_ms"][i]),
                        fmt(s["batch_wait_ms"][i]),
                        fmt(s["h2d_submit_ms"][i]),
                    )
                    for i in range(s["steps"])
                ],
            )
        )
        if s["batch_wait_max_ms"] is not None:
            out += [
                "",
                "batch_wait total %s ms, longest %s ms at step %d; h2d_submit total %s ms."
                % (
                    fmt(s["batch_wait_total_ms"]),
                    fmt(s["batch_wait_max_ms"]),
                    s["batch_wait_max_step"],
                    fmt(s["h2d_submit_total_ms"]),
                ),
            ]
    out += _gpu_phases_section(s)
    out += _epoch_boundary_section(s)
    if s["top_kernels"]:
        out += ["", "## Largest kernel groups (identical demangled names, whole export)", ""]
        out.append(
            table(
                ["#", "label", "launches", "total ms", "avg us", "% kernel time", "demangled name"],
                [
                    (
                        k["rank"],
                        k["label"],
                        k["launches"],
                        fmt(k["total_ms"]),
                        fmt(k["avg_us"], 1),
                        fmt(k["pct"], 1),
                        "`%s`" % (k["name"][:110] + ("..." if len(k["name"]) > 110 else "")),
                    )
                    for k in s["top_kernels"]
                ],
                ["r", "l", "r", "r", "r", "r", "l"],
            )
        )
    if s.get("kernel_families"):
        out += ["", "## Kernel time by family (whole export)", ""]
        out.append(
            table(
                ["family", "launches", "total ms", "ms per step", "% kernel time"],
                [
                    (
                        f["family"],
                        f["launches"],
                        fmt(f["total_ms"]),
                        fmt(f.get("ms_per_step")),
                        fmt(f["pct"], 1),
                    )
                    for f in s["kernel_families"]
                ],
                ["l", "r", "r", "r", "r"],
            )
        )
        other = next(
            (f for f in s["kernel_families"] if f["family"] == "other" and f.get("parts")), None
        )
        if other:
            out += [
                "",
                "Largest in other: "
                + "; ".join(
                    "%s %s ms (%s%%, %d launches)"
                    % (p["label"], fmt(p["total_ms"]), fmt(p["pct"], 1), p["launches"])
                    for p in other["parts"]
                ),
            ]
    if s["memory_operations"]:
        out += ["", "## Memory operations (whole export)", ""]
        out.append(
            table(
                ["operation", "count", "total ms", "avg us", "max us", "MB"],
                [
                    (
                        m["operation"],
                        m["count"],
                        fmt(m["total_ms"]),
                        fmt(m["avg_us"], 1),
                        fmt(m["max_us"], 1),
                        fmt(m["bytes"] / 1e6, 1),
                    )
                    for m in s["memory_operations"]
                ],
            )
        )
    if s["api_calls"]:
        out += ["", "## CUDA API calls (whole export, top 15 by total time)", ""]
        out.append(
            table(
                ["call", "calls", "total ms", "avg us", "max ms"],
                [
                    (
                        a["name"],
                        a["calls"],
                        fmt(a["total_ms"]),
                        fmt(a["avg_us"], 1),
                        fmt(a["max_ms"]),
                    )
                    for a in s["api_calls"][:15]
                ],
            )
        )
    if s["other_domain_ranges"]:
        out += ["", "## Ranges of other NVTX domains (not steps or phases)", ""]
        out.append(
            table(
                ["domain", "range", "count", "total ms"],
                [
                    (r["domain"], r["name"], r["count"], fmt(r["total_ms"]))
                    for r in s["other_domain_ranges"]
                ],
                ["l", "l", "r", "r"],
            )
        )
    if s.get("layout_conversion_names"):
        out += ["", "## Layout-conversion kernels found", ""]
        out += ["- `%s` x%d" % (n[:120], c) for n, c in s["layout_conversion_names"].items()]
    if s.get("stats_crosscheck"):
        out += ["", "## Cross-check with the nsys stats CSVs", ""]
        for name, v in s["stats_crosscheck"].items():
            out.append(
                "- %s: %s" % (name, ", ".join("%s=%s" % kv for kv in v.items() if kv[0] != "csv"))
            )
    return "\n".join(out) + "\n"


def starved_line(s):
    """summary.md's answer to "did the input pipeline starve the GPU?" (summary input_starved)."""
    st = s.get("input_starved")
    if st is None:
        return "- GPU starved by the input pipeline: unknown (no device activity in the export)"
    where = (
        ", most of it in %s" % max(st["by_range"], key=lambda k: st["by_range"][k])
        if st["by_range"]
        else ""
    )
    line = (
        "- GPU starved by the input pipeline: **%s**: idle waiting on it %s%% of the window "
        "(%s ms%s; starved from %g%%)"
        % (
            "yes" if st["starved"] else "no",
            fmt(st["idle_pct"], 2),
            fmt(st["idle_ms"], 3),
            where,
            st["threshold_pct"],
        )
    )
    cost = s.get("capture_cost")
    if cost and cost["tracer_bound"]:
        line += "; the capture is tracer-bound: read the untraced throughput below"
    return line


def _n(value, digits=0):
    """A number with thousands separators (3,608), or n/a."""
    return "n/a" if value is None else "{:,.{}f}".format(value, digits)


def _calls(value):
    """Calls per step: 645, or 129.5 when not whole."""
    return "n/a" if value is None else "%d" % value if float(value).is_integer() else "%.1f" % value


def _thread_label(t):
    return "%s (main thread)" % t["thread"] if t["main"] else t["thread"]


def tracer_bound_paragraph(s):
    """summary.md's opening warning when the capture is tracer-bound (capture_cost.tracer_bound),
    else []: the throughput traced and untraced, what to trust, how much idle the tracer explains,
    the threads that made the most runtime calls."""
    cost = s.get("capture_cost")
    if not cost or not cost["tracer_bound"]:
        return []
    t, idle = cost["throughput"], cost["idle_explained"]
    runs = sum(1 for r in t["untraced_runs"] if r["images_per_s"] is not None)
    text = (
        "**The capture is tracer-bound:** traced %s images/s, %.2fx the untraced %s images/s (%s; "
        "the allowed slowdown is %g%%). Nsight Systems' CUDA tracing, not the input pipeline, set "
        "this run's pace: trust the untraced figures for throughput and the capture for order and "
        "overlap."
        % (
            _n(t["traced_images_per_s"]),
            t["traced_over_untraced"],
            _n(t["untraced_images_per_s"]),
            "median of %d untraced runs" % runs if runs > 1 else "one untraced run",
            100 * cost["max_slowdown"],
        )
    )
    if idle["explained_ms"] is not None:
        share = (
            "" if idle["explained_share"] is None else " (%.0f%%)" % (100 * idle["explained_share"])
        )
        text += (
            " The tracer explains about %s ms%s of the window's %s ms without device activity."
            % (_n(idle["explained_ms"], 1), share, _n(idle["no_activity_ms"], 1))
        )
    else:
        text += (
            " How much of the idle time the tracer explains is unknown (no batch size or window)."
        )
    calls = cost.get("api_calls")
    if calls and calls["threads"] and calls["steps"]:
        parts = [
            "%s %s%s (%s ms%s)"
            % (
                "the main thread (%s)" % th["thread"] if th["main"] else "thread " + th["thread"],
                "made " if i == 0 else "",
                _calls(th["calls_per_step"]) + (" CUDA runtime calls a step" if i == 0 else ""),
                fmt(th["traced_ms_per_step"]),
                " inside them, traced" if i == 0 else "",
            )
            for i, th in enumerate(calls["threads"][:3])
        ]
        text += " In the window, " + ", ".join(parts) + "."
    over = cost.get("profiler_overhead")
    if over and over["count"]:
        text += " The profiler's own overhead inside the window: %s ms in %d rows." % (
            fmt(over["total_ms"], 1),
            over["count"],
        )
    return [text, ""]


def _capture_cost_section(s):
    """Capture cost: throughput traced vs untraced, host time per phase, runtime calls per thread,
    the profiler's overhead, the idle the tracer explains (summary capture_cost)."""
    cost = s.get("capture_cost")
    if not cost:
        return []
    t = cost["throughput"]
    out = [
        "",
        "## Capture cost (what the tracing itself cost)",
        "",
        "The same command run without nsys (analyze.py --untraced) gives the throughput the tracer "
        "did not slow; CUDA tracing adds its cost to every runtime call, so threads that make many "
        "calls a step run slower traced. Tracer-bound: traced / untraced below %.2f "
        "(--max-tracer-slowdown %g)." % (1 - cost["max_slowdown"], cost["max_slowdown"]),
        "",
    ]
    rows = [
        ("traced (this capture)", fmt(t["traced_images_per_s"], 1), fmt(t["traced_over_untraced"]))
    ]
    if t["untraced_runs"]:
        rows.append(("untraced, median", fmt(t["untraced_images_per_s"], 1), ""))
        rows += [
            ("untraced: `%s`" % r["report"], fmt(r["images_per_s"], 1), "")
            for r in t["untraced_runs"]
        ]
    out.append(table(["run", "images/s", "traced / untraced"], rows))
    out += [
        "",
        "%s. Tracer-bound: %s."
        % (
            t["note"][0].upper() + t["note"][1:],
            "unknown" if cost["tracer_bound"] is None else "yes" if cost["tracer_bound"] else "no",
        ),
    ]
    out += ["", "Trust: " + "; ".join(cost["trust"]) + "."]
    out += _cost_phases(cost["phases"])
    out += _cost_calls(cost.get("api_calls"))
    out += _cost_overhead(cost.get("profiler_overhead"))
    out += _cost_idle(cost["idle_explained"])
    return out


def _cost_phases(p):
    """Host time per range and step, traced vs untraced."""
    out = [
        "",
        "Host time per captured step, median ms (traced: %s; untraced: %s):"
        % (p["traced_source"], p["untraced_source"] or "none given"),
        "",
    ]
    out.append(
        table(
            ["range", "traced ms", "untraced ms", "difference ms", "traced / untraced"],
            [
                (
                    r["phase"],
                    fmt(r["traced_ms"]),
                    fmt(r["untraced_ms"]),
                    fmt(r["difference_ms"]),
                    fmt(r["ratio"]),
                )
                for r in p["rows"]
            ],
        )
    )
    if p["unknown"]:
        out += [
            "",
            "Unknown (a report without phase_ms, or without the range): %s."
            % ", ".join(p["unknown"]),
        ]
    return out


def _cost_calls(calls):
    """CUDA runtime calls per thread and captured step."""
    if not calls:
        return ["", "CUDA runtime calls per thread: not known (the export has no runtime table)."]
    out = [
        "",
        "CUDA runtime calls starting inside the window, per thread and captured step (%d steps; "
        "the time inside them, blocking calls included):" % calls["steps"],
        "",
    ]
    out.append(
        table(
            [
                "thread",
                "calls per step",
                "traced ms per step",
                "calls per unit of work",
                "most frequent (per step)",
            ],
            [
                (
                    _thread_label(th),
                    _calls(th["calls_per_step"]),
                    fmt(th["traced_ms_per_step"]),
                    _unit(th.get("unit")),
                    ", ".join("%s %s" % (c["name"], _calls(c["per_step"])) for c in th["top"]),
                )
                for th in calls["threads"]
            ],
            ["l", "r", "r", "l", "l"],
        )
    )
    if any(th.get("unit") for th in calls["threads"]):
        out += [
            "",
            "A helper thread's unit of work is its outermost NVTX range that holds most of its "
            "calls (gpu_decode: one batch); calls per unit counts all of the thread's calls in the "
            "window, those between its units too. A stage that decodes ahead of the steps does a "
            "varying number of batches inside the window, so compare captures by calls per unit, "
            "not per step.",
        ]
    return out


def _unit(u):
    """'655 per gpu_decode (63 in the window, 640 inside them)', or '' for the main thread and
    threads without one."""
    return (
        ""
        if not u
        else "%s per %s (%d in the window, %s inside them)"
        % (_calls(u["calls_per_range"]), u["range"], u["ranges"], _calls(u["inside_per_range"]))
    )


def _cost_overhead(over):
    """nsys's PROFILER_OVERHEAD rows in the window: by name, thread and main-thread phase."""
    if over is None:
        return ["", "Profiler overhead: not known (the export has no PROFILER_OVERHEAD table)."]
    out = [
        "",
        "Profiler overhead (nsys PROFILER_OVERHEAD) inside the window: %d rows, %s ms; outside it "
        "%d rows, %s ms."
        % (
            over["count"],
            fmt(over["total_ms"]),
            over["outside_window"]["count"],
            fmt(over["outside_window"]["total_ms"]),
        ),
    ]
    if over["count"]:
        for title, key, rows in (
            ("name", "name", over["by_name"]),
            ("thread", "thread", over["by_thread"]),
            ("main-thread phase it overlaps", "phase", over["by_phase"]),
        ):
            out += [""]
            out.append(
                table(
                    [title, "rows", "ms"],
                    [
                        (
                            _thread_label(r) if key == "thread" else r[key],
                            r["count"],
                            fmt(r["total_ms"]),
                        )
                        for r in rows
                    ],
                )
            )
    return out


def _cost_idle(idle):
    """The idle time the tracer explains, in all and per host range of the gaps."""
    edge = (
        " less %s ms of evaluation and checkpoint (%s ms of it without device activity)"
        % (fmt(idle["epoch_boundary_ms"]), fmt(idle["epoch_boundary_idle_ms"]))
        if "epoch_boundary_ms" in idle
        else ""
    )
    untraced_edge = ""
    if "untraced_epoch_boundary_ms" in idle:
        untraced_edge = (
            ", less the untraced runs' %s ms of evaluation and checkpoint,"
            % fmt(idle["untraced_epoch_boundary_ms"])
            if idle["untraced_epoch_boundary_ms"] is not None
            else ", less the untraced runs' evaluation and checkpoint (not in their reports),"
        )
    out = [
        "",
        "Idle time the tracer explains (an upper bound, see nsys_analysis.capture.cost): window "
        "%s ms%s; %s steps x %s images at the untraced %s images/s%s take %s ms, so the tracer "
        "added %s ms; of the window's %s ms without device activity it explains %s ms (%s)."
        % (
            fmt(idle["window_ms"]),
            edge,
            fmt(idle["steps"]),
            fmt(idle["batch_size"]),
            fmt(idle["untraced_images_per_s"], 1),
            untraced_edge,
            fmt(idle["untraced_window_ms"]),
            fmt(idle["tracer_extra_ms"]),
            fmt(idle["no_activity_ms"]),
            fmt(idle["explained_ms"]),
            "n/a"
            if idle["explained_share"] is None
            else "%.1f%%" % (100 * idle["explained_share"]),
        ),
    ]
    if idle["by_host_range"]:
        out += [
            "",
            "Host-caused idle by the host range the gaps began in, and the host time the tracer "
            "added to that range (traced - untraced median per step, x steps):",
            "",
        ]
        out.append(
            table(
                [
                    "host range",
                    "gaps",
                    "idle ms",
                    "gained ms per step",
                    "gained ms",
                    "explains ms",
                    "share",
                ],
                [
                    (
                        r["host_range"],
                        r["gaps"],
                        fmt(r["host_idle_ms"]),
                        fmt(r["inflation_per_step_ms"]),
                        fmt(r["inflation_ms"]),
                        fmt(r["explained_ms"]),
                        "n/a"
                        if r["explained_share"] is None
                        else "%.1f%%" % (100 * r["explained_share"]),
                    )
                    for r in idle["by_host_range"]
                ],
            )
        )
    return out


def _host_stalls_section(s):
    """Host stalls: host-caused gaps >= 1 ms in the step's device work (summary host_stalls)."""
    stalls = s.get("host_stalls")
    if stalls is None:
        return []
    out = [
        "",
        "## Host stalls (host-caused gaps of 1 ms or more in the step's device work)",
        "",
        "`gap`: the device had run the step's queued work and waited for the host (work launched "
        "by the input pipeline's threads neither ends nor splits one). `quiet`: the longest time "
        "overlapping the gap in which the step's threads (main, autograd) made no CUDA runtime "
        "call; `usual`: that stretch's (lower) median length at the same place in the other steps; "
        "`stall` = quiet - usual, how much longer the host took there than usual, whatever the "
        "device still had queued. `held`: from the quiet start to the gap's end (held - gap: the "
        "work queued when the host went quiet). Step and phase: the captured step and main-thread "
        "phase sharing the most time with the quiet interval (phase/range where a nested range, "
        "e.g. data_load/batch_wait, holds most of it).",
        "",
    ]
    if not stalls:
        return out + ["None."]
    out.append(
        table(
            [
                "at ms",
                "gap ms",
                "quiet ms",
                "usual ms",
                "stall ms",
                "held ms",
                "step",
                "phase",
                "host range",
                "next activity",
            ],
            [
                (
                    fmt(st["start_ms"]),
                    fmt(st["gap_ms"]),
                    fmt(st["quiet_ms"]),
                    fmt(st.get("usual_quiet_ms")),
                    fmt(st.get("stall_ms")),
                    fmt(st["held_ms"]),
                    fmt(st["step"]),
                    (st["phase"] or "")
                    if st.get("range") in (None, st["phase"])
                    else "%s/%s" % (st["phase"], st["range"]),
                    st["host_range"] or "",
                    st["next"] or "",
                )
                for st in stalls
            ],
            ["r"] * 7 + ["l", "l", "l"],
        )
    )
    return out


def _gpu_phases_section(s):
    """GPU time per step-level phase, in total and per step (summary gpu_time_by_phase_*)."""
    by_phase = s.get("gpu_time_by_phase_ms")
    if by_phase is None:
        return []
    per_step = s.get("gpu_time_by_phase_per_step_ms") or {}
    main = s.get("gpu_time_by_phase_main_thread_ms") or {}
    counts = s.get("gpu_activities_by_phase") or {}
    host = s.get("phase_totals_ms") or {}
    total = s.get("gpu_time_total_ms") or 0
    out = [
        "",
        "## GPU time per phase (device time of the work launched in each phase)",
        "",
        "Every kernel, copy and memset in the window (clipped to it) is charged to the main "
        "thread's step-level phase (a range directly inside torch_step; batch_wait, h2d_submit and "
        "normalize count under data_load) in which its runtime call started, whichever thread made "
        "the call: backward's kernels come from autograd's thread. `main thread ms` is the part "
        "launched from the main thread itself, all that a projection of the main thread's ranges "
        "onto the device (nsys's nvtx_gpu_proj_sum) attributes. `(input pipeline)`: launched by "
        "the loader's or the GPU decode stage's threads.%s"
        % (
            " `eval`, `checkpoint`: launched while the main thread was in the epoch boundary's "
            "evaluation or checkpoint, no training step's work."
            if s.get("epoch_boundary")
            else ""
        ),
        "",
    ]
    rows = []
    for name, v in by_phase.items():
        steps = [x for x in per_step.get(name) or () if x is not None]
        rows.append(
            (
                name,
                counts.get(name, ""),
                fmt(v),
                fmt(100.0 * v / total, 1) if total else "",
                fmt(sum(steps) / len(steps)) if steps else "",
                fmt(main.get(name)) if name in main else "",
                fmt(host.get(name)) if name in host else "",
            )
        )
    out.append(
        table(
            [
                "phase",
                "activities",
                "GPU ms",
                "% of GPU time",
                "avg ms per step",
                "main thread ms",
                "host range ms",
            ],
            rows,
        )
    )
    out += [
        "",
        "%s ms of device time in all (summed; the device was busy %s ms, overlapping streams "
        "counted once)." % (fmt(total), fmt(s.get("device_busy_ms"))),
    ]
    if per_step and s["steps"]:
        names = list(per_step)
        out += ["", "GPU ms per captured step and phase:", ""]
        out.append(
            table(
                ["step"] + names,
                [[i] + [fmt(per_step[n][i]) for n in names] for i in range(s["steps"])],
            )
        )
    return out


def _times(value):
    """A duration as a multiple of the median training step: 6.25x, or n/a."""
    return "n/a" if value is None else "%.2fx" % value


def _epoch_boundary_section(s):
    """The epoch boundary: what the window's evaluation and checkpoint cost against a training step
    (summary epoch_boundary), with the run report's host timing of them beside; [] without them."""
    eb = s.get("epoch_boundary")
    if not eb:
        return []
    median = eb["step_median_ms"]
    rows = [(EVAL, e) for e in eb["evals"]] + [(CHECKPOINT, c) for c in eb["checkpoints"]]
    rows.sort(key=lambda row: row[1]["start_ms"])
    words = []
    for name, e in rows:
        where = (
            "before the first captured step"
            if e["after_step"] is None
            else "after captured step %d" % (e["after_step"])
        )
        if name == EVAL:
            what = (
                "The evaluation pass %s (%d eval_step range%s, median %s ms; eval_reduce, its "
                "device sync, %s ms)"
                % (
                    where,
                    e["eval_steps"],
                    "" if e["eval_steps"] == 1 else "s",
                    fmt(e["eval_step_median_ms"]),
                    fmt(e["eval_reduce_ms"]),
                )
            )
        else:
            what = "The checkpoint %s" % where
        words.append(
            "%s took %s ms, %s the median training step, with the GPU busy %s%% of it."
            % (what, fmt(e["ms"]), _times(e["over_step_median"]), fmt(e["gpu_busy_pct"], 1))
        )
    out = [
        "",
        "## Epoch boundary (evaluation and checkpoint inside the window)",
        "",
        "The window crosses an epoch's end; its median torch_step took %s ms. %s Neither counts as "
        "a training step: the steps, the phase tables and the per-step figures hold torch_step "
        "ranges only, and the GPU work launched and the host gaps begun inside these ranges count "
        "under `eval` and `checkpoint`." % (fmt(median), " ".join(words)),
        "",
    ]
    reported = any(e["report"] for _, e in rows)
    head = [
        "range",
        "epoch",
        "at ms",
        "ms",
        "x median step",
        "eval steps",
        "median eval_step ms",
        "eval_reduce ms",
        "GPU busy %",
    ] + (["report ms", "report x median step"] if reported else [])
    body = []
    for name, e in rows:
        inner = (
            [fmt(e["eval_steps"]), fmt(e["eval_step_median_ms"]), fmt(e["eval_reduce_ms"])]
            if name == EVAL
            else ["", "", ""]
        )
        row = (
            [name, fmt(e["epoch"]), fmt(e["start_ms"]), fmt(e["ms"]), _times(e["over_step_median"])]
            + inner
            + [fmt(e["gpu_busy_pct"], 1)]
        )
        if reported:
            host = (e["report"] or {}).get("ms")
            row += [
                fmt(host),
                _times(round(host / median, 6) if host is not None and median else None),
            ]
        body.append(row)
    out.append(table(head, body))
    notes = []
    for name, e in rows:
        rep = e["report"]
        if rep and name == EVAL:
            notes.append(
                "epoch %s's evaluation: %s images in %s steps, top-1 %s"
                % (fmt(e["epoch"]), fmt(rep["images"]), fmt(rep["steps"]), fmt(rep["top1"], 4))
            )
        elif rep:
            notes.append(
                "epoch %s's checkpoint: %s MB to `%s`"
                % (
                    fmt(e["epoch"]),
                    fmt(rep["bytes"] / 1e6 if rep["bytes"] is not None else None, 1),
                    rep["path"],
                )
            )
    if notes:
        out += ["", "The run report (host-timed, training.epochs): " + "; ".join(notes) + "."]
    return out


def render_ranks_markdown(r):
    """ranks.md: communication, stragglers and checks of a data-parallel run's ranks
    (ranks.compute_ranks())."""
    ranks = r["ranks"]
    out = ["# Nsight Systems captures of %d ranks" % len(ranks), ""]
    for row, d in zip(r["per_rank"], r.get("analysis_dirs") or [None] * len(ranks)):
        out.append(
            "- rank %d: `%s`, %d steps, window %s ms%s"
            % (
                row["rank"],
                row["export"],
                row["steps"],
                fmt(row["capture_window_ms"]),
                ", per-rank summary in `%s/summary.md`" % d if d else "",
            )
        )
    out += [
        "",
        "## Communication per rank (inside each rank's capture window)",
        "",
        "NCCL kernels are those whose demangled name starts with `nccl`; a kernel belongs to the "
        "captured step in whose host span it was launched (a replayed CUDA graph's kernels, traced "
        "with nsys --cuda-graph-trace=node, to the step whose cudaGraphLaunch replayed them). "
        "Exposed communication is the time an NCCL kernel runs while no other kernel does.",
        "",
    ]
    out.append(
        table(
            [
                "rank",
                "steps",
                "NCCL kernels",
                "NCCL ms",
                "outside steps",
                "exposed ms",
                "exposed %",
                "straggler in",
                "caused others ms",
                "waited ms",
                "checks",
            ],
            [
                (
                    p["rank"],
                    p["steps"],
                    p["nccl_kernels"],
                    fmt(p["nccl_ms"]),
                    "%d (%s ms)"
                    % (p["nccl_kernels_outside_steps"], fmt(p["nccl_ms_outside_steps"])),
                    fmt(p["exposed_comm_ms"]),
                    fmt(p["exposed_comm_pct"], 2),
                    p["straggler_steps"],
                    fmt(p["caused_wait_ms"]),
                    fmt(p["waited_ms"]),
                    fmt(p["all_checks_pass"]),
                )
                for p in r["per_rank"]
            ],
        )
    )
    if r["stragglers"]:
        rank_cols = ["rank %d" % k for k in ranks]
        out += [
            "",
            "## Stragglers per step",
            "",
            "data_load end: ms from the start of that rank's own torch_step to the end of its "
            "data_load (no clock is compared across exports). Waited: a rank's NCCL kernel time in "
            "the step beyond the fastest rank's, the time its all-reduces waited for the last "
            "rank. `agrees`: the rank whose input came last is the one with the least NCCL time.",
            "",
        ]
        out.append(
            table(
                ["step"]
                + ["data_load end %s" % c for c in rank_cols]
                + ["straggler", "spread ms"]
                + ["NCCL ms %s" % c for c in rank_cols]
                + ["waited ms %s" % c for c in rank_cols]
                + ["agrees"],
                [
                    [st["step"]]
                    + [fmt(v) for v in st["data_load_end_ms"]]
                    + [fmt(st["straggler"]), fmt(st["spread_ms"])]
                    + [fmt(v) for v in st["nccl_ms"]]
                    + [fmt(v) for v in st["waited_ms"]]
                    + ["n/a" if st["agrees"] is None else "yes" if st["agrees"] else "no"]
                    for st in r["stragglers"]
                ],
            )
        )
    out += ["", "## Checks (every rank's, and across ranks)", ""]
    out.append(
        table(
            ["check", "result", "detail"],
            [
                (k, "not evaluable" if v is None else fmt(v), r["check_details"][k])
                for k, v in r["checks"].items()
            ],
            ["l", "l", "l"],
        )
    )
    return "\n".join(out) + "\n"


def render_repeats_markdown(r):
    """repeats.md: the spread of the headline figures over several captures of one configuration
    (repeats.compute_repeats())."""
    n = r["captures"]
    out = ["# %d captures of one configuration" % n, ""]
    for k, (export, d) in enumerate(zip(r["exports"], r["analysis_dirs"]), 1):
        out.append(
            "- capture %d: `%s`, summary in `%s/summary.md`%s"
            % (k, export, d, " (the median capture)" if k == r["median_capture"] else "")
        )
    out.append(
        "- untraced runs: %s" % (", ".join("`%s`" % p for p in r["untraced_reports"]) or "none")
    )
    out += [
        "",
        "The median capture (by %s) is capture %d, analysed in full, figures included, in `%s`. "
        "Tracer-bound in %d of %d captures."
        % (
            r["median_by"],
            r["median_capture"],
            r["median_analysis"],
            r["tracer_bound"]["count"],
            r["tracer_bound"]["of"],
        ),
        "",
    ]
    out += [
        "## Spread across the captures",
        "",
        "Each value is one capture's (capture 1 first), except the untraced images/s: one per "
        "untraced run.",
        "",
    ]
    rows = []
    for f in r["figures"]:
        digits = (
            1 if f["figure"].endswith("images_per_s") else 2 if f["figure"].endswith("pct") else 3
        )
        rows.append(
            [f["label"]]
            + [fmt(f[k], digits) for k in ("min", "median", "max")]
            + [" / ".join(fmt(v, digits) for v in f["values"])]
        )
    out.append(table(["figure", "min", "median", "max", "each"], rows, ["l", "r", "r", "r", "l"]))
    out += ["", "## Checks", ""]
    out.append(
        table(
            ["check", "passed", "each"],
            [
                (
                    c["check"],
                    c["text"],
                    " / ".join(fmt(v, missing="not evaluable") for v in c["values"]),
                )
                for c in r["checks"]
            ],
            ["l", "r", "l"],
        )
    )
    return "\n".join(out) + "\n"
