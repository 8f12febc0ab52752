#!/usr/bin/env python3
"""GPU benchmarks of the workload: capture checks, the side-by-side comparison with the Python
reference, the NVTX cost, process teardown, and a scan of loader settings; then the tables of
docs/BENCHMARKS.md.

usage: scripts/benchmarks.py checks  --data ROOT --out DIR
       scripts/benchmarks.py compare --data ROOT --out DIR [--python-ref seed_workload.py]
       scripts/benchmarks.py scan    --data ROOT --out DIR
       scripts/benchmarks.py loader  --data ROOT --out DIR [--workers 1 8 16]
       scripts/benchmarks.py experiments --data ROOT --out DIR
       scripts/benchmarks.py ncu     --out DIR [--ncu-skip N --ncu-count M]
       scripts/benchmarks.py table   --out DIR

checks   captures 8 and 64 steps, iterator reused and reset, under the article's nsys command
         (scripts/profile.sh) and runs analyze.py --check on each: exactly M torch_step ranges in
         capture_window, 2 x M host-to-device copies, no synchronization inside a step, no layout
         conversion kernels.
compare  64 captured steps, batch 128, under the same nsys command: (1) train_resnet50 --synthetic,
         then --rounds rounds of (2) train_resnet50 with its defaults and (3) the Python reference,
         back to back (the reference is loader-bound and varies from run to run: each round gives a
         paired ratio (2)/(3), and the table reports their median). Then, without nsys: NVTX on vs
         off (alternating, --repeats each) and the teardown of a default run (time from the report
         line to process exit).
scan     without nsys: the synthetic ceiling, then workers x prefetch x work unit, 64 steps each.
loader   loader_bench --json at each --workers count (the loader alone; fused vs full decode).
experiments  the experiment flags: bf16 (ceiling and loader-fed), uint8 vs float32 transfers (nsys),
         --nvtx-detail layers vs steps, --sync-every-step under nsys, --torch-profiler-trace.
ncu      Nsight Compute (ncu, clocks left alone) on every kernel of one GPU-bound training step
         (train_resnet50 --synthetic; --ncu-skip launches skipped first, --ncu-count profiled):
         duration, DRAM bytes and the speed-of-light percentages, grouped by kernel kind.
table    reads DIR/*.json written by the other commands and prints Markdown tables.

Every command writes DIR/<command>.json; runs live in DIR/<command>/. Exit status 0, or 1 when a run
failed (checks: when a check failed), 2 for usage errors.
"""

import argparse
import functools
import json
import os
import shutil
import statistics
import sys
import time

SCRIPTS = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(SCRIPTS)
sys.path.insert(0, SCRIPTS)
from nsys_analysis import runner  # noqa: E402
from nsys_analysis.formatting import fmt  # noqa: E402
from nsys_analysis.kernels import short_kernel_label  # noqa: E402
from nsys_analysis.pipeline import analyze  # noqa: E402

# Numbers in tables: the shared formatter, blank when missing, integers written like floats.
number = functools.partial(fmt, missing="", ints_exact=False)


def binary_path(args):
    path = args.binary or os.environ.get("TRAIN_BIN") or os.path.join(REPO, "build", "bin",
                                                                       "train_resnet50")
    if not os.access(path, os.X_OK):
        raise SystemExit("benchmarks.py: error: train_resnet50 not found at %s (build it, or "
                         "pass --binary)" % path)
    return path


def log(msg):
    print("[benchmarks %s] %s" % (time.strftime("%H:%M:%S"), msg), flush=True)


# The exit code recorded for a run stopped at its time limit.
KILLED = -9


def exit_code(result):
    """A runner.RunResult as the exit code the JSON files record: KILLED after a timeout, None when
    the command could not start."""
    return KILLED if result.status == runner.TIMEOUT else result.returncode


def run_direct(cmd, log_path, timeout):
    """Runs cmd, output to log_path; returns (exit code, seconds, seconds from the report line to
    exit or None)."""
    report_seen = []

    def on_line(line):
        # train_resnet50 prints "  report   PATH" after writing its report: the run's work
        # is done from here on, what follows is teardown.
        if line.strip().startswith("report "):
            report_seen.append(time.monotonic())
    result = runner.run(cmd, log_path, timeout, on_line=on_line)
    end = time.monotonic()
    return exit_code(result), result.seconds, (end - report_seen[-1]) if report_seen else None


def profile(prefix, command, timeout, expected_steps=None, extra_env=None):
    """Captures COMMAND with scripts/profile.sh --prefix PREFIX (output in PREFIX.runlog), then
    analyses the export (checks against `expected_steps` when given); returns (summary or None, exit
    code)."""
    os.makedirs(os.path.dirname(prefix), exist_ok=True)
    cmd = [os.path.join(SCRIPTS, "profile.sh"), "--prefix", prefix] + command
    rc = exit_code(runner.run(cmd, prefix + ".runlog", timeout,
                              env=dict(os.environ, **(extra_env or {}))))
    if not os.path.exists(prefix + ".sqlite"):
        return None, rc
    report = prefix + ".json" if os.path.exists(prefix + ".json") else None
    try:
        summary = analyze(prefix + ".sqlite", prefix + "_analysis", report_path=report,
                          expected_steps=expected_steps, figures=True)
    except Exception as e:  # keep the other runs going; the row says what failed
        log("  analysis of %s failed: %s" % (prefix, e))
        return None, rc
    return summary, rc


def train_args(args, steps, extra=()):
    return (["--data", args.data, "--steps", str(steps), "--quiet"] + list(extra) +
            list(args.extra))


def last_json_object(lines):
    """The last of lines that parses as a JSON object, else None."""
    for line in reversed(lines):
        line = line.strip()
        if line.startswith("{"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    return None


def read_report(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def cmd_checks(args):
    binary = binary_path(args)
    results = []
    ok = True
    for steps in (8, 64):
        for reuse in (True, False):
            name = "%s_%d" % ("reuse" if reuse else "reset", steps)
            prefix = os.path.join(args.out, "checks", name)
            log("capture %s" % name)
            summary, rc = profile(prefix, ["--binary", binary] + train_args(
                args, steps, ["--reuse-iterator=%s" % ("true" if reuse else "false")]),
                args.timeout, expected_steps=steps)
            row = {"name": name, "steps": steps, "reuse_iterator": reuse, "exit_code": rc}
            if summary is not None:
                row.update({k: summary.get(k) for k in (
                    "steps", "h2d_copies", "capture_window_ms", "no_activity_pct",
                    "sync_calls_in_steps", "layout_conversion_kernels", "checks",
                    "images_per_s", "steps_outside_window")})
                row["steps_expected"] = steps
                row["all_checks_pass"] = all(v is True for v in summary["checks"].values())
            else:
                row["all_checks_pass"] = False
            ok = ok and row["all_checks_pass"]
            log("  %s: checks %s" % (name, row.get("checks")))
            results.append(row)
    write_json(args.out, "checks", {"runs": results})
    return 0 if ok else 1


def cmd_compare(args):
    binary = binary_path(args)
    out = os.path.join(args.out, "compare")
    runs = []
    common = ["--steps", str(args.steps), "--warmup", "3", "--batch-size", "128"] + args.extra
    plan = [("synthetic", ["--binary", binary, "--synthetic", "--quiet"] + common)]
    python = shutil.which("python3") or sys.executable
    # The reference is loader-bound, so its throughput varies from run to run: rounds of (2) and (3)
    # back to back give paired ratios, compared by their median.
    for i in range(args.rounds):
        suffix = "" if i == 0 else "_%d" % (i + 1)
        plan.append(("loader" + suffix, ["--binary", binary, "--data", args.data, "--quiet"] + common))
        if args.python_ref:
            plan.append(("python" + suffix,
                         ["--", python, args.python_ref, args.data, "--steps", str(args.steps),
                          "--warmup", "3", "--batch-size", "128"]))
    for name, command in plan:
        log("nsys capture: %s" % name)
        summary, rc = profile(os.path.join(out, name), command, args.timeout,
                              expected_steps=args.steps, extra_env={"PYTHONUNBUFFERED": "1"})
        row = {"name": name, "exit_code": rc, "under_nsys": True}
        if summary:
            row.update({k: summary.get(k) for k in ("images_per_s", "no_activity_pct", "steps",
                                                     "h2d_copies", "capture_window_ms",
                                                     "batch_wait_total_ms", "h2d_submit_total_ms",
                                                     "checks", "device_busy_ms",
                                                     "kernel_launches")})
            gaps = summary.get("idle_gaps") or {}
            for cause, d in (gaps.get("causes") or {}).items():
                row["idle_%s_ms" % cause] = d["total_ms"]
            row["idle_host_by_range_ms"] = {k: d["total_ms"]
                                            for k, d in (gaps.get("host_by_range") or {}).items()}
        log("  %s: %s img/s, no activity %s%%" % (name, row.get("images_per_s"),
                                                  row.get("no_activity_pct")))
        runs.append(row)
        # What is measured so far survives a run that is stopped later.
        write_json(args.out, "compare", {"runs": runs, "nvtx": {"on": [], "off": []},
                                         "teardown": [], "steps": args.steps, "partial": True})

    # NVTX cost: the GPU-bound synthetic run, ranges on vs off, alternating.
    nvtx = {"on": [], "off": []}
    for i in range(args.repeats):
        for state in ("on", "off"):
            report = os.path.join(out, "nvtx_%s_%d.json" % (state, i))
            rc, secs, _ = run_direct([binary, "--synthetic", "--quiet", "--report", report,
                                      "--nvtx=%s" % ("true" if state == "on" else "false")] +
                                     common, report + ".log", args.timeout)
            r = read_report(report)
            if rc == 0 and r:
                nvtx[state].append(r["capture"]["images_per_s"])
    log("nvtx on %s / off %s" % (nvtx["on"], nvtx["off"]))

    # Teardown of a default loader run (page-locked ring released at exit).
    teardown = []
    for i in range(args.repeats):
        report = os.path.join(out, "teardown_%d.json" % i)
        rc, secs, tail = run_direct([binary, "--data", args.data, "--quiet", "--report", report] +
                                    common, report + ".log", args.timeout)
        r = read_report(report)
        teardown.append({"exit_code": rc, "process_s": secs, "after_report_s": tail,
                         "images_per_s": r["capture"]["images_per_s"] if r else None,
                         "ring_bytes": (r or {}).get("loader", {}).get("ring_bytes")})
    log("teardown %s" % teardown)
    result = {"runs": runs, "nvtx": nvtx, "teardown": teardown, "steps": args.steps}
    write_json(args.out, "compare", result)
    return 0 if all(r["exit_code"] == 0 for r in runs) else 1


def cmd_loader(args):
    """loader_bench --json at several worker counts: the loader alone, fused vs full decode."""
    bench = os.path.join(os.path.dirname(binary_path(args)), "loader_bench")
    out = os.path.join(args.out, "loader")
    os.makedirs(out, exist_ok=True)
    rows = []
    for workers in args.workers:
        cmd = [bench, "--data", args.data, "--workers", str(workers), "--json",
               "--batches", str(max(4, min(40, 4 * workers)))]
        log("loader_bench --workers %d" % workers)
        lines = []
        log_path = os.path.join(out, "workers_%d.log" % workers)
        r = runner.run(cmd, log_path, args.timeout, on_line=lines.append)
        row = last_json_object(lines) if r.status == runner.OK else None
        if row is not None:
            rows.append(row)
            log("  %.0f img/s per thread fused, %.0f full, %.0f decode only" % (
                rows[-1]["fused_images_per_s_per_thread"], rows[-1]["full_images_per_s_per_thread"],
                rows[-1]["decode_only_images_per_s_per_thread"]))
        else:
            log("  failed (%s, exit %s): %s" % (r.status, r.returncode,
                                                 r.error or (lines[-1] if lines else "no output")))
    write_json(args.out, "loader", {"rows": rows})
    return 0 if rows else 1


def cmd_experiments(args):
    """The experiment flags on the GPU: bf16 ceiling and loader-fed throughput, uint8 vs float32
    transfers (from nsys captures), the cost of --nvtx-detail layers, the implicit-sync check and
    LibTorch's own trace."""
    binary = binary_path(args)
    out = os.path.join(args.out, "experiments")
    os.makedirs(out, exist_ok=True)
    common = ["--steps", str(args.steps), "--warmup", "3", "--quiet"] + args.extra
    result = {"steps": args.steps, "runs": [], "transfers": [], "sync": None, "trace": None}

    def direct(name, extra):
        report = os.path.join(out, name + ".json")
        rc, _, _ = run_direct([binary, "--report", report] + common + extra, report + ".log",
                              args.timeout)
        r = read_report(report)
        row = {"name": name, "flags": " ".join(extra), "exit_code": rc,
               "images_per_s": r["capture"]["images_per_s"] if r else None,
               "batch_wait_total_ms": r["summary"]["batch_wait_total_ms"] if r else None,
               "h2d_submit_total_ms": r["summary"]["h2d_submit_total_ms"] if r else None}
        log("  %s: %s img/s" % (name, row["images_per_s"]))
        result["runs"].append(row)

    for i in range(args.repeats):
        direct("fp32_synthetic_%d" % i, ["--synthetic"])
        direct("bf16_synthetic_%d" % i, ["--synthetic", "--precision", "bf16"])
    for workers in (8, 16):
        direct("bf16_loader_w%d" % workers, ["--data", args.data, "--precision", "bf16",
                                             "--workers", str(workers)])
        direct("bf16_uint8_loader_w%d" % workers, ["--data", args.data, "--precision", "bf16",
                                                   "--host-dtype", "uint8", "--workers",
                                                   str(workers)])
    for i in range(args.repeats):
        direct("layers_off_%d" % i, ["--synthetic"])
        direct("layers_on_%d" % i, ["--synthetic", "--nvtx-detail", "layers"])

    # Transfers, measured on the device by nsys: float32 vs uint8 host batches.
    for dtype in ("float32", "uint8"):
        prefix = os.path.join(out, "h2d_" + dtype)
        log("nsys capture: host dtype %s" % dtype)
        summary, rc = profile(prefix, ["--binary", binary, "--data", args.data, "--host-dtype",
                                       dtype] + common, args.timeout, expected_steps=args.steps)
        row = {"host_dtype": dtype, "exit_code": rc}
        if summary:
            h2d = [m for m in summary["memory_operations"] if "Host-to-Device" in m["operation"]]
            steps = summary["steps"] or 1
            if h2d:
                row.update({"h2d_copies": h2d[0]["count"],
                            "h2d_mb_per_step": h2d[0]["bytes"] / steps / 1e6,
                            "h2d_ms_per_step": h2d[0]["total_ms"] / steps})
            row.update({"images_per_s": summary.get("images_per_s"),
                        "h2d_submit_ms_per_step": (summary.get("h2d_submit_total_ms") or 0) / steps,
                        "normalize_ms_per_step":
                            (summary.get("phase_totals_ms") or {}).get("normalize", 0) / steps,
                        "checks": summary.get("checks")})
        log("  %s" % row)
        result["transfers"].append(row)

    # The implicit-sync pitfall: analyze.py's no_sync_in_steps must fail on purpose.
    prefix = os.path.join(out, "sync_every_step")
    summary, rc = profile(prefix, ["--binary", binary, "--data", args.data, "--steps", "8",
                                   "--sync-every-step", "--quiet"] + args.extra, args.timeout,
                          expected_steps=8)
    if summary:
        result["sync"] = {"sync_calls_in_steps": summary.get("sync_calls_in_steps"),
                          "by_name": summary.get("sync_calls_in_steps_by_name"),
                          "no_sync_in_steps": summary["checks"].get("no_sync_in_steps"),
                          "images_per_s": summary.get("images_per_s")}
    log("sync: %s" % result["sync"])

    # LibTorch's own profiler over the capture window (not under nsys).
    trace = os.path.join(out, "torch_trace.json")
    rc, _, _ = run_direct([binary, "--data", args.data, "--steps", "4", "--warmup", "3", "--quiet",
                           "--torch-profiler-trace", trace] + args.extra, trace + ".log",
                          args.timeout)
    if rc == 0 and os.path.exists(trace):
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        cats = {}
        for e in events:
            cats[e.get("cat", "")] = cats.get(e.get("cat", ""), 0) + 1
        scopes = sorted({e["name"] for e in events if e.get("cat") == "user_annotation"})
        result["trace"] = {"events": len(events), "categories": cats, "scopes": scopes,
                           "bytes": os.path.getsize(trace)}
    log("trace: %s" % result["trace"])
    write_json(args.out, "experiments", result)
    return 0


def cmd_scan(args):
    binary = binary_path(args)
    out = os.path.join(args.out, "scan")
    os.makedirs(out, exist_ok=True)
    common = ["--steps", str(args.steps), "--warmup", "3", "--quiet"] + args.extra
    rows = []

    def one(name, extra):
        report = os.path.join(out, name + ".json")
        rc, secs, _ = run_direct([binary, "--report", report] + common + extra, report + ".log",
                                 args.timeout)
        r = read_report(report)
        row = {"name": name, "exit_code": rc,
               "images_per_s": r["capture"]["images_per_s"] if r else None,
               "batch_wait_total_ms": r["summary"]["batch_wait_total_ms"] if r else None}
        log("  %s: %s img/s" % (name, row["images_per_s"]))
        rows.append(row)
        return row

    ceiling = [one("synthetic_%d" % i, ["--synthetic"])["images_per_s"] for i in range(2)]
    for unit in args.units:
        for prefetch in args.prefetch:
            for workers in args.workers:
                one("w%d_p%d_%s" % (workers, prefetch, unit),
                    ["--data", args.data, "--workers", str(workers), "--prefetch-factor",
                     str(prefetch), "--work-unit", unit])
    write_json(args.out, "scan", {"ceiling": ceiling, "rows": rows, "steps": args.steps})
    return 0


# Per-kernel metrics of `benchmarks.py ncu` (Nsight Compute's speed-of-light section, in raw form).
NCU_METRICS = ("gpu__time_duration.sum", "dram__bytes.sum",
               "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
               "sm__throughput.avg.pct_of_peak_sustained_elapsed",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed")


def parse_ncu_csv(text):
    """Rows of `ncu --csv --page raw --print-units base` output: [{column: value}], numbers as float.
    Lines that are not CSV records (the program's own output, ==PROF== notes) are skipped; the units
    row that follows the header is dropped."""
    import csv
    lines = [l for l in text.splitlines() if l.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header, out = rows[0], []
    for r in rows[1:]:
        if len(r) != len(header) or r == header:
            continue
        rec = dict(zip(header, r))
        if rec.get("ID", "").strip() == "" or not rec["ID"].strip().isdigit():
            continue  # the units row
        for m in NCU_METRICS:
            if m in rec:
                try:
                    rec[m] = float(rec[m].replace(",", ""))
                except ValueError:
                    rec[m] = None
        out.append(rec)
    return out


def group_ncu(rows):
    """Per kernel kind (nsys_analysis.kernels.short_kernel_label): launches, time, DRAM traffic and
    the time-weighted speed-of-light percentages. Largest total time first."""
    groups = {}
    for r in rows:
        name = r.get("Kernel Name") or r.get("Function Name") or "?"
        t = r.get("gpu__time_duration.sum") or 0.0
        g = groups.setdefault(short_kernel_label(name), {"launches": 0, "ns": 0.0, "bytes": 0.0,
                                                         "w": {}})
        g["launches"] += 1
        g["ns"] += t
        g["bytes"] += r.get("dram__bytes.sum") or 0.0
        for m in NCU_METRICS[2:]:
            if r.get(m) is not None:
                g["w"][m] = g["w"].get(m, 0.0) + r[m] * t
    total = sum(g["ns"] for g in groups.values()) or 1.0
    out = []
    for label, g in sorted(groups.items(), key=lambda kv: -kv[1]["ns"]):
        ns = g["ns"] or 1.0
        out.append({"kind": label, "launches": g["launches"], "total_ms": g["ns"] / 1e6,
                    "pct_of_time": 100.0 * g["ns"] / total,
                    "dram_gb_per_s": g["bytes"] / ns,
                    "memory_sol_pct": g["w"].get(NCU_METRICS[2], 0.0) / ns,
                    "sm_sol_pct": g["w"].get(NCU_METRICS[3], 0.0) / ns,
                    "dram_pct": g["w"].get(NCU_METRICS[4], 0.0) / ns})
    return out


def cmd_ncu(args):
    binary = binary_path(args)
    ncu = shutil.which("ncu")
    if not ncu:
        raise SystemExit("benchmarks.py: error: ncu (Nsight Compute) is not on PATH")
    out = os.path.join(args.out, "ncu")
    os.makedirs(out, exist_ok=True)
    cmd = [ncu, "--clock-control", "none", "--csv", "--page", "raw", "--print-units", "base",
           "--print-kernel-base", "demangled", "--metrics", ",".join(NCU_METRICS),
           "--launch-skip", str(args.ncu_skip), "--launch-count", str(args.ncu_count),
           binary, "--synthetic", "--warmup", "1", "--steps", "2", "--batch-size", "128",
           "--quiet"] + args.extra
    log("ncu: %s" % " ".join(cmd))
    log_path = os.path.join(out, "ncu.log")
    r = runner.run(cmd, log_path, args.timeout)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read().split("\n", 1)[1]  # the output, after the runner's "$ command" line
    with open(os.path.join(out, "ncu.csv"), "w") as f:
        f.write(text)
    rows = parse_ncu_csv(text)
    if r.status != runner.OK or not rows:
        log("ncu failed (%s, exit %s, %d kernels); output in %s" % (
            r.status, r.returncode, len(rows), os.path.join(out, "ncu.csv")))
        return 1
    groups = group_ncu(rows)
    write_json(args.out, "ncu", {"command": cmd, "kernels": len(rows), "groups": groups})
    log("ncu: %d kernels profiled" % len(rows))
    return 0


def write_json(out, name, obj):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(obj, f, indent=2)


def cmd_table(args):
    def load(name):
        path = os.path.join(args.out, name + ".json")
        if not os.path.exists(path):
            return None
        with open(path) as f:
            return json.load(f)

    checks, compare, scan = load("checks"), load("compare"), load("scan")
    if checks:
        print("| capture | torch_step in window | H2D copies | syncs in steps | layout kernels "
              "| no activity | images/s | checks |")
        print("|---|---|---|---|---|---|---|---|")
        for r in checks["runs"]:
            c = r.get("checks") or {}
            print("| %s | %s (expected %s) | %s | %s | %s | %s%% | %s | %s |" % (
                r["name"], r.get("steps"), r.get("steps_expected"), r.get("h2d_copies"),
                r.get("sync_calls_in_steps"), r.get("layout_conversion_kernels"),
                number(r.get("no_activity_pct"), 1), number(r.get("images_per_s"), 1),
                "all pass" if r.get("all_checks_pass") else
                ", ".join("%s=%s" % kv for kv in c.items())))
        print()
    if compare:
        runs = {r["name"]: r for r in compare["runs"]}
        syn = (runs.get("synthetic") or {}).get("images_per_s")
        py_runs = [r["images_per_s"] for r in compare["runs"]
                   if r["name"].startswith("python") and r.get("images_per_s")]
        py = statistics.median(py_runs) if py_runs else None
        print("| run (under nsys, %d steps) | images/s | of synthetic | vs Python (median) "
              "| no GPU activity | of which host-bound | batch_wait total | h2d_submit total |"
              % compare["steps"])
        print("|---|---|---|---|---|---|---|---|")
        for r in compare["runs"]:
            ips = r.get("images_per_s")
            window = r.get("capture_window_ms")
            host = r.get("idle_host_ms")
            print("| %s | %s | %s | %s | %s%% | %s | %s ms | %s ms |" % (
                r["name"], number(ips, 1), number(100 * ips / syn, 1) + "%" if ips and syn else "",
                number(ips / py, 2) + "x" if ips and py else "", number(r.get("no_activity_pct"), 1),
                number(100 * host / window, 1) + "%" if host is not None and window else "",
                number(r.get("batch_wait_total_ms"), 1), number(r.get("h2d_submit_total_ms"), 1)))
        pairs = paired_ratios(compare)
        if pairs:
            print("\npaired rounds, (2)/(3): %s; median %.2fx" % (
                ", ".join("%.2fx" % p for p in pairs), statistics.median(pairs)))
        on, off = compare["nvtx"]["on"], compare["nvtx"]["off"]
        if on and off:
            print("\nNVTX on vs off (synthetic, no nsys, %d runs each): median %.1f vs %.1f "
                  "images/s, cost %.2f%%" % (len(on), statistics.median(on),
                                             statistics.median(off),
                                             100 * (1 - statistics.median(on) /
                                                    statistics.median(off))))
        for t in compare["teardown"]:
            print("teardown: %s s from the report line to exit (process %s s, ring %s bytes)" % (
                number(t.get("after_report_s"), 2), number(t.get("process_s"), 1), t.get("ring_bytes")))
        print()
    if py_runs_note(compare):
        print(py_runs_note(compare))
    loader = load("loader")
    if loader:
        print("| loader_bench threads | fused img/s | per thread | full decode + crop, per thread "
              "| decode only, per thread | fused / full |")
        print("|---|---|---|---|---|---|")
        for r in loader["rows"]:
            print("| %d | %.0f | %.0f | %.0f | %.0f | %.2fx |" % (
                r["threads"], r["fused_images_per_s"], r["fused_images_per_s_per_thread"],
                r["full_images_per_s_per_thread"], r["decode_only_images_per_s_per_thread"],
                r["fused_speedup_over_full"]))
        print()
    exp = load("experiments")
    if exp:
        print("| run (%d steps, no nsys) | flags | images/s | batch_wait total |" % exp["steps"])
        print("|---|---|---|---|")
        for r in exp["runs"]:
            print("| %s | `%s` | %s | %s ms |" % (r["name"], r["flags"], number(r["images_per_s"], 1),
                                                 number(r["batch_wait_total_ms"], 1)))
        print()
        print("| host dtype (nsys) | H2D copies | H2D MB/step | H2D ms/step (device) "
              "| h2d_submit ms/step (host) | normalize ms/step (host) | images/s |")
        print("|---|---|---|---|---|---|---|")
        for t in exp["transfers"]:
            print("| %s | %s | %s | %s | %s | %s | %s |" % (
                t["host_dtype"], t.get("h2d_copies"), number(t.get("h2d_mb_per_step"), 2),
                number(t.get("h2d_ms_per_step"), 3), number(t.get("h2d_submit_ms_per_step"), 3),
                number(t.get("normalize_ms_per_step"), 3), number(t.get("images_per_s"), 1)))
        print()
        print("sync every step: %s" % exp["sync"])
        print("torch trace: %s" % exp["trace"])
        print()
    ncu = load("ncu")
    if ncu:
        total = sum(g["total_ms"] for g in ncu["groups"])
        print("| kernel kind (ncu, %d kernels, %.1f ms) | launches | ms | share of time | DRAM GB/s "
              "| DRAM %% of peak | memory SOL %% | SM SOL %% |" % (ncu["kernels"], total))
        print("|---|---|---|---|---|---|---|---|")
        for g in ncu["groups"]:
            print("| %s | %d | %.2f | %.1f%% | %.0f | %.0f | %.0f | %.0f |" % (
                g["kind"], g["launches"], g["total_ms"], g["pct_of_time"], g["dram_gb_per_s"],
                g["dram_pct"], g["memory_sol_pct"], g["sm_sol_pct"]))
        print()
    if scan:
        ceiling = statistics.median(scan["ceiling"])
        print("| setting | images/s | of synthetic (%.0f) | batch_wait total |" % ceiling)
        print("|---|---|---|---|")
        for r in scan["rows"]:
            if r["name"].startswith("synthetic"):
                continue
            ips = r.get("images_per_s")
            print("| %s | %s | %s | %s ms |" % (r["name"], number(ips, 1),
                                                number(100 * ips / ceiling, 1) + "%" if ips else "",
                                                number(r.get("batch_wait_total_ms"), 1)))
    return 0


def paired_ratios(compare):
    """(2)/(3) images/s per round: loader[_k] over python[_k], for rounds where both ran."""
    runs = {r["name"]: r.get("images_per_s") for r in (compare or {}).get("runs", [])}
    out = []
    for name, ips in runs.items():
        if name.startswith("loader"):
            py = runs.get("python" + name[len("loader"):])
            if ips and py:
                out.append(ips / py)
    return out


def py_runs_note(compare):
    if not compare:
        return ""
    py = [r["images_per_s"] for r in compare["runs"]
          if r["name"].startswith("python") and r.get("images_per_s")]
    return ("Python reference, %d captures: %s images/s (median %.1f)\n" % (
        len(py), ", ".join("%.1f" % v for v in py), statistics.median(py))) if py else ""


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("command", choices=["checks", "compare", "scan", "loader", "experiments",
                                        "ncu", "table"])
    p.add_argument("--data", help="Food-101 root (at least 12,000 images for the checks)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--binary", help="train_resnet50 (default: $TRAIN_BIN or build/bin/)")
    p.add_argument("--python-ref", help="the Python reference, seed_workload.py (compare)")
    p.add_argument("--steps", type=int, default=64, help="captured steps (compare, scan)")
    p.add_argument("--repeats", type=int, default=3, help="runs per NVTX/teardown measurement")
    p.add_argument("--rounds", "--python-repeats", type=int, default=3,
                   help="compare: rounds of (2) the loader-fed run and (3) the Python reference")
    p.add_argument("--timeout", type=float, default=300, help="seconds per run")
    p.add_argument("--ncu-skip", type=int, default=700,
                   help="ncu: kernel launches to skip (start-up and the warm-up step)")
    p.add_argument("--ncu-count", type=int, default=540, help="ncu: kernels to profile (one step)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8])
    p.add_argument("--prefetch", type=int, nargs="+", default=[2])
    p.add_argument("--units", nargs="+", default=["batch", "sample"])
    argv = list(sys.argv[1:] if argv is None else argv)
    # After `--`: flags for every train_resnet50 run (e.g. -- --device cpu --batch-size 4).
    extra = argv[argv.index("--") + 1:] if "--" in argv else []
    argv = argv[:argv.index("--")] if "--" in argv else argv
    args = p.parse_args(argv)
    args.extra = extra
    if args.command not in ("table", "ncu") and not args.data:
        p.error("--data is required for %s" % args.command)
    return {"checks": cmd_checks, "compare": cmd_compare, "scan": cmd_scan, "loader": cmd_loader,
            "experiments": cmd_experiments, "ncu": cmd_ncu, "table": cmd_table}[args.command](args)


if __name__ == "__main__":
    sys.exit(main())
