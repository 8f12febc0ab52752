#!/usr/bin/env python3
"""Run the article's input-pipeline comparison: configurations x seeds in a shuffled order, each captured
with scripts/profile.sh (or, with --no-nsys, run directly for its report), then one table and figures 4-5.

usage: sweep.py [--data DIR] [--binary PATH] [--configs FILE.json] [--only NAME ...]
                [--seeds 2026 2027] [--order-seed N] [--timeout 600] [--out DIR]
                [--no-nsys] [--dry-run] [--no-figures] [--run-figures] [-- EXTRA ARGS FOR EVERY RUN]

Every run lives in OUT/runs/<config>_<seed>/ (attempt logs, run report, capture, analysis). A run that
exceeds --timeout is killed and retried once; both attempts are recorded. A run whose checks fail
(analysis checks of its capture, and its report's step count / interruption flag) is not aggregated,
and the table says which check failed. Outputs in OUT: sweep.md, sweep.csv (one row per configuration:
each repetition and the mean), runs.csv, sweep.json, fig4_sweep.png, fig5_batch_wait.png.

Configurations are flag sets for train_resnet50 (keys are its flags in snake_case: steps, workers,
prefetch_factor, pin_memory, reuse_iterator, ...). --configs FILE replaces the default list with
{"name": {flag: value, ...}, ...}; flags a configuration does not give keep the baseline's. A flag also
given after `--` overrides the configuration's (e.g. -- --device cpu --batch-size 4 --steps 2).

Exit status: 0 every run aggregated; 1 some run failed, timed out twice or failed a check; 2 usage;
4 --deadline reached (rerun with --resume to finish).
"""

import argparse
import functools
import csv
import json
import os
import random
import re
import shutil
import sys
import time
from collections import OrderedDict

SCRIPT_DIR = os.path.dirname(os.path.abspath(__file__))
REPO_ROOT = os.path.dirname(SCRIPT_DIR)
sys.path.insert(0, SCRIPT_DIR)
from nsys_analysis import markdown, runner  # noqa: E402
from nsys_analysis.export import AnalysisError  # noqa: E402
from nsys_analysis.figures import plot_sweep, plot_sweep_batch_wait, require_matplotlib  # noqa: E402
from nsys_analysis.formatting import fmt  # noqa: E402
from nsys_analysis.pipeline import analyze  # noqa: E402
from nsys_analysis.report import load_report, report_metrics  # noqa: E402

# Numbers in tables: the shared formatter, a dash when missing, integers written like floats.
number = functools.partial(fmt, missing="–", ints_exact=False)

# The article's baseline (section 8): 64 steps, 8 workers, prefetch 2, pinned, iterator reused.
BASELINE = OrderedDict([("steps", 64), ("warmup", 3), ("batch_size", 128), ("workers", 8),
                        ("prefetch_factor", 2), ("pin_memory", True), ("reuse_iterator", True)])


def _variant(**changes):
    cfg = OrderedDict(BASELINE)
    cfg.update(changes)
    return cfg


# The article's eight configurations: two short captures (reset vs reused iterator), the baseline, and
# one-change variants of the baseline.
DEFAULT_CONFIGS = OrderedDict([
    ("reset_8", _variant(steps=8, reuse_iterator=False)),
    ("reuse_8", _variant(steps=8)),
    ("reuse_64", _variant()),
    ("workers_4", _variant(workers=4)),
    ("workers_12", _variant(workers=12)),
    ("prefetch_1", _variant(prefetch_factor=1)),
    ("prefetch_4", _variant(prefetch_factor=4)),
    ("no_pin", _variant(pin_memory=False)),
])
DEFAULT_SEEDS = (2026, 2027)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class UsageError(Exception):
    """Bad command-line input or configuration file; main() exits 2."""


def load_configs(path):
    """Read a configuration file: {"name": {flag: value}} or [{"name": ..., flag: value}, ...]."""
    try:
        with open(path) as f:
            doc = json.load(f, object_pairs_hook=OrderedDict)
    except (OSError, ValueError) as e:
        raise UsageError("cannot read --configs %s: %s" % (path, e))
    if isinstance(doc, list):
        items = []
        for entry in doc:
            if not isinstance(entry, dict) or "name" not in entry:
                raise UsageError("expected objects with a \"name\" in %s, got %r" % (path, entry))
            entry = OrderedDict(entry)
            items.append((str(entry.pop("name")), entry))
    elif isinstance(doc, dict):
        items = list(doc.items())
    else:
        raise UsageError("expected a JSON object or list in %s" % path)
    configs = OrderedDict()
    for name, flags in items:
        if not _NAME.match(name):
            raise UsageError("expected configuration names of letters, digits, _ . -, got %r in %s" % (name, path))
        if not isinstance(flags, dict):
            raise UsageError("expected an object of flags for %s in %s, got %r" % (name, path, flags))
        for key, value in flags.items():
            if not isinstance(value, (str, int, float, bool)):
                raise UsageError("expected a string, number or boolean for %s.%s in %s, got %r" % (name, key, path, value))
        cfg = _variant(**flags)
        if not isinstance(cfg["steps"], int) or isinstance(cfg["steps"], bool) or cfg["steps"] < 1:
            raise UsageError("expected %s.steps to be a positive integer in %s, got %r" % (name, path, cfg["steps"]))
        configs[name] = cfg
    if not configs:
        raise UsageError("no configurations in %s" % path)
    return configs


def flag_name(key):
    return "--" + key.replace("_", "-")


def extra_flags(extra):
    """Flag names (and values) given after `--`: {"--steps": "2", "--synthetic": None}."""
    out, i = {}, 0
    while i < len(extra):
        tok = extra[i]
        if tok.startswith("--"):
            if "=" in tok:
                name, value = tok.split("=", 1)
                out[name] = value
            elif i + 1 < len(extra) and not extra[i + 1].startswith("--"):
                out[tok] = extra[i + 1]
                i += 1
            else:
                out[tok] = None
        i += 1
    return out


def run_args(cfg, seed, data, extra):
    """train_resnet50 arguments for one run; flags in extra override the configuration's."""
    overridden = extra_flags(extra)
    args = []
    if data and "--data" not in overridden:
        args += ["--data", data]
    for key, value in cfg.items():
        flag = flag_name(key)
        if flag in overridden:
            continue
        if isinstance(value, bool):
            args.append("%s=%s" % (flag, "true" if value else "false"))
        else:
            args += [flag, str(value)]
    if "--seed" not in overridden:
        args += ["--seed", str(seed)]
    return args + list(extra)


def expected_steps(cfg, extra):
    value = extra_flags(extra).get("--steps")
    try:
        return int(value) if value is not None else int(cfg["steps"])
    except ValueError:
        raise UsageError("expected an integer after --steps, got %r" % value)


def changes_from_baseline(cfg):
    diff = ["%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)
            for k, v in cfg.items() if BASELINE.get(k) != v]
    return ", ".join(diff) if diff else "baseline"


def make_plan(configs, seeds, order_seed):
    """[(config, seed)] for every pair, shuffled reproducibly by order_seed."""
    plan = [(name, seed) for name in configs for seed in seeds]
    random.Random(order_seed).shuffle(plan)
    return plan


def report_checks(metrics, steps):
    """Checks a run report can answer on its own (used with and without a capture)."""
    checks, details = OrderedDict(), OrderedDict()
    n = metrics["steps"]
    records = metrics["step_records"]
    checks["report_step_count"] = n == steps and (records is None or records == steps)
    details["report_step_count"] = "report capture.steps %s, %s step records, expected %d" % (
        n, "no" if records is None else records, steps)
    checks["report_not_interrupted"] = not metrics["interrupted"]
    details["report_not_interrupted"] = "interrupted: %s" % str(metrics["interrupted"]).lower()
    ips = metrics["images_per_s"]
    checks["report_throughput"] = ips is not None and ips > 0 and ips == ips and ips != float("inf")
    details["report_throughput"] = "images_per_s %s" % ips
    return checks, details


def execute_run(name, cfg, seed, a, extra, order):
    """Run one (configuration, seed): attempts, report, capture analysis, checks. Returns a result dict."""
    run_dir = os.path.join(a.out, "runs", "%s_%d" % (name, seed))
    os.makedirs(run_dir, exist_ok=True)
    steps = expected_steps(cfg, extra)
    args = run_args(cfg, seed, a.data, extra)
    if a.no_nsys:
        report_path = os.path.join(run_dir, "run.json")
        cmd = [a.binary] + args + ["--report", report_path]
    else:
        prefix = os.path.join(run_dir, "capture")
        report_path = prefix + ".json"
        cmd = [a.profile_script, "--prefix", prefix, "--binary", a.binary, "--"] + args + ["--report", report_path]
    result = OrderedDict([("config", name), ("seed", seed), ("order", order), ("run_dir", run_dir),
                          ("command", cmd), ("expected_steps", steps), ("attempts", []),
                          ("status", None), ("aggregated", False), ("reason", None), ("checks", {}),
                          ("check_details", {}), ("metrics", {})])
    for attempt in (1, 2):
        if os.path.exists(report_path):
            os.remove(report_path)
        log_path = os.path.join(run_dir, "attempt%d.log" % attempt)
        run = runner.run(cmd, log_path, a.timeout)
        result["attempts"].append(OrderedDict([("attempt", attempt), ("status", run.status),
                                               ("exit_code", run.returncode), ("seconds", round(run.seconds, 2)),
                                               ("log", log_path)]))
        if run.status != runner.TIMEOUT:
            break
        print("sweep: %s seed %d timed out after %ds (attempt %d)%s" % (
            name, seed, a.timeout, attempt, ", retrying" if attempt == 1 else ""), file=sys.stderr)
    last = result["attempts"][-1]
    if last["status"] == "timeout":
        result["status"] = "timeout"
        result["reason"] = "timed out after %d s on both attempts" % a.timeout
        return result
    if last["status"] == "failed":
        result["status"] = "failed"
        result["reason"] = "exit status %s (see %s)" % (last["exit_code"], last["log"])
        return result
    result["status"] = "ok"

    try:
        metrics = report_metrics(load_report(report_path))
    except AnalysisError as e:
        result["reason"] = "unusable run report: %s" % e
        return result
    checks, details = report_checks(metrics, steps)
    m = OrderedDict([("images_per_s", metrics["images_per_s"]), ("no_activity_pct", None),
                     ("batch_wait_ms", metrics["batch_wait_ms"]),
                     ("batch_wait_total_ms", metrics["batch_wait_total_ms"]),
                     ("h2d_submit_total_ms", metrics["h2d_submit_total_ms"]),
                     ("longest_wait_ms", metrics["batch_wait_max_ms"]),
                     ("longest_wait_step", metrics["batch_wait_max_step"]),
                     ("source", "run report")])
    if not a.no_nsys:
        try:
            summary = analyze(prefix + ".sqlite", os.path.join(run_dir, "analysis"), report_path,
                                      expected_steps=steps, figures=a.run_figures)
        except AnalysisError as e:
            result["reason"] = "capture analysis failed: %s" % e
            return result
        checks.update(summary["checks"])
        details.update(summary["check_details"])
        m["no_activity_pct"] = summary["no_activity_pct"]
        if summary["batch_wait_total_ms"] is not None:  # NVTX ranges of the capture, when present
            m["batch_wait_ms"] = summary["batch_wait_ms"]
            m["batch_wait_total_ms"] = summary["batch_wait_total_ms"]
            m["longest_wait_ms"] = summary["batch_wait_max_ms"]
            m["longest_wait_step"] = summary["batch_wait_max_step"]
            m["source"] = "capture (NVTX) + run report"
        if summary["h2d_submit_total_ms"] is not None:
            m["h2d_submit_total_ms"] = summary["h2d_submit_total_ms"]
    result["checks"], result["check_details"], result["metrics"] = checks, details, m
    failed = [k for k, v in checks.items() if v is not True]
    if failed:
        result["reason"] = "checks failed: " + "; ".join("%s (%s)" % (k, details.get(k, "")) for k in failed)
        return result
    result["aggregated"] = True
    return result


# --------------------------------------------------------------------------------------------------
# Aggregation and output
# --------------------------------------------------------------------------------------------------

_METRICS = ("images_per_s", "no_activity_pct", "batch_wait_total_ms", "h2d_submit_total_ms")


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def aggregate(configs, seeds, results):
    """One row per configuration: per-seed values of aggregated runs and their means."""
    rows = []
    for name, cfg in configs.items():
        runs = [r for r in results if r["config"] == name]
        if not runs:
            continue
        by_seed = {r["seed"]: r for r in runs}
        good = [r for r in runs if r["aggregated"]]
        row = OrderedDict([("config", name), ("changes", changes_from_baseline(cfg)), ("steps", cfg["steps"]),
                           ("runs_aggregated", len(good)), ("runs_excluded", len(runs) - len(good)),
                           ("retried", sum(1 for r in runs if len(r["attempts"]) > 1))])
        for metric in _METRICS + ("longest_wait_ms", "longest_wait_step"):
            for seed in seeds:
                r = by_seed.get(seed)
                row["%s_%d" % (metric, seed)] = r["metrics"].get(metric) if r and r["aggregated"] else None
            if metric in _METRICS:
                row["%s_mean" % metric] = _mean(r["metrics"].get(metric) for r in good)
        row["notes"] = "; ".join(_run_note(r) for r in sorted(runs, key=lambda r: r["seed"]) if _run_note(r))
        rows.append(row)
    return rows


def _run_note(r):
    notes = []
    timeouts = sum(1 for at in r["attempts"] if at["status"] == "timeout")
    if timeouts and r["status"] != "timeout":
        notes.append("seed %d: timed out once, retry succeeded" % r["seed"])
    if not r["aggregated"]:
        notes.append("seed %d excluded: %s" % (r["seed"], r["reason"]))
    return "; ".join(notes)


def render_markdown(rows, results, seeds, a):
    pair = " / ".join(str(s) for s in seeds)
    out = ["# Input-pipeline sweep", ""]
    out.append("%d runs (%d configurations x seeds %s) in a shuffled order (order seed %d), %s; per-run "
               "time limit %d s with one retry." % (
                   len(results), len(rows), ", ".join(str(s) for s in seeds), a.order_seed,
                   "run reports only (--no-nsys)" if a.no_nsys else "each captured by scripts/profile.sh",
                   a.timeout))
    if a.extra:
        out += ["", "Arguments added to every run (they override the configurations' flags): `%s`."
                % " ".join(a.extra)]
    out += ["", "Each cell: seed %s, then the mean of the aggregated runs. Longest wait: ms @ step index "
            "(0 = first captured step)." % pair, ""]
    headers = ["config", "change", "images/s", "no-activity %", "batch_wait total ms", "h2d_submit total ms",
               "longest wait", "notes"]
    table = []
    for row in rows:
        def cell(metric, digits=1):
            vals = " / ".join(number(row["%s_%d" % (metric, s)], digits) for s in seeds)
            return "%s (mean %s)" % (vals, number(row["%s_mean" % metric], digits))
        longest = " / ".join(
            "–" if row["longest_wait_ms_%d" % s] is None else "%s @ %s" % (
                number(row["longest_wait_ms_%d" % s], 1),
                "?" if row["longest_wait_step_%d" % s] is None else row["longest_wait_step_%d" % s])
            for s in seeds)
        table.append([row["config"], row["changes"], cell("images_per_s"),
                      cell("no_activity_pct", 2) if not a.no_nsys else "– (no capture)",
                      cell("batch_wait_total_ms"), cell("h2d_submit_total_ms"), longest, row["notes"] or ""])
    out.append(markdown.table(headers, table, ["l", "l", "r", "r", "r", "r", "r", "l"]))
    out += ["", "## Runs in execution order", ""]
    out.append(markdown.table(
        ["#", "run", "status", "attempts", "aggregated", "images/s", "reason"],
        [(r["order"], "%s_%d" % (r["config"], r["seed"]), r["status"],
          ", ".join("%s %.1fs" % (at["status"], at["seconds"]) for at in r["attempts"]),
          "yes" if r["aggregated"] else "NO", number(r["metrics"].get("images_per_s"), 1), r["reason"] or "")
         for r in sorted(results, key=lambda r: r["order"])], ["r", "l", "l", "l", "l", "r", "l"]))
    excluded = [r for r in results if not r["aggregated"]]
    if excluded:
        out += ["", "## Excluded runs", ""]
        out += ["- %s seed %d: %s" % (r["config"], r["seed"], r["reason"]) for r in excluded]
    return "\n".join(out) + "\n"


def write_csv(path, rows):
    if not rows:
        open(path, "w").close()
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for row in rows:
            w.writerow({k: ("" if v is None else (round(v, 6) if isinstance(v, float) else v)) for k, v in row.items()})


def run_rows(results):
    rows = []
    for r in sorted(results, key=lambda r: r["order"]):
        m = r["metrics"]
        rows.append(OrderedDict([
            ("order", r["order"]), ("config", r["config"]), ("seed", r["seed"]), ("status", r["status"]),
            ("attempts", len(r["attempts"])),
            ("timeouts", sum(1 for at in r["attempts"] if at["status"] == "timeout")),
            ("aggregated", r["aggregated"]), ("reason", r["reason"] or ""),
            ("images_per_s", m.get("images_per_s")), ("no_activity_pct", m.get("no_activity_pct")),
            ("batch_wait_total_ms", m.get("batch_wait_total_ms")),
            ("h2d_submit_total_ms", m.get("h2d_submit_total_ms")),
            ("longest_wait_ms", m.get("longest_wait_ms")), ("longest_wait_step", m.get("longest_wait_step")),
            ("seconds", sum(at["seconds"] for at in r["attempts"]))]))
    return rows


def draw_figures(rows, results, seeds, a):
    fig4_rows = [{"config": row["config"],
                  "runs": [{"seed": r["seed"], "images_per_s": r["metrics"].get("images_per_s"),
                            "no_activity_pct": r["metrics"].get("no_activity_pct")}
                           for r in results if r["config"] == row["config"] and r["aggregated"]]}
                 for row in rows]
    paths = [plot_sweep(fig4_rows, os.path.join(a.out, "fig4_sweep.png"), has_capture=not a.no_nsys)]

    def series(names):
        out = []
        for name in names:
            for seed in seeds:
                for r in results:
                    if r["config"] == name and r["seed"] == seed and r["aggregated"] and r["metrics"].get("batch_wait_ms"):
                        out.append(("%s seed %d" % (name, seed), r["metrics"]["batch_wait_ms"]))
        return out
    titles = ("Reset vs reused iterator: %s" % " vs ".join(a.fig5_left),
              "Baseline runs: %s" % ", ".join(a.fig5_right))
    paths.append(plot_sweep_batch_wait(series(a.fig5_left), series(a.fig5_right),
                                               os.path.join(a.out, "fig5_batch_wait.png"), titles))
    return paths


def parse_args(argv):
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("--data", help="dataset root passed to every run as --data")
    p.add_argument("--binary", default=os.environ.get("TRAIN_BIN") or os.path.join(REPO_ROOT, "build", "bin", "train_resnet50"),
                   help="train_resnet50 or any executable taking its flags (default: $TRAIN_BIN, else build/bin/train_resnet50)")
    p.add_argument("--configs", help="JSON file of configurations replacing the article's eight")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these configurations")
    p.add_argument("--seeds", nargs="+", type=int, default=list(DEFAULT_SEEDS), help="seeds (default 2026 2027)")
    p.add_argument("--order-seed", type=int, default=1, help="seed of the shuffled run order (default 1)")
    p.add_argument("--timeout", type=float, default=600, help="seconds per run attempt; one retry (default 600)")
    p.add_argument("--out", default=os.path.join("out", "sweep"), help="output directory (default out/sweep)")
    p.add_argument("--no-nsys", action="store_true", help="run the binary directly; use only the run reports")
    p.add_argument("--dry-run", action="store_true", help="print the shuffled plan and exit")
    p.add_argument("--resume", action="store_true",
                   help="keep runs that finished in an earlier sweep into the same --out")
    p.add_argument("--deadline", type=float, default=0,
                   help="start no new run after this many seconds (one run at least); exit 4 "
                        "(continue with --resume)")
    p.add_argument("--no-figures", action="store_true", help="skip figures 4 and 5 (no matplotlib needed)")
    p.add_argument("--run-figures", action="store_true", help="also draw figures 1-3 and 5 for every capture")
    p.add_argument("--profile-script", default=os.path.join(SCRIPT_DIR, "profile.sh"), help=argparse.SUPPRESS)
    p.add_argument("--fig5-left", nargs="+", default=["reset_8", "reuse_8"], metavar="NAME",
                   help="configurations in figure 5's left panel (default reset_8 reuse_8)")
    p.add_argument("--fig5-right", nargs="+", default=["reuse_64"], metavar="NAME",
                   help="configurations in figure 5's right panel (default reuse_64)")
    a = p.parse_args(argv)
    if a.timeout <= 0:
        p.error("expected --timeout > 0, got %g" % a.timeout)
    if len(set(a.seeds)) != len(a.seeds):
        p.error("expected distinct --seeds, got %s" % " ".join(map(str, a.seeds)))
    a.timeout = int(a.timeout) if float(a.timeout).is_integer() else a.timeout
    a.extra = extra
    return a, extra


def main(argv=None):
    a, extra = parse_args(argv)
    try:
        configs = load_configs(a.configs) if a.configs else OrderedDict(DEFAULT_CONFIGS)
        if a.only:
            unknown = [n for n in a.only if n not in configs]
            if unknown:
                raise UsageError("expected --only names among %s, got %s" % (", ".join(configs), ", ".join(unknown)))
            configs = OrderedDict((n, configs[n]) for n in configs if n in a.only)
        for name, cfg in configs.items():
            expected_steps(cfg, extra)
    except UsageError as e:
        print("sweep: error: %s" % e, file=sys.stderr)
        return 2
    plan = make_plan(configs, a.seeds, a.order_seed)
    if a.dry_run:
        for i, (name, seed) in enumerate(plan, 1):
            args = run_args(configs[name], seed, a.data, extra)
            print("%2d. %s seed %d: %s" % (i, name, seed, " ".join(args)))
        return 0
    if not (os.path.isfile(a.binary) and os.access(a.binary, os.X_OK)):
        print("sweep: error: expected an executable --binary, got %s (build train_resnet50 or pass --binary)"
              % a.binary, file=sys.stderr)
        return 2
    if not a.no_nsys and shutil.which("nsys") is None:
        print("sweep: error: nsys (Nsight Systems CLI) is not on PATH; add it, or pass --no-nsys to use the "
              "run reports alone", file=sys.stderr)
        return 2
    if not a.no_figures or a.run_figures:
        require_matplotlib()
    os.makedirs(a.out, exist_ok=True)

    results = []
    started = time.monotonic()
    ran_any = False
    for order, (name, seed) in enumerate(plan, 1):
        saved = os.path.join(a.out, "runs", "%s_%d" % (name, seed), "result.json")
        if a.resume and os.path.exists(saved):
            with open(saved) as f:
                r = json.load(f, object_pairs_hook=OrderedDict)
            if r.get("status") == "ok":
                print("sweep: [%d/%d] %s seed %d: kept from an earlier run (--resume)" % (
                    order, len(plan), name, seed), file=sys.stderr)
                r["order"] = order
                results.append(r)
                continue
        # Every invocation runs at least one run, so repeated --resume calls always progress.
        if a.deadline and ran_any and time.monotonic() - started > a.deadline:
            print("sweep: --deadline of %d s reached before %s seed %d; rerun with --resume to "
                  "continue" % (a.deadline, name, seed), file=sys.stderr)
            return 4
        print("sweep: [%d/%d] %s seed %d" % (order, len(plan), name, seed), file=sys.stderr)
        r = execute_run(name, configs[name], seed, a, extra, order)
        ran_any = True
        with open(saved, "w") as f:
            json.dump(r, f, indent=2)
        results.append(r)
        if not r["aggregated"]:
            print("sweep: not aggregating %s seed %d: %s" % (name, seed, r["reason"]), file=sys.stderr)

    rows = aggregate(configs, a.seeds, results)
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump({"seeds": a.seeds, "order_seed": a.order_seed, "timeout_s": a.timeout, "no_nsys": a.no_nsys,
                   "configs": configs, "extra_args": extra, "runs": results, "table": rows}, f, indent=2)
        f.write("\n")
    write_csv(os.path.join(a.out, "sweep.csv"), rows)
    write_csv(os.path.join(a.out, "runs.csv"), run_rows(results))
    with open(os.path.join(a.out, "sweep.md"), "w") as f:
        f.write(render_markdown(rows, results, a.seeds, a))
    if not a.no_figures:
        draw_figures(rows, results, a.seeds, a)
    excluded = [r for r in results if not r["aggregated"]]
    print("sweep: %d of %d runs aggregated; table in %s" % (
        len(results) - len(excluded), len(results), os.path.join(a.out, "sweep.md")))
    return 1 if excluded else 0


if __name__ == "__main__":
    sys.exit(main())
