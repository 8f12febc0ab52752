"""summary.md: the tables a reader of one capture needs; ranks.md: those of a data-parallel run's ranks."""

from ..common.formatting import fmt, table
from .records import BATCH_WAIT, DATA_LOAD, H2D_SUBMIT, STEP


def render_markdown(s):
    """summary.md: the tables a reader of the capture needs."""
    out = ["# Nsight Systems capture summary", ""]
    out.append("- export: `%s`%s" % (s["export"], " (nsys %s)" % s["nsys_version"] if s["nsys_version"] else ""))
    out.append("- capture window: %s ms (%s)" % (fmt(s["capture_window_ms"]), s["capture_window_source"]))
    out.append("- torch_step ranges in the window: %d (expected: %s, %s)" % (
        s["steps"], fmt(s["expected_steps"]), s["expected_steps_source"]))
    out.append("- no recorded kernel, copy, memset or graph execution: %s%% of the window"
               % fmt(s["no_activity_pct"], 2))
    if s.get("graph_executions"):
        out.append("- CUDA graph executions recorded whole (no --cuda-graph-trace=node): %d in the window, "
                   "counted as device activity; their kernels are not in the export" % s["graph_executions"])
    if s.get("decode") == "gpu":
        out.append("- host-to-device copies in the window: %s (--decode gpu: %s from the main thread, %s from "
                   "the GPU decode stage)" % (fmt(s["h2d_copies"]), fmt(s.get("h2d_copies_main_thread")),
                                              fmt(s.get("h2d_copies_gpu_stage"))))
    else:
        out.append("- host-to-device copies in the window: %s" % fmt(s["h2d_copies"]))
    if "images_per_s" in s:
        out.append("- throughput (run report): %s images/s" % fmt(s["images_per_s"], 1))
    if s["last_device_end_after_last_step_ms"] is not None:
        out.append("- device work after the last host step ends (final drain): %s ms"
                   % fmt(s["last_device_end_after_last_step_ms"]))
    gaps = s.get("idle_gaps")
    if gaps and gaps["count"]:
        out += ["", "## Where the device sat idle (gaps between recorded activities, inside the window)", "",
                "A gap is `host` when the operation that ended it was enqueued only after the device had gone "
                "idle (the host, not the device, set its length), `device` when that operation was already "
                "queued (launch latency between queued work, or a wait on another stream).", ""]
        out.append(table(["cause", "gaps", "total ms"],
                          [(c, d["count"], fmt(d["total_ms"])) for c, d in gaps["causes"].items()],
                          ["l", "r", "r"]))
        out += [""]
        out.append(table(["gap length", "gaps", "total ms"],
                          [(h["bucket"], h["count"], fmt(h["total_ms"])) for h in gaps["histogram"]],
                          ["l", "r", "r"]))
        if gaps["host_by_range"]:
            out += ["", "Host gaps by the host range they began in:", ""]
            out.append(table(["host range", "gaps", "total ms"],
                              [(k, d["count"], fmt(d["total_ms"])) for k, d in gaps["host_by_range"].items()],
                              ["l", "r", "r"]))
        out += ["", "Largest gaps:", ""]
        out.append(table(["at ms", "gap ms", "cause", "host range", "next activity"],
                          [(fmt(g["at_ms"]), fmt(g["gap_ms"]), g["cause"], g["host_range"] or "",
                            g["next"] or "") for g in gaps["largest"]], ["r", "r", "l", "l", "l"]))
    out += _host_stalls_section(s)
    out += ["", "## Checks", ""]
    out.append(table(["check", "result", "detail"],
                      [(k, "not evaluable" if v is None else fmt(v), s["check_details"][k])
                       for k, v in s["checks"].items()], ["l", "l", "l"]))
    out += ["", "## NVTX phases (default domain, inside the window)", "",
            "Ranges nest (batch_wait and h2d_submit lie inside data_load, everything inside torch_step), so "
            "totals are not exclusive buckets.", ""]
    out.append(table(["range", "count", "total ms", "avg ms", "min ms", "max ms"],
                      [(p["name"], p["count"], fmt(p["total_ms"]), fmt(p["avg_ms"]), fmt(p["min_ms"]),
                        fmt(p["max_ms"])) for p in s["phases"]]))
    if s["steps"]:
        out += ["", "## Per step (host ranges, ms)", ""]
        out.append(table(["step", STEP, DATA_LOAD, BATCH_WAIT, H2D_SUBMIT],
                          [(i, fmt(s["step_ms"][i]), fmt(s["data_load_ms"][i]), fmt(s["batch_wait_ms"][i]),
                            fmt(s["h2d_submit_ms"][i])) for i in range(s["steps"])]))
        if s["batch_wait_max_ms"] is not None:
            out += ["", "batch_wait total %s ms, longest %s ms at step %d; h2d_submit total %s ms." % (
                fmt(s["batch_wait_total_ms"]), fmt(s["batch_wait_max_ms"]), s["batch_wait_max_step"],
                fmt(s["h2d_submit_total_ms"]))]
    out += _gpu_phases_section(s)
    if s["top_kernels"]:
        out += ["", "## Largest kernel groups (identical demangled names, whole export)", ""]
        out.append(table(["#", "label", "launches", "total ms", "avg us", "% kernel time", "demangled name"],
                          [(k["rank"], k["label"], k["launches"], fmt(k["total_ms"]), fmt(k["avg_us"], 1),
                            fmt(k["pct"], 1), "`%s`" % (k["name"][:110] + ("..." if len(k["name"]) > 110 else "")))
                           for k in s["top_kernels"]], ["r", "l", "r", "r", "r", "r", "l"]))
    if s.get("kernel_families"):
        out += ["", "## Kernel time by family (whole export)", ""]
        out.append(table(["family", "launches", "total ms", "ms per step", "% kernel time"],
                          [(f["family"], f["launches"], fmt(f["total_ms"]), fmt(f.get("ms_per_step")),
                            fmt(f["pct"], 1)) for f in s["kernel_families"]], ["l", "r", "r", "r", "r"]))
        other = next((f for f in s["kernel_families"] if f["family"] == "other" and f.get("parts")), None)
        if other:
            out += ["", "Largest in other: " + "; ".join(
                "%s %s ms (%s%%, %d launches)" % (p["label"], fmt(p["total_ms"]), fmt(p["pct"], 1), p["launches"])
                for p in other["parts"])]
    if s["memory_operations"]:
        out += ["", "## Memory operations (whole export)", ""]
        out.append(table(["operation", "count", "total ms", "avg us", "max us", "MB"],
                          [(m["operation"], m["count"], fmt(m["total_ms"]), fmt(m["avg_us"], 1),
                            fmt(m["max_us"], 1), fmt(m["bytes"] / 1e6, 1)) for m in s["memory_operations"]]))
    if s["api_calls"]:
        out += ["", "## CUDA API calls (whole export, top 15 by total time)", ""]
        out.append(table(["call", "calls", "total ms", "avg us", "max ms"],
                          [(a["name"], a["calls"], fmt(a["total_ms"]), fmt(a["avg_us"], 1), fmt(a["max_ms"]))
                           for a in s["api_calls"][:15]]))
    if s["other_domain_ranges"]:
        out += ["", "## Ranges of other NVTX domains (not steps or phases)", ""]
        out.append(table(["domain", "range", "count", "total ms"],
                          [(r["domain"], r["name"], r["count"], fmt(r["total_ms"]))
                           for r in s["other_domain_ranges"]], ["l", "l", "r", "r"]))
    if s.get("layout_conversion_names"):
        out += ["", "## Layout-conversion kernels found", ""]
        out += ["- `%s` x%d" % (n[:120], c) for n, c in s["layout_conversion_names"].items()]
    if s.get("stats_crosscheck"):
        out += ["", "## Cross-check with the nsys stats CSVs", ""]
        for name, v in s["stats_crosscheck"].items():
            out.append("- %s: %s" % (name, ", ".join("%s=%s" % kv for kv in v.items() if kv[0] != "csv")))
    return "\n".join(out) + "\n"


def _host_stalls_section(s):
    """Host stalls: host-caused gaps >= 1 ms in the step's device work (summary host_stalls)."""
    stalls = s.get("host_stalls")
    if stalls is None:
        return []
    out = ["", "## Host stalls (host-caused gaps of 1 ms or more in the step's device work)", "",
           "`gap`: the device had run the step's queued work and waited for the host (work launched by the input "
           "pipeline's threads neither ends nor splits one). `quiet`: the longest time overlapping the gap in which "
           "the step's threads (main, autograd) made no CUDA runtime call; `usual`: that stretch's (lower) median length "
           "at the same place in the other steps; `stall` = quiet - usual, how much longer the host took there than "
           "usual, whatever the device still had queued. `held`: from the quiet start to the gap's end (held - gap: "
           "the work queued when the host went quiet). Step and phase: the captured step and main-thread phase "
           "sharing the most time with the quiet interval (phase/range where a nested range, e.g. "
           "data_load/batch_wait, holds most of it).", ""]
    if not stalls:
        return out + ["None."]
    out.append(table(["at ms", "gap ms", "quiet ms", "usual ms", "stall ms", "held ms", "step", "phase",
                      "host range", "next activity"],
                     [(fmt(st["start_ms"]), fmt(st["gap_ms"]), fmt(st["quiet_ms"]), fmt(st.get("usual_quiet_ms")),
                       fmt(st.get("stall_ms")), fmt(st["held_ms"]), fmt(st["step"]),
                       (st["phase"] or "") if st.get("range") in (None, st["phase"])
                       else "%s/%s" % (st["phase"], st["range"]),
                       st["host_range"] or "", st["next"] or "") for st in stalls],
                     ["r"] * 7 + ["l", "l", "l"]))
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
    out = ["", "## GPU time per phase (device time of the work launched in each phase)", "",
           "Every kernel, copy and memset in the window (clipped to it) is charged to the main thread's step-level "
           "phase (a range directly inside torch_step; batch_wait, h2d_submit and normalize count under data_load) "
           "in which its runtime call started, whichever thread made the call: backward's kernels come from "
           "autograd's thread. `main thread ms` is the part launched from the main thread itself, all that a "
           "projection of the main thread's ranges onto the device (nsys's nvtx_gpu_proj_sum) attributes. "
           "`(input pipeline)`: launched by the loader's or the GPU decode stage's threads.", ""]
    rows = []
    for name, v in by_phase.items():
        steps = [x for x in per_step.get(name) or () if x is not None]
        rows.append((name, counts.get(name, ""), fmt(v), fmt(100.0 * v / total, 1) if total else "",
                     fmt(sum(steps) / len(steps)) if steps else "", fmt(main.get(name)) if name in main else "",
                     fmt(host.get(name)) if name in host else ""))
    out.append(table(["phase", "activities", "GPU ms", "% of GPU time", "avg ms per step", "main thread ms",
                      "host range ms"], rows))
    out += ["", "%s ms of device time in all (summed; the device was busy %s ms, overlapping streams counted "
            "once)." % (fmt(total), fmt(s.get("device_busy_ms")))]
    if per_step and s["steps"]:
        names = list(per_step)
        out += ["", "GPU ms per captured step and phase:", ""]
        out.append(table(["step"] + names, [[i] + [fmt(per_step[n][i]) for n in names] for i in range(s["steps"])]))
    return out


def render_ranks_markdown(r):
    """ranks.md: communication, stragglers and checks of a data-parallel run's ranks (ranks.compute_ranks())."""
    ranks = r["ranks"]
    out = ["# Nsight Systems captures of %d ranks" % len(ranks), ""]
    for row, d in zip(r["per_rank"], r.get("analysis_dirs") or [None] * len(ranks)):
        out.append("- rank %d: `%s`, %d steps, window %s ms%s" % (
            row["rank"], row["export"], row["steps"], fmt(row["capture_window_ms"]),
            ", per-rank summary in `%s/summary.md`" % d if d else ""))
    out += ["", "## Communication per rank (inside each rank's capture window)", "",
            "NCCL kernels are those whose demangled name starts with `nccl`; a kernel belongs to the captured "
            "step in whose host span it was launched (a replayed CUDA graph's kernels, traced with nsys "
            "--cuda-graph-trace=node, to the step whose cudaGraphLaunch replayed them). Exposed "
            "communication is the time an NCCL kernel runs while no other kernel does.", ""]
    out.append(table(["rank", "steps", "NCCL kernels", "NCCL ms", "outside steps", "exposed ms", "exposed %",
                      "straggler in", "caused others ms", "waited ms", "checks"],
                     [(p["rank"], p["steps"], p["nccl_kernels"], fmt(p["nccl_ms"]),
                       "%d (%s ms)" % (p["nccl_kernels_outside_steps"], fmt(p["nccl_ms_outside_steps"])),
                       fmt(p["exposed_comm_ms"]), fmt(p["exposed_comm_pct"], 2), p["straggler_steps"],
                       fmt(p["caused_wait_ms"]), fmt(p["waited_ms"]), fmt(p["all_checks_pass"]))
                      for p in r["per_rank"]]))
    if r["stragglers"]:
        rank_cols = ["rank %d" % k for k in ranks]
        out += ["", "## Stragglers per step", "",
                "data_load end: ms from the start of that rank's own torch_step to the end of its data_load "
                "(no clock is compared across exports). Waited: a rank's NCCL kernel time in the step beyond "
                "the fastest rank's, the time its all-reduces waited for the last rank. `agrees`: the rank "
                "whose input came last is the one with the least NCCL time.", ""]
        out.append(table(["step"] + ["data_load end %s" % c for c in rank_cols] + ["straggler", "spread ms"]
                         + ["NCCL ms %s" % c for c in rank_cols] + ["waited ms %s" % c for c in rank_cols]
                         + ["agrees"],
                         [[st["step"]] + [fmt(v) for v in st["data_load_end_ms"]]
                          + [fmt(st["straggler"]), fmt(st["spread_ms"])] + [fmt(v) for v in st["nccl_ms"]]
                          + [fmt(v) for v in st["waited_ms"]]
                          + ["n/a" if st["agrees"] is None else "yes" if st["agrees"] else "no"]
                          for st in r["stragglers"]]))
    out += ["", "## Checks (every rank's, and across ranks)", ""]
    out.append(table(["check", "result", "detail"],
                     [(k, "not evaluable" if v is None else fmt(v), r["check_details"][k])
                      for k, v in r["checks"].items()], ["l", "l", "l"]))
    return "\n".join(out) + "\n"
