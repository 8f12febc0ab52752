"""One capture end to end: load the export, summarise, cross-check, write summary.json, summary.md
and the figures (analyze()); several ranks' captures of one run, each so, then compared
(analyze_ranks()). Outputs are written by common.files' rules; check_outputs() checks an output
directory before any work."""

import json
import os
from typing import Any, Callable

from ..common.files import (
    check_output_dir,
    check_output_file,
    check_outputs_apart,
    make_dirs,
    remove_stale,
    write_text,
)
from .checks import crosscheck_stats
from .cost import DEFAULT_MAX_SLOWDOWN
from .export import AnalysisError, load_export, open_export
from .figures import (
    plot_batch_wait,
    plot_gpu_phases,
    plot_phase_totals,
    plot_ranks,
    plot_timeline,
    plot_top_kernels,
)
from .markdown import render_markdown, render_ranks_markdown, render_repeats_markdown
from .ranks import compute_ranks, rank_comm, rank_label
from .records import Export
from .repeats import compute_repeats, median_capture
from .report import load_report
from .summary import compute_summary

# What one capture's analysis writes into its directory: the tables, then (figures) each figure and
# how it is drawn from the summary s and the export ex.
SUMMARY_FILES = ("summary.json", "summary.md")
CAPTURE_FIGURES: tuple[tuple[str, Callable[[dict[str, Any], Export, str], str]], ...] = (
    ("fig1_phases.png", lambda s, ex, path: plot_phase_totals(s, path)),
    ("fig2_top_kernels.png", lambda s, ex, path: plot_top_kernels(s, path)),
    ("fig3_timeline.png", plot_timeline),
    ("fig5_batch_wait.png", lambda s, ex, path: plot_batch_wait(s, path)),
    ("fig6_gpu_phases.png", lambda s, ex, path: plot_gpu_phases(s, path)),
)
# What the comparison of several ranks writes into its directory.
RANKS_FILES = ("ranks.json", "ranks.md")
RANKS_FIGURE = "fig_ranks.png"


def capture_outputs(figures=True):
    """The names of the files analyze() writes into its directory."""
    return SUMMARY_FILES + (tuple(name for name, _ in CAPTURE_FIGURES) if figures else ())


def ranks_outputs(figures=True):
    """The names of the files analyze_ranks() writes into its own directory (each rank's go in
    theirs)."""
    return RANKS_FILES + ((RANKS_FIGURE,) if figures else ())


def check_outputs(flag, out_dir, names):
    """Before any work: raises files.UsageError naming flag unless out_dir can be made and every
    file of names written in it."""
    check_output_dir(flag, out_dir)
    for name in names:
        check_output_file(flag, os.path.join(out_dir, name), create_dirs=True)


def check_apart(groups, files, inputs):
    """Before any work: raises files.UsageError unless no output is an input or another output.
    groups: (flag, directory, names) of the files written in a directory; files: (flag, path) of
    single files; inputs: (what, path) pairs. Two ranks' or captures' directories that are one
    (given twice, or one of them the comparison's own) would otherwise keep the last one written."""
    outputs = [(flag, os.path.join(d, name)) for flag, d, names in groups for name in names]
    check_outputs_apart(outputs + list(files), inputs)


def _inputs(export_paths, report_paths=(), untraced_paths=()):
    return (
        [("export", p) for p in export_paths]
        + [("--report", p) for p in report_paths or () if p]
        + [("--untraced", p) for p in untraced_paths or () if p]
    )


def _write_json_and_markdown(out_dir, name, obj, markdown):
    """out_dir/<name>.json (obj, indented) and out_dir/<name>.md (the markdown text)."""
    make_dirs(out_dir)
    write_text(os.path.join(out_dir, name + ".json"), json.dumps(obj, indent=2) + "\n")
    write_text(os.path.join(out_dir, name + ".md"), markdown)


def write_outputs(s, ex, out_dir, figures=True):
    """Write summary.json, summary.md and (unless figures is False) figures 1, 2, 3, 5 and 6 into
    out_dir (figures False: an earlier analysis's figures there are removed); returns the figures'
    paths. Raises files.OutputError for a file that cannot be written."""
    _write_json_and_markdown(out_dir, "summary", s, render_markdown(s))
    if not figures:
        # An earlier analysis's figures beside this summary would be read as this capture's.
        for name, _ in CAPTURE_FIGURES:
            path = os.path.join(out_dir, name)
            if os.path.isfile(path) and not os.path.islink(path):
                remove_stale(path)
        return []
    return [plot(s, ex, os.path.join(out_dir, name)) for name, plot in CAPTURE_FIGURES]


def load_untraced(paths):
    """[(path, report)] of the untraced runs' reports (analyze.py --untraced); AnalysisError for one
    that cannot be read."""
    return [(path, load_report(path)) for path in paths or ()]


def analyze(
    export_path,
    out_dir,
    report_path=None,
    expected_steps=None,
    figures=True,
    untraced_paths=(),
    max_slowdown=DEFAULT_MAX_SLOWDOWN,
):
    """Load, compute and write; returns the summary dict. untraced_paths: the reports of untraced
    runs of the same command, for capture_cost."""
    ex = load_export(export_path)
    report = load_report(report_path) if report_path else None
    untraced = load_untraced(untraced_paths)
    return _analyze_loaded(
        ex,
        report,
        export_path,
        out_dir,
        report_path,
        expected_steps,
        figures,
        untraced,
        max_slowdown,
    )


def _analyze_loaded(
    ex,
    report,
    export_path,
    out_dir,
    report_path,
    expected_steps,
    figures,
    untraced=(),
    max_slowdown=DEFAULT_MAX_SLOWDOWN,
    also=None,
    also_figures=True,
):
    """analyze() from the export and reports already read. also: a second directory that gets the
    same outputs, with figures unless also_figures is False (analyze_repeats()'s median capture);
    None for none.
    """
    s = compute_summary(ex, report, expected_steps, untraced=untraced, max_slowdown=max_slowdown)
    if report_path:
        s["report_path"] = report_path
    base = export_path[:-7] if export_path.endswith(".sqlite") else export_path
    check = crosscheck_stats(ex, base)
    if check:
        s["stats_crosscheck"] = check
    write_outputs(s, ex, out_dir, figures)
    if also is not None:
        write_outputs(s, ex, also, also_figures)
    return s


def analyze_ranks(
    export_paths,
    out_dir,
    report_paths=None,
    expected_steps=None,
    figures=True,
    rank_dirs=None,
    untraced_paths=None,
    max_slowdown=DEFAULT_MAX_SLOWDOWN,
):
    """Several ranks' exports of one data-parallel run. Each rank is analysed as analyze() does,
    into rank_dirs[i] (default out_dir/rank<r>); then ranks.json, ranks.md and (unless figures is
    False) fig_ranks.png go into out_dir. report_paths, rank_dirs and untraced_paths (each rank's
    untraced run's report, for its capture_cost), when given, follow export_paths. A rank is
    the `.rank<r>` in its export's name, else its position (ranks.rank_label()). Returns (summaries,
    ranks dict); raises AnalysisError for an unusable input or two exports of one rank,
    files.UsageError (naming --rank-out, or --out for the default directories) for a rank's
    directory that cannot be written, both before any output is written."""
    for path in export_paths:  # every export usable before any output is written
        open_export(path).close()
    report_paths = report_paths or [None] * len(export_paths)
    reports = [load_report(p) if p else None for p in report_paths]
    untraced = (
        [load_untraced([p]) for p in untraced_paths] if untraced_paths else [[]] * len(export_paths)
    )
    labels = [rank_label(p, rep, i) for i, (p, rep) in enumerate(zip(export_paths, reports))]
    if len(set(labels)) != len(labels):
        raise AnalysisError(
            "expected one export per rank, got ranks %s (from %s)"
            % (", ".join(map(str, labels)), ", ".join(export_paths))
        )
    flag = "--rank-out" if rank_dirs else "--out"
    rank_dirs = rank_dirs or [os.path.join(out_dir, "rank%d" % r) for r in labels]
    for rank_dir in rank_dirs:
        check_outputs(flag, rank_dir, capture_outputs(figures))
    check_apart(
        [("--out", out_dir, ranks_outputs(figures))]
        + [(flag, d, capture_outputs(figures)) for d in rank_dirs],
        [],
        _inputs(export_paths, report_paths, untraced_paths),
    )
    summaries, comms = [], []
    for label, path, report, report_path, rank_dir, rank_untraced in zip(
        labels, export_paths, reports, report_paths, rank_dirs, untraced
    ):
        # One export in memory at a time: each rank keeps only its RankComm for the comparison.
        ex = load_export(path)
        summaries.append(
            _analyze_loaded(
                ex,
                report,
                path,
                rank_dir,
                report_path,
                expected_steps,
                figures,
                rank_untraced,
                max_slowdown,
            )
        )
        comms.append(rank_comm(label, ex))
        del ex
    r = compute_ranks(comms, summaries, reports)
    r["reports"] = list(report_paths)
    r["analysis_dirs"] = [os.path.relpath(d, out_dir) for d in rank_dirs]
    _write_json_and_markdown(out_dir, "ranks", r, render_ranks_markdown(r))
    if figures:
        plot_ranks(r, os.path.join(out_dir, RANKS_FIGURE))
    return summaries, r


# What analyze_repeats() writes besides each capture's directory and the median capture's.
REPEATS_FILES = ("repeats.json", "repeats.md")


def analyze_repeats(
    export_paths,
    out_dir,
    report_paths,
    untraced_paths=(),
    repeat_dirs=None,
    repeats_json=None,
    repeats_md=None,
    expected_steps=None,
    figures=True,
    max_slowdown=DEFAULT_MAX_SLOWDOWN,
):
    """Several captures of one configuration (scripts/profile.sh --repeat N). Each capture is
    analysed, its summary only (every untraced run's report given to each), into repeat_dirs[i]
    (default out_dir/capture<k>, k from 1); the median capture by its report's images/s
    (repeats.median_capture()) also into out_dir in full (figures unless figures is False); then
    repeats_json and repeats_md (default out_dir/repeats.json and .md) get the spread of the
    headline figures (repeats.compute_repeats()). report_paths: one per export, in order. Returns
    (summaries, repeats dict). Raises AnalysisError for an unusable input or a report without
    images/s, files.UsageError (naming --repeat-out, or --out for the default directories) for a
    capture's directory that cannot be written, both before any output.
    """
    for path in export_paths:
        open_export(path).close()
    reports = [load_report(p) for p in report_paths]
    untraced = load_untraced(untraced_paths)
    median = median_capture(reports)
    if median is None:
        bad = next(p for p, rep in zip(report_paths, reports) if median_capture([rep]) is None)
        raise AnalysisError(
            "report %s gives no capture.images_per_s: the median capture is chosen by it" % bad
        )
    flag = "--repeat-out" if repeat_dirs else "--out"

    def _in(name):
        return os.path.join(out_dir, name)

    repeat_dirs = repeat_dirs or [
        os.path.join(out_dir, "capture%d" % (k + 1)) for k in range(len(export_paths))
    ]
    for d in repeat_dirs:
        check_outputs(flag, d, capture_outputs(figures=False))
    check_apart(
        [("--out", out_dir, capture_outputs(figures))]
        + [(flag, d, capture_outputs(figures=False)) for d in repeat_dirs],
        [
            ("--repeats-json" if repeats_json else "--out", repeats_json or _in(REPEATS_FILES[0])),
            ("--repeats-md" if repeats_md else "--out", repeats_md or _in(REPEATS_FILES[1])),
        ],
        _inputs(export_paths, report_paths, untraced_paths),
    )
    summaries = []
    for k, (path, report, report_path, d) in enumerate(
        zip(export_paths, reports, report_paths, repeat_dirs)
    ):
        ex = load_export(path)  # one export in memory at a time
        summaries.append(
            _analyze_loaded(
                ex,
                report,
                path,
                d,
                report_path,
                expected_steps,
                False,
                untraced,
                max_slowdown,
                also=out_dir if k == median else None,
                also_figures=figures,
            )
        )
        del ex
    r = compute_repeats(
        summaries,
        export_paths,
        report_paths,
        untraced_paths,
        [rep for _, rep in untraced],
        repeat_dirs,
        median,
        out_dir,
    )
    for path, text in (
        (repeats_json or os.path.join(out_dir, REPEATS_FILES[0]), json.dumps(r, indent=2) + "\n"),
        (repeats_md or os.path.join(out_dir, REPEATS_FILES[1]), render_repeats_markdown(r)),
    ):
        make_dirs(os.path.dirname(path) or ".")
        write_text(path, text)
    return summaries, r
