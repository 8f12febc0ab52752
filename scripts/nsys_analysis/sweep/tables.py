"""The sweep's outputs: one row per configuration (each seed's value and the mean of the aggregated
runs), sweep.md, sweep.csv, runs.csv, sweep.json and figures 4 and 5 (common.files' rules: each file
written atomically, a symlink followed, /dev/null written in place)."""

import csv
import functools
import json
import os
from collections import OrderedDict

from ..common.files import atomic_output, check_output_dir, check_output_file, make_dirs, write_text
from ..common.formatting import fmt, table
from ..capture.cost import DEFAULT_MAX_SLOWDOWN
from .figures import plot_sweep, plot_sweep_batch_wait
from .plan import changes_from_baseline

# What the sweep writes at the top of its --out, then its figures.
OUTPUT_FILES = ("sweep.json", "sweep.csv", "runs.csv", "sweep.md")
FIGURE_FILES = ("fig4_sweep.png", "fig5_batch_wait.png")

# Numbers in tables: the shared formatter, a dash when missing, integers written like floats.
number = functools.partial(fmt, missing="–", ints_exact=False)

# The metrics whose mean over the aggregated runs the table gives.
_METRICS = (
    "images_per_s",
    "no_activity_pct",
    "batch_wait_total_ms",
    "h2d_submit_total_ms",
    "untraced_images_per_s",
    "traced_over_untraced",
)


def _mean(values):
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def aggregate(configs, seeds, results):
    """One row per configuration that ran, in configs' order: sweep.csv's columns (config, changes,
    steps, runs_aggregated, runs_excluded, retried, <metric>_<seed> and <metric>_mean,
    tracer_bound_<seed>, tracer_bound_runs (the aggregated runs whose capture was tracer-bound),
    notes). results: RunOutcomes; only aggregated runs give values."""
    rows = []
    for name, cfg in configs.items():
        runs = [r for r in results if r.config == name]
        if not runs:
            continue
        by_seed = {r.seed: r for r in runs}
        good = [r for r in runs if r.aggregated]
        row = OrderedDict(
            [
                ("config", name),
                ("changes", changes_from_baseline(cfg)),
                ("steps", cfg["steps"]),
                ("runs_aggregated", len(good)),
                ("runs_excluded", len(runs) - len(good)),
                ("retried", sum(1 for r in runs if len(r.attempts) > 1)),
            ]
        )
        for metric in _METRICS + ("longest_wait_ms", "longest_wait_step"):
            for seed in seeds:
                r = by_seed.get(seed)
                row["%s_%d" % (metric, seed)] = (
                    r.metrics.get(metric) if r and r.aggregated else None
                )
            if metric in _METRICS:
                row["%s_mean" % metric] = _mean(r.metrics.get(metric) for r in good)
        for seed in seeds:
            r = by_seed.get(seed)
            row["tracer_bound_%d" % seed] = (
                r.metrics.get("tracer_bound") if r and r.aggregated else None
            )
        row["tracer_bound_runs"] = sum(1 for r in good if r.metrics.get("tracer_bound"))
        row["notes"] = "; ".join(
            _run_note(r) for r in sorted(runs, key=lambda r: r.seed) if _run_note(r)
        )
        rows.append(row)
    return rows


def _yes_no(value):
    """A tracer-bound cell: yes, no, or a dash when unknown."""
    return "–" if value is None else "yes" if value else "no"


def _run_note(r):
    notes = []
    if r.timeouts and r.status != "timeout":
        notes.append("seed %d: timed out once, retry succeeded" % r.seed)
    if not r.aggregated:
        notes.append("seed %d excluded: %s" % (r.seed, r.reason))
    elif r.metrics.get("tracer_bound"):
        notes.append(
            "seed %d: tracer-bound (traced %.2fx untraced), read the untraced images/s"
            % (r.seed, r.metrics["traced_over_untraced"])
        )
    return "; ".join(notes)


def render_markdown(rows, results, settings):
    """sweep.md: the configuration table, the runs in execution order, the excluded runs."""
    seeds = settings.seeds
    pair = " / ".join(str(s) for s in seeds)
    out = ["# Input-pipeline sweep", ""]
    out.append(
        "%d runs (%d configurations x seeds %s) in a shuffled order (order seed %d), %s; per-run "
        "time limit %d s with one retry."
        % (
            len(results),
            len(rows),
            ", ".join(str(s) for s in seeds),
            settings.order_seed,
            "run reports only (--no-nsys)"
            if settings.no_nsys
            else "each captured by scripts/profile.sh",
            settings.timeout,
        )
    )
    if settings.extra:
        out += [
            "",
            "Arguments added to every run (they override the configurations' flags): `%s`."
            % " ".join(settings.extra),
        ]
    out += [
        "",
        "Each cell: seed %s, then the mean of the aggregated runs. Longest wait: ms @ step index "
        "(0 = first captured step)." % pair,
        "",
    ]
    headers = [
        "config",
        "change",
        "images/s",
        "no-activity %",
        "batch_wait total ms",
        "h2d_submit total ms",
        "longest wait",
        "untraced images/s",
        "traced / untraced",
        "tracer-bound",
        "notes",
    ]
    untraced = settings.untraced and not settings.no_nsys
    if untraced:
        out += [
            "Each capture is followed by an untraced run of the same command (no nsys): its "
            "images/s are the throughput to compare; tracer-bound: the capture ran below %.2fx of "
            "it (the tracing, not the input pipeline, set its pace)." % (1 - DEFAULT_MAX_SLOWDOWN),
            "",
        ]
    cells = []
    for row in rows:

        def cell(metric, digits=1):
            vals = " / ".join(number(row["%s_%d" % (metric, s)], digits) for s in seeds)
            return "%s (mean %s)" % (vals, number(row["%s_mean" % metric], digits))

        longest = " / ".join(
            "–"
            if row["longest_wait_ms_%d" % s] is None
            else "%s @ %s"
            % (
                number(row["longest_wait_ms_%d" % s], 1),
                "?" if row["longest_wait_step_%d" % s] is None else row["longest_wait_step_%d" % s],
            )
            for s in seeds
        )
        bound = " / ".join(_yes_no(row["tracer_bound_%d" % s]) for s in seeds)
        cells.append(
            [
                row["config"],
                row["changes"],
                cell("images_per_s"),
                cell("no_activity_pct", 2) if not settings.no_nsys else "– (no capture)",
                cell("batch_wait_total_ms"),
                cell("h2d_submit_total_ms"),
                longest,
                cell("untraced_images_per_s") if untraced else "–",
                cell("traced_over_untraced", 3) if untraced else "–",
                (
                    "%s (%d of %d)" % (bound, row["tracer_bound_runs"], row["runs_aggregated"])
                    if untraced
                    else "–"
                ),
                row["notes"] or "",
            ]
        )
    out.append(table(headers, cells, ["l", "l", "r", "r", "r", "r", "r", "r", "r", "l", "l"]))
    out += ["", "## Runs in execution order", ""]
    out.append(
        table(
            ["#", "run", "status", "attempts", "aggregated", "images/s", "reason"],
            [
                (
                    r.order,
                    r.name,
                    r.status,
                    ", ".join("%s %.1fs" % (at.status, at.seconds) for at in r.attempts),
                    "yes" if r.aggregated else "NO",
                    number(r.metrics.get("images_per_s"), 1),
                    r.reason or "",
                )
                for r in sorted(results, key=lambda r: r.order)
            ],
            ["r", "l", "l", "l", "l", "r", "l"],
        )
    )
    excluded = [r for r in results if not r.aggregated]
    if excluded:
        out += ["", "## Excluded runs", ""]
        out += ["- %s seed %d: %s" % (r.config, r.seed, r.reason) for r in excluded]
    return "\n".join(out) + "\n"


def write_csv(path, rows):
    """rows (dicts sharing their keys) as CSV: None as an empty cell, floats rounded to 6 decimals.
    No rows: an empty file."""
    if not rows:
        write_text(path, "")
        return
    with atomic_output(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        for row in rows:
            w.writerow(
                {
                    k: ("" if v is None else (round(v, 6) if isinstance(v, float) else v))
                    for k, v in row.items()
                }
            )


def run_rows(results):
    """runs.csv's rows: one per run, in execution order."""
    rows = []
    for r in sorted(results, key=lambda r: r.order):
        m = r.metrics
        rows.append(
            OrderedDict(
                [
                    ("order", r.order),
                    ("config", r.config),
                    ("seed", r.seed),
                    ("status", r.status),
                    ("attempts", len(r.attempts)),
                    ("timeouts", r.timeouts),
                    ("aggregated", r.aggregated),
                    ("reason", r.reason or ""),
                    ("images_per_s", m.get("images_per_s")),
                    ("no_activity_pct", m.get("no_activity_pct")),
                    ("batch_wait_total_ms", m.get("batch_wait_total_ms")),
                    ("h2d_submit_total_ms", m.get("h2d_submit_total_ms")),
                    ("longest_wait_ms", m.get("longest_wait_ms")),
                    ("longest_wait_step", m.get("longest_wait_step")),
                    ("untraced_images_per_s", m.get("untraced_images_per_s")),
                    ("traced_over_untraced", m.get("traced_over_untraced")),
                    ("tracer_bound", m.get("tracer_bound")),
                    ("seconds", sum(at.seconds for at in r.attempts)),
                ]
            )
        )
    return rows


def draw_figures(rows, results, settings):
    """Figure 4 (every configuration) and figure 5 (settings.fig5_left / fig5_right) into
    settings.out; returns their paths. Needs matplotlib."""
    fig4_rows = [
        {
            "config": row["config"],
            "runs": [
                {
                    "seed": r.seed,
                    "images_per_s": r.metrics.get("images_per_s"),
                    "no_activity_pct": r.metrics.get("no_activity_pct"),
                }
                for r in results
                if r.config == row["config"] and r.aggregated
            ],
        }
        for row in rows
    ]
    paths = [
        plot_sweep(
            fig4_rows, os.path.join(settings.out, FIGURE_FILES[0]), has_capture=not settings.no_nsys
        )
    ]

    def series(names):
        out = []
        for name in names:
            for seed in settings.seeds:
                for r in results:
                    if (
                        r.config == name
                        and r.seed == seed
                        and r.aggregated
                        and r.metrics.get("batch_wait_ms")
                    ):
                        out.append(("%s seed %d" % (name, seed), r.metrics["batch_wait_ms"]))
        return out

    titles = (
        "Reset vs reused iterator: %s" % " vs ".join(settings.fig5_left),
        "Baseline runs: %s" % ", ".join(settings.fig5_right),
    )
    paths.append(
        plot_sweep_batch_wait(
            series(settings.fig5_left),
            series(settings.fig5_right),
            os.path.join(settings.out, FIGURE_FILES[1]),
            titles,
        )
    )
    return paths


def output_paths(settings, figures=True):
    """The files write_outputs() writes into settings.out."""
    return [
        os.path.join(settings.out, name)
        for name in OUTPUT_FILES + (FIGURE_FILES if figures else ())
    ]


def check_outputs(settings, figures=True):
    """Before any run: raises files.UsageError naming --out unless settings.out can be made and each
    file write_outputs() writes there can be written."""
    check_output_dir("--out", settings.out)
    for path in output_paths(settings, figures):
        check_output_file("--out", path, create_dirs=True)


def write_outputs(configs, results, settings, figures=True):
    """sweep.json, sweep.csv, runs.csv, sweep.md and (figures) figures 4 and 5 into settings.out;
    returns the configuration rows. Raises files.OutputError for a file that cannot be written."""
    rows = aggregate(configs, settings.seeds, results)
    make_dirs(settings.out)
    doc = {
        "seeds": settings.seeds,
        "order_seed": settings.order_seed,
        "timeout_s": settings.timeout,
        "no_nsys": settings.no_nsys,
        "configs": configs,
        "extra_args": settings.extra,
        "runs": [r.to_json() for r in results],
        "table": rows,
    }
    write_text(os.path.join(settings.out, "sweep.json"), json.dumps(doc, indent=2) + "\n")
    write_csv(os.path.join(settings.out, "sweep.csv"), rows)
    write_csv(os.path.join(settings.out, "runs.csv"), run_rows(results))
    write_text(os.path.join(settings.out, "sweep.md"), render_markdown(rows, results, settings))
    if figures:
        draw_figures(rows, results, settings)
    return rows
