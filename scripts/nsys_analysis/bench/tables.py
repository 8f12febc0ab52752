"""benchmarks.py's `table`: the Markdown tables of docs/BENCHMARKS.md from the JSON files its other
commands write (checks, compare, loader, experiments, ncu, scan)."""

import functools
import os
import statistics

from ..common.formatting import fmt
from .runs import BenchmarkError, read_json

# Numbers in tables: the shared formatter, blank when missing, integers written like floats.
number = functools.partial(fmt, missing="", ints_exact=False)


def render_tables(out_dir):
    """The tables of every OUT_DIR/<command>.json present, as text; "" when there is none. Raises
    BenchmarkError naming the file that is not JSON or not of the form its command writes."""
    sections = (
        ("checks", checks_table),
        (
            "compare",
            lambda doc: compare_tables(doc) + [py_runs_note(doc)] * bool(py_runs_note(doc)),
        ),
        ("loader", loader_table),
        ("experiments", experiments_tables),
        ("ncu", ncu_table),
        ("scan", scan_table),
    )
    lines = []
    for name, section in sections:
        doc = read_json(out_dir, name)
        if not doc:
            continue
        try:
            lines += section(doc)
        except (
            KeyError,
            IndexError,
            TypeError,
            ValueError,
            AttributeError,
            statistics.StatisticsError,
        ) as e:
            raise BenchmarkError(
                "%s: not the results benchmarks.py %s writes (%s: %s)"
                % (os.path.join(out_dir, name + ".json"), name, type(e).__name__, e)
            )
    return "".join(line + "\n" for line in lines)


def checks_table(checks):
    """checks.json: one row per capture, then a blank line."""
    out = [
        "| capture | torch_step in window | H2D copies | syncs in steps | layout kernels "
        "| no activity | images/s | checks |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in checks["runs"]:
        c = r.get("checks") or {}
        out.append(
            "| %s | %s (expected %s) | %s | %s | %s | %s%% | %s | %s |"
            % (
                r["name"],
                r.get("steps"),
                r.get("steps_expected"),
                r.get("h2d_copies"),
                r.get("sync_calls_in_steps"),
                r.get("layout_conversion_kernels"),
                number(r.get("no_activity_pct"), 1),
                number(r.get("images_per_s"), 1),
                "all pass"
                if r.get("all_checks_pass")
                else ", ".join("%s=%s" % kv for kv in c.items()),
            )
        )
    out.append("")
    return out


def compare_tables(compare):
    """compare.json: the captures (against the synthetic run and the Python reference's median), the
    paired ratios, the NVTX cost and the teardowns, then a blank line."""
    runs = {r["name"]: r for r in compare["runs"]}
    syn = (runs.get("synthetic") or {}).get("images_per_s")
    py_runs = [
        r["images_per_s"]
        for r in compare["runs"]
        if r["name"].startswith("python") and r.get("images_per_s")
    ]
    py = statistics.median(py_runs) if py_runs else None
    out = [
        "| run (under nsys, %d steps) | images/s | of synthetic | vs Python (median) "
        "| no GPU activity | of which host-bound | batch_wait total | h2d_submit total |"
        % compare["steps"],
        "|---|---|---|---|---|---|---|---|",
    ]
    for r in compare["runs"]:
        ips = r.get("images_per_s")
        window = r.get("capture_window_ms")
        host = r.get("idle_host_ms")
        out.append(
            "| %s | %s | %s | %s | %s%% | %s | %s ms | %s ms |"
            % (
                r["name"],
                number(ips, 1),
                number(100 * ips / syn, 1) + "%" if ips and syn else "",
                number(ips / py, 2) + "x" if ips and py else "",
                number(r.get("no_activity_pct"), 1),
                number(100 * host / window, 1) + "%" if host is not None and window else "",
                number(r.get("batch_wait_total_ms"), 1),
                number(r.get("h2d_submit_total_ms"), 1),
            )
        )
    pairs = paired_ratios(compare)
    if pairs:
        out.append(
            "\npaired rounds, (2)/(3): %s; median %.2fx"
            % (", ".join("%.2fx" % p for p in pairs), statistics.median(pairs))
        )
    on, off = compare["nvtx"]["on"], compare["nvtx"]["off"]
    if on and off:
        out.append(
            "\nNVTX on vs off (synthetic, no nsys, %d runs each): median %.1f vs %.1f "
            "images/s, cost %.2f%%"
            % (
                len(on),
                statistics.median(on),
                statistics.median(off),
                100 * (1 - statistics.median(on) / statistics.median(off)),
            )
        )
    for t in compare["teardown"]:
        out.append(
            "teardown: %s s from the report line to exit (process %s s, ring %s bytes)"
            % (
                number(t.get("after_report_s"), 2),
                number(t.get("process_s"), 1),
                t.get("ring_bytes"),
            )
        )
    out.append("")
    return out


def paired_ratios(compare):
    """(2)/(3) images/s per round: loader[_k] over python[_k], for rounds where both ran."""
    runs = {r["name"]: r.get("images_per_s") for r in (compare or {}).get("runs", [])}
    out = []
    for name, ips in runs.items():
        if name.startswith("loader"):
            py = runs.get("python" + name[len("loader") :])
            if ips and py:
                out.append(ips / py)
    return out


def py_runs_note(compare):
    """The Python reference's captures and their median, ending in a newline; "" without any."""
    if not compare:
        return ""
    py = [
        r["images_per_s"]
        for r in compare["runs"]
        if r["name"].startswith("python") and r.get("images_per_s")
    ]
    return (
        (
            "Python reference, %d captures: %s images/s (median %.1f)\n"
            % (len(py), ", ".join("%.1f" % v for v in py), statistics.median(py))
        )
        if py
        else ""
    )


def loader_table(loader):
    """loader.json: one row per loader_bench thread count, then a blank line."""
    out = [
        "| loader_bench threads | fused img/s | per thread | full decode + crop, per thread "
        "| decode only, per thread | fused / full |",
        "|---|---|---|---|---|---|",
    ]
    for r in loader["rows"]:
        out.append(
            "| %d | %.0f | %.0f | %.0f | %.0f | %.2fx |"
            % (
                r["threads"],
                r["fused_images_per_s"],
                r["fused_images_per_s_per_thread"],
                r["full_images_per_s_per_thread"],
                r["decode_only_images_per_s_per_thread"],
                r["fused_speedup_over_full"],
            )
        )
    out.append("")
    return out


def experiments_tables(exp):
    """experiments.json: the direct runs, the transfers by host dtype, the sync and trace
    results."""
    out = [
        "| run (%d steps, no nsys) | flags | images/s | batch_wait total |" % exp["steps"],
        "|---|---|---|---|",
    ]
    for r in exp["runs"]:
        out.append(
            "| %s | `%s` | %s | %s ms |"
            % (
                r["name"],
                r["flags"],
                number(r["images_per_s"], 1),
                number(r["batch_wait_total_ms"], 1),
            )
        )
    for kind, what in (("graph", "CUDA graph"), ("graphnodes", "CUDA graph with its memset nodes")):
        for precision, ratios in graph_gains(exp, kind).items():
            out.append(
                "\n%s over eager, %s ceiling (paired runs): %s; median %+.2f%%"
                % (
                    what,
                    precision,
                    ", ".join("%+.2f%%" % (100 * (r - 1)) for r in ratios),
                    100 * (statistics.median(ratios) - 1),
                )
            )
    out += [
        "",
        "| host dtype (nsys) | H2D copies | H2D MB/step | H2D ms/step (device) "
        "| h2d_submit ms/step (host) | normalize ms/step (host) | images/s |",
        "|---|---|---|---|---|---|---|",
    ]
    for t in exp["transfers"]:
        out.append(
            "| %s | %s | %s | %s | %s | %s | %s |"
            % (
                t["host_dtype"],
                t.get("h2d_copies"),
                number(t.get("h2d_mb_per_step"), 2),
                number(t.get("h2d_ms_per_step"), 3),
                number(t.get("h2d_submit_ms_per_step"), 3),
                number(t.get("normalize_ms_per_step"), 3),
                number(t.get("images_per_s"), 1),
            )
        )
    out += ["", "sync every step: %s" % exp["sync"], "torch trace: %s" % exp["trace"], ""]
    return out


def graph_gains(exp, kind="graph"):
    """{precision: [graph / eager images/s]} from experiments.json's paired runs <p>_synthetic_<i>
    and <p>_<kind>_<i> (both with a throughput; kind "graph" is --cuda-graph, "graphnodes" the graph
    with its memset nodes as captured), in the runs' order; precisions without a pair are left
    out."""
    ips = {r["name"]: r["images_per_s"] for r in exp.get("runs", ()) if r.get("images_per_s")}
    out: dict[str, list[float]] = {}
    for r in exp.get("runs", ()):
        parts = r["name"].split("_")
        if len(parts) == 3 and parts[1] == kind and r["name"] in ips:
            eager = ips.get("%s_synthetic_%s" % (parts[0], parts[2]))
            if eager:
                out.setdefault(parts[0], []).append(ips[r["name"]] / eager)
    return out


def ncu_table(ncu):
    """ncu.json: one row per kernel kind, then a blank line."""
    total = sum(g["total_ms"] for g in ncu["groups"])
    out = [
        "| kernel kind (ncu, %d kernels, %.1f ms) | launches | ms | share of time | DRAM GB/s "
        "| DRAM %% of peak | memory SOL %% | SM SOL %% |" % (ncu["kernels"], total),
        "|---|---|---|---|---|---|---|---|",
    ]
    for g in ncu["groups"]:
        out.append(
            "| %s | %d | %.2f | %.1f%% | %.0f | %.0f | %.0f | %.0f |"
            % (
                g["kind"],
                g["launches"],
                g["total_ms"],
                g["pct_of_time"],
                g["dram_gb_per_s"],
                g["dram_pct"],
                g["memory_sol_pct"],
                g["sm_sol_pct"],
            )
        )
    out.append("")
    return out


def scan_table(scan):
    """scan.json: one row per loader setting, against the median synthetic ceiling."""
    ceiling = statistics.median(scan["ceiling"])
    out = [
        "| setting | images/s | of synthetic (%.0f) | batch_wait total |" % ceiling,
        "|---|---|---|---|",
    ]
    for r in scan["rows"]:
        if r["name"].startswith("synthetic"):
            continue
        ips = r.get("images_per_s")
        out.append(
            "| %s | %s | %s | %s ms |"
            % (
                r["name"],
                number(ips, 1),
                number(100 * ips / ceiling, 1) + "%" if ips else "",
                number(r.get("batch_wait_total_ms"), 1),
            )
        )
    return out
