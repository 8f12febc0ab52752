"""benchmarks.py's measuring commands: checks, compare, loader, experiments, scan and ncu. Each runs
the workload's programs (GPU runs, minutes each), writes OUT/<command>.json and keeps its runs in
OUT/<command>/; each returns the command's exit status."""

import json
import os
import shutil
import sys
from dataclasses import dataclass
from typing import Optional, Sequence

from ..capture.records import NORMALIZE
from ..capture.report import last_json_object
from ..common import runner
from ..common.exit_status import FAILURE, OK
from ..common.files import check_output_dir, check_output_file, make_dirs, write_text
from .ncu import NCU_METRICS, group_ncu, parse_ncu_csv
from .runs import BenchmarkError, log, profile, read_report, run_direct, train_binary, write_json


@dataclass
class BenchSettings:
    """benchmarks.py's flags. out: the output directory; data: the dataset root (every command but
    ncu and table); extra: arguments after `--`, added to every train_resnet50 run; timeout: seconds
    per run."""

    out: str
    data: Optional[str] = None
    binary: Optional[str] = None  # train_resnet50; None: $TRAIN_BIN or build/bin/
    python_ref: Optional[str] = None  # compare: seed_workload.py
    steps: int = 64  # captured steps (compare, scan, experiments)
    repeats: int = 3  # runs per NVTX / teardown / experiment measurement
    rounds: int = 3  # compare: rounds of the loader-fed run and the reference
    timeout: float = 300
    ncu_skip: int = 700
    ncu_count: int = 540
    workers: Sequence[int] = (1, 2, 3, 4, 6, 8)
    prefetch: Sequence[int] = (2,)
    units: Sequence[str] = ("batch", "sample")
    extra: Sequence[str] = ()


def check_outputs(command, out):
    """Before a command runs: raises files.UsageError naming --out unless OUT, the command's results
    OUT/<command>.json and the folder of its runs OUT/<command>/ can be written."""
    check_output_dir("--out", out)
    check_output_file("--out", os.path.join(out, command + ".json"), create_dirs=True)
    check_output_dir("--out", os.path.join(out, command))


def train_args(opts, steps, extra=()):
    """train_resnet50 arguments of a loader-fed run of `steps` steps: extra, then opts.extra."""
    return ["--data", opts.data, "--steps", str(steps), "--quiet"] + list(extra) + list(opts.extra)


def run_checks(opts):
    """8 and 64 captured steps, iterator reused and reset, each under profile.sh and checked against
    its step count. Exit status 1 when a check failed."""
    binary = train_binary(opts.binary)
    results = []
    ok = True
    for steps in (8, 64):
        for reuse in (True, False):
            name = "%s_%d" % ("reuse" if reuse else "reset", steps)
            prefix = os.path.join(opts.out, "checks", name)
            log("capture %s" % name)
            summary, rc = profile(
                prefix,
                ["--binary", binary]
                + train_args(opts, steps, ["--reuse-iterator=%s" % ("true" if reuse else "false")]),
                opts.timeout,
                expected_steps=steps,
            )
            row = {"name": name, "steps": steps, "reuse_iterator": reuse, "exit_code": rc}
            if summary is not None:
                row.update(
                    {
                        k: summary.get(k)
                        for k in (
                            "steps",
                            "h2d_copies",
                            "capture_window_ms",
                            "no_activity_pct",
                            "sync_calls_in_steps",
                            "layout_conversion_kernels",
                            "checks",
                            "images_per_s",
                            "steps_outside_window",
                        )
                    }
                )
                row["steps_expected"] = steps
                row["all_checks_pass"] = all(v is True for v in summary["checks"].values())
            else:
                row["all_checks_pass"] = False
            ok = ok and row["all_checks_pass"]
            log("  %s: checks %s" % (name, row.get("checks")))
            results.append(row)
    write_json(opts.out, "checks", {"runs": results})
    return OK if ok else FAILURE


def run_compare(opts):
    """The synthetic ceiling, then rounds of the loader-fed run and the Python reference, under
    nsys; then, without nsys, NVTX on vs off and the teardown of a default run. Exit status 1 when a
    capture failed."""
    binary = train_binary(opts.binary)
    out = os.path.join(opts.out, "compare")
    runs = []
    common = ["--steps", str(opts.steps), "--warmup", "3", "--batch-size", "128"] + list(opts.extra)
    plan = [("synthetic", ["--binary", binary, "--synthetic", "--quiet"] + common)]
    python = shutil.which("python3") or sys.executable
    # The reference is loader-bound, so its throughput varies from run to run: rounds of (2) and (3)
    # back to back give paired ratios, compared by their median.
    for i in range(opts.rounds):
        suffix = "" if i == 0 else "_%d" % (i + 1)
        plan.append(
            ("loader" + suffix, ["--binary", binary, "--data", opts.data, "--quiet"] + common)
        )
        if opts.python_ref:
            plan.append(
                (
                    "python" + suffix,
                    [
                        "--",
                        python,
                        opts.python_ref,
                        opts.data,
                        "--steps",
                        str(opts.steps),
                        "--warmup",
                        "3",
                        "--batch-size",
                        "128",
                    ],
                )
            )
    for name, command in plan:
        log("nsys capture: %s" % name)
        summary, rc = profile(
            os.path.join(out, name),
            command,
            opts.timeout,
            expected_steps=opts.steps,
            extra_env={"PYTHONUNBUFFERED": "1"},
        )
        row = {"name": name, "exit_code": rc, "under_nsys": True}
        if summary:
            row.update(
                {
                    k: summary.get(k)
                    for k in (
                        "images_per_s",
                        "no_activity_pct",
                        "steps",
                        "h2d_copies",
                        "capture_window_ms",
                        "batch_wait_total_ms",
                        "h2d_submit_total_ms",
                        "checks",
                        "device_busy_ms",
                        "kernel_launches",
                    )
                }
            )
            gaps = summary.get("idle_gaps") or {}
            for cause, d in (gaps.get("causes") or {}).items():
                row["idle_%s_ms" % cause] = d["total_ms"]
            row["idle_host_by_range_ms"] = {
                k: d["total_ms"] for k, d in (gaps.get("host_by_range") or {}).items()
            }
        log(
            "  %s: %s img/s, no activity %s%%"
            % (name, row.get("images_per_s"), row.get("no_activity_pct"))
        )
        runs.append(row)
        # What is measured so far survives a run that is stopped later.
        write_json(
            opts.out,
            "compare",
            {
                "runs": runs,
                "nvtx": {"on": [], "off": []},
                "teardown": [],
                "steps": opts.steps,
                "partial": True,
            },
        )

    # NVTX cost: the GPU-bound synthetic run, ranges on vs off, alternating.
    nvtx: dict[str, list[float]] = {"on": [], "off": []}
    for i in range(opts.repeats):
        for state in ("on", "off"):
            report = os.path.join(out, "nvtx_%s_%d.json" % (state, i))
            run = run_direct(
                [
                    binary,
                    "--synthetic",
                    "--quiet",
                    "--report",
                    report,
                    "--nvtx=%s" % ("true" if state == "on" else "false"),
                ]
                + common,
                report + ".log",
                opts.timeout,
            )
            r = read_report(report)
            if run.exit_code == 0 and r:
                nvtx[state].append(r["capture"]["images_per_s"])
    log("nvtx on %s / off %s" % (nvtx["on"], nvtx["off"]))

    # Teardown of a default loader run (page-locked ring released at exit).
    teardown = []
    for i in range(opts.repeats):
        report = os.path.join(out, "teardown_%d.json" % i)
        run = run_direct(
            [binary, "--data", opts.data, "--quiet", "--report", report] + common,
            report + ".log",
            opts.timeout,
        )
        r = read_report(report)
        teardown.append(
            {
                "exit_code": run.exit_code,
                "process_s": run.seconds,
                "after_report_s": run.after_report_s,
                "images_per_s": r["capture"]["images_per_s"] if r else None,
                "ring_bytes": (r or {}).get("loader", {}).get("ring_bytes"),
            }
        )
    log("teardown %s" % teardown)
    result = {"runs": runs, "nvtx": nvtx, "teardown": teardown, "steps": opts.steps}
    write_json(opts.out, "compare", result)
    return OK if all(r["exit_code"] == 0 for r in runs) else FAILURE


def run_loader(opts):
    """loader_bench --json at several worker counts: the loader alone, fused vs full decode."""
    bench = os.path.join(os.path.dirname(train_binary(opts.binary)), "loader_bench")
    out = os.path.join(opts.out, "loader")
    make_dirs(out)
    rows = []
    for workers in opts.workers:
        cmd = [
            bench,
            "--data",
            opts.data,
            "--workers",
            str(workers),
            "--json",
            "--batches",
            str(max(4, min(40, 4 * workers))),
        ]
        log("loader_bench --workers %d" % workers)
        lines: list[str] = []
        log_path = os.path.join(out, "workers_%d.log" % workers)
        r = runner.run(cmd, log_path, opts.timeout, on_line=lines.append)
        row = last_json_object(lines) if r.status == runner.OK else None
        if row is not None:
            rows.append(row)
            log(
                "  %.0f img/s per thread fused, %.0f full, %.0f decode only"
                % (
                    rows[-1]["fused_images_per_s_per_thread"],
                    rows[-1]["full_images_per_s_per_thread"],
                    rows[-1]["decode_only_images_per_s_per_thread"],
                )
            )
        else:
            log(
                "  failed (%s, exit %s): %s"
                % (r.status, r.returncode, r.error or (lines[-1] if lines else "no output"))
            )
    write_json(opts.out, "loader", {"rows": rows})
    return OK if rows else FAILURE


def run_experiments(opts):
    """The experiment flags on the GPU: bf16 ceiling and loader-fed throughput, eager vs CUDA-graph
    ceilings, uint8 vs float32 transfers (from nsys captures), the cost of --nvtx-detail layers, the
    implicit-sync check and LibTorch's own trace."""
    binary = train_binary(opts.binary)
    out = os.path.join(opts.out, "experiments")
    make_dirs(out)
    common = ["--steps", str(opts.steps), "--warmup", "3", "--quiet"] + list(opts.extra)
    result = {"steps": opts.steps, "runs": [], "transfers": [], "sync": None, "trace": None}

    def direct(name, extra):
        report = os.path.join(out, name + ".json")
        rc = run_direct(
            [binary, "--report", report] + common + extra, report + ".log", opts.timeout
        ).exit_code
        r = read_report(report)
        row = {
            "name": name,
            "flags": " ".join(extra),
            "exit_code": rc,
            "images_per_s": r["capture"]["images_per_s"] if r else None,
            "batch_wait_total_ms": r["summary"]["batch_wait_total_ms"] if r else None,
            "h2d_submit_total_ms": r["summary"]["h2d_submit_total_ms"] if r else None,
        }
        log("  %s: %s img/s" % (name, row["images_per_s"]))
        result["runs"].append(row)

    for i in range(opts.repeats):
        # Each eager ceiling beside the CUDA-graph step's (--cuda-graph, its memset nodes rewritten
        # into kernels) and the graph as captured (--cuda-graph-memsets nodes), run in turn: paired
        # ratios.
        for precision in ("fp32", "bf16"):
            direct("%s_synthetic_%d" % (precision, i), ["--synthetic", "--precision", precision])
            direct(
                "%s_graphnodes_%d" % (precision, i),
                [
                    "--synthetic",
                    "--precision",
                    precision,
                    "--cuda-graph",
                    "--cuda-graph-memsets",
                    "nodes",
                ],
            )
            direct(
                "%s_graph_%d" % (precision, i),
                ["--synthetic", "--precision", precision, "--cuda-graph"],
            )
    for workers in (8, 16):
        direct(
            "bf16_loader_w%d" % workers,
            ["--data", opts.data, "--precision", "bf16", "--workers", str(workers)],
        )
        direct(
            "bf16_uint8_loader_w%d" % workers,
            [
                "--data",
                opts.data,
                "--precision",
                "bf16",
                "--host-dtype",
                "uint8",
                "--workers",
                str(workers),
            ],
        )
    for i in range(opts.repeats):
        direct("layers_off_%d" % i, ["--synthetic"])
        direct("layers_on_%d" % i, ["--synthetic", "--nvtx-detail", "layers"])

    # Transfers, measured on the device by nsys: float32 vs uint8 host batches.
    for dtype in ("float32", "uint8"):
        prefix = os.path.join(out, "h2d_" + dtype)
        log("nsys capture: host dtype %s" % dtype)
        summary, rc = profile(
            prefix,
            ["--binary", binary, "--data", opts.data, "--host-dtype", dtype] + common,
            opts.timeout,
            expected_steps=opts.steps,
        )
        row = {"host_dtype": dtype, "exit_code": rc}
        if summary:
            h2d = [m for m in summary["memory_operations"] if "Host-to-Device" in m["operation"]]
            steps = summary["steps"] or 1
            if h2d:
                row.update(
                    {
                        "h2d_copies": h2d[0]["count"],
                        "h2d_mb_per_step": h2d[0]["bytes"] / steps / 1e6,
                        "h2d_ms_per_step": h2d[0]["total_ms"] / steps,
                    }
                )
            row.update(
                {
                    "images_per_s": summary.get("images_per_s"),
                    "h2d_submit_ms_per_step": (summary.get("h2d_submit_total_ms") or 0) / steps,
                    "normalize_ms_per_step": (summary.get("phase_totals_ms") or {}).get(
                        NORMALIZE, 0
                    )
                    / steps,
                    "checks": summary.get("checks"),
                }
            )
        log("  %s" % row)
        result["transfers"].append(row)

    # The implicit-sync pitfall: analyze.py's no_sync_in_steps must fail on purpose.
    prefix = os.path.join(out, "sync_every_step")
    summary, rc = profile(
        prefix,
        ["--binary", binary, "--data", opts.data, "--steps", "8", "--sync-every-step", "--quiet"]
        + list(opts.extra),
        opts.timeout,
        expected_steps=8,
    )
    if summary:
        result["sync"] = {
            "sync_calls_in_steps": summary.get("sync_calls_in_steps"),
            "by_name": summary.get("sync_calls_in_steps_by_name"),
            "no_sync_in_steps": summary["checks"].get("no_sync_in_steps"),
            "images_per_s": summary.get("images_per_s"),
        }
    log("sync: %s" % result["sync"])

    # LibTorch's own profiler over the capture window (not under nsys).
    trace = os.path.join(out, "torch_trace.json")
    rc = run_direct(
        [
            binary,
            "--data",
            opts.data,
            "--steps",
            "4",
            "--warmup",
            "3",
            "--quiet",
            "--torch-profiler-trace",
            trace,
        ]
        + list(opts.extra),
        trace + ".log",
        opts.timeout,
    ).exit_code
    if rc == 0 and os.path.exists(trace):
        with open(trace) as f:
            events = json.load(f)["traceEvents"]
        cats: dict[str, int] = {}
        for e in events:
            cats[e.get("cat", "")] = cats.get(e.get("cat", ""), 0) + 1
        scopes = sorted({e["name"] for e in events if e.get("cat") == "user_annotation"})
        result["trace"] = {
            "events": len(events),
            "categories": cats,
            "scopes": scopes,
            "bytes": os.path.getsize(trace),
        }
    log("trace: %s" % result["trace"])
    write_json(opts.out, "experiments", result)
    return OK


def run_scan(opts):
    """Without nsys: the synthetic ceiling (two runs), then every work unit x prefetch x workers
    setting of the loader."""
    binary = train_binary(opts.binary)
    out = os.path.join(opts.out, "scan")
    make_dirs(out)
    common = ["--steps", str(opts.steps), "--warmup", "3", "--quiet"] + list(opts.extra)
    rows = []

    def one(name, extra):
        report = os.path.join(out, name + ".json")
        rc = run_direct(
            [binary, "--report", report] + common + extra, report + ".log", opts.timeout
        ).exit_code
        r = read_report(report)
        row = {
            "name": name,
            "exit_code": rc,
            "images_per_s": r["capture"]["images_per_s"] if r else None,
            "batch_wait_total_ms": r["summary"]["batch_wait_total_ms"] if r else None,
        }
        log("  %s: %s img/s" % (name, row["images_per_s"]))
        rows.append(row)
        return row

    ceiling = [one("synthetic_%d" % i, ["--synthetic"])["images_per_s"] for i in range(2)]
    for unit in opts.units:
        for prefetch in opts.prefetch:
            for workers in opts.workers:
                one(
                    "w%d_p%d_%s" % (workers, prefetch, unit),
                    [
                        "--data",
                        opts.data,
                        "--workers",
                        str(workers),
                        "--prefetch-factor",
                        str(prefetch),
                        "--work-unit",
                        unit,
                    ],
                )
    write_json(opts.out, "scan", {"ceiling": ceiling, "rows": rows, "steps": opts.steps})
    return OK


def run_ncu(opts):
    """Nsight Compute on --ncu-count kernels of a synthetic run after --ncu-skip launches; keeps its
    output as ncu/ncu.csv and writes the groups by kernel kind. Raises BenchmarkError without ncu.
    """
    binary = train_binary(opts.binary)
    ncu = shutil.which("ncu")
    if not ncu:
        raise BenchmarkError("ncu (Nsight Compute) is not on PATH")
    out = os.path.join(opts.out, "ncu")
    make_dirs(out)
    cmd = [
        ncu,
        "--clock-control",
        "none",
        "--csv",
        "--page",
        "raw",
        "--print-units",
        "base",
        "--print-kernel-base",
        "demangled",
        "--metrics",
        ",".join(NCU_METRICS),
        "--launch-skip",
        str(opts.ncu_skip),
        "--launch-count",
        str(opts.ncu_count),
        binary,
        "--synthetic",
        "--warmup",
        "1",
        "--steps",
        "2",
        "--batch-size",
        "128",
        "--quiet",
    ] + list(opts.extra)
    log("ncu: %s" % " ".join(cmd))
    log_path = os.path.join(out, "ncu.log")
    r = runner.run(cmd, log_path, opts.timeout)
    with open(log_path, encoding="utf-8", errors="replace") as f:
        text = f.read().split("\n", 1)[1]  # the output, after the runner's "$ command" line
    write_text(os.path.join(out, "ncu.csv"), text)
    rows = parse_ncu_csv(text)
    if r.status != runner.OK or not rows:
        log(
            "ncu failed (%s, exit %s, %d kernels); output in %s"
            % (r.status, r.returncode, len(rows), os.path.join(out, "ncu.csv"))
        )
        return FAILURE
    groups = group_ncu(rows)
    write_json(opts.out, "ncu", {"command": cmd, "kernels": len(rows), "groups": groups})
    log("ncu: %d kernels profiled" % len(rows))
    return OK


# The measuring commands by name (benchmarks.py's `table` only reads what they wrote).
COMMANDS = {
    "checks": run_checks,
    "compare": run_compare,
    "scan": run_scan,
    "loader": run_loader,
    "experiments": run_experiments,
    "ncu": run_ncu,
}
