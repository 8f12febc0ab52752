"""One capture end to end: load the export, summarise, cross-check, write summary.json, summary.md and
the figures."""

import json
import os

from .checks import crosscheck_stats
from .export import load_export
from .figures import plot_batch_wait, plot_phase_totals, plot_timeline, plot_top_kernels
from .markdown import render_markdown
from .report import load_report
from .summary import compute_summary


def write_outputs(s, ex, out_dir, figures=True):
    """Write summary.json, summary.md and (unless figures is False) figures 1, 2, 3 and 5 into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(render_markdown(s))
    paths = []
    if figures:
        paths.append(plot_phase_totals(s, os.path.join(out_dir, "fig1_phases.png")))
        paths.append(plot_top_kernels(s, os.path.join(out_dir, "fig2_top_kernels.png")))
        paths.append(plot_timeline(s, ex, os.path.join(out_dir, "fig3_timeline.png")))
        paths.append(plot_batch_wait(s, os.path.join(out_dir, "fig5_batch_wait.png")))
    return paths


def analyze(export_path, out_dir, report_path=None, expected_steps=None, figures=True):
    """Load, compute and write; returns the summary dict."""
    ex = load_export(export_path)
    report = load_report(report_path) if report_path else None
    s = compute_summary(ex, report, expected_steps)
    if report_path:
        s["report_path"] = report_path
    base = export_path[:-7] if export_path.endswith(".sqlite") else export_path
    check = crosscheck_stats(ex, base)
    if check:
        s["stats_crosscheck"] = check
    write_outputs(s, ex, out_dir, figures)
    return s
