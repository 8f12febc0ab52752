#!/usr/bin/env python3
"""Read an Nsight Systems SQLite export of the ResNet-50 workload: tables, checks and the article's
figures.

usage: analyze.py EXPORT.sqlite --out DIR [--report run.json] [--untraced UNTRACED.json ...]
                  [--max-tracer-slowdown F] [--expected-steps M] [--check] [--no-figures]
       analyze.py RANK0.sqlite RANK1.sqlite ... --out DIR
                  [--report RANK0.json --report RANK1.json ...]
                  [--untraced U0.json --untraced U1.json ...] [--rank-out DIR0 --rank-out DIR1 ...]
                  [--max-tracer-slowdown F] [--expected-steps M] [--check] [--no-figures]
       analyze.py CAPTURE1.sqlite CAPTURE2.sqlite ... --repeats --out DIR
                  --report R1.json --report R2.json ...
                  [--untraced U1.json --untraced U2.json ...]
                  [--repeat-out DIR1 --repeat-out DIR2 ...]
                  [--repeats-json FILE] [--repeats-md FILE] [--max-tracer-slowdown F]
                  [--expected-steps M] [--check] [--no-figures]

Writes into DIR:
  summary.json         numbers and checks (nsys_analysis.capture.summary.compute_summary lists every
                       key)
  summary.md           (a tracer-bound capture: a warning paragraph first) capture cost, idle gaps,
                       host stalls, checks, phases, per-step input timing, GPU time per phase, the
                       epoch boundary (a window across an epoch's end), top kernels, kernel time by
                       family (scripts/kernel_families.py compares runs), memory operations, CUDA
                       API calls, other NVTX domains
  fig1_phases.png      total duration of each phase range, torch_step, capture_window and the epoch
                       boundary's ranges excluded
  fig2_top_kernels.png the twelve largest kernel groups by demangled name, with launch counts
  fig3_timeline.png    host ranges above kernel (and whole-graph) / copy / memset lanes, first step
                       to last device op
  fig5_batch_wait.png  time inside batch_wait per step
  fig6_gpu_phases.png  per step, the GPU time of the work launched in each phase, stacked (the
                       device-side counterpart of figure 1: backward's kernels, launched from
                       autograd's thread, count under backward)
(Figure 4 compares configurations; scripts/sweep.py draws it with
nsys_analysis.sweep.figures.plot_sweep().)

What the capture itself cost (summary.json's capture_cost, summary.md's "Capture cost";
nsys_analysis.capture.cost says how each figure is made): --untraced names the report of a run of
the same command without nsys (scripts/profile.sh makes one after each capture; repeatable: their
median counts). The summary then compares the traced and untraced images/s and host time per phase,
counts the CUDA runtime calls of each thread per step (a helper thread's also per unit of its work,
e.g. per gpu_decode batch of the decode stage), charges nsys's own PROFILER_OVERHEAD to threads and
phases, and estimates how much of the window's idle time the tracer explains; the check capture_cost
(present only with --untraced) fails when traced / untraced images/s < 1 - F (--max-tracer-slowdown,
default 0.10), and summary.md then opens with a paragraph saying the capture is tracer-bound: trust
the untraced figures for throughput and the capture for order and overlap.

Several exports (or any --rank-out) are the ranks of one data-parallel run, one nsys export per rank
(scripts/profile.sh --nproc N writes PREFIX.rank<r>.sqlite). A rank is the `.rank<r>` in its
export's file name, else its position on the command line; --report, when given, is given once per
export, in the same order (a report's dist.rank must match). Each rank gets what one export gets, in
DIR/rank<r>/ (or the i-th --rank-out), and DIR holds the comparison
(nsys_analysis.capture.ranks.compute_ranks() lists every key):
  ranks.json           per rank: NCCL kernels per step, exposed communication, data_load end
                       offsets; per step: the straggler and how long the others' all-reduces waited
                       for it; every rank's checks (rank<r>.<check>) and same_step_count
  ranks.md             those tables
  fig_ranks.png        data_load end and NCCL time per step and rank
--expected-steps applies to every rank; --check needs every check of every rank and same_step_count.
--untraced, when given, is given once per export too (each rank's untraced run).

--repeats: the exports are N captures of one configuration (scripts/profile.sh --repeat N writes
PREFIX.<k>.sqlite), each with its --report (required, in order). Each capture's summary (no
figures), with every --untraced report, goes into DIR/capture<k>/ (or the k-th --repeat-out); the
median capture by its report's images/s (the lower middle one of an even N) is analysed in full,
figures too, into DIR; and --repeats-json / --repeats-md (default DIR/repeats.json, DIR/repeats.md)
get the spread (min, median, max and each value) of the headline figures across the captures (traced
and untraced images/s, their ratio, no-activity %, batch_wait and h2d_submit, CUDA calls per step
per thread, profiler overhead, the idle the tracer explains) and each check's pass count
(nsys_analysis.capture.repeats). --check needs every check of every capture.

The export may come from any nsys 2023+ release: tables and columns are looked up by name, optional
tables may be absent, enum ids are read from the ENUM_* tables when present. Range text comes from
NVTX_EVENTS.text or, for registered strings, NVTX_EVENTS.textId -> StringIds. The training loop's
ranges live in NVTX's default domain (domainId 0 or NULL); ranges of other domains (the C++ loader's
`data_pipeline`: load_batch, load_sample, reuse_fence) are listed separately and never counted as
steps or phases.

A window across an epoch's end (train_resnet50 --epochs E --capture-at N) holds, between torch_step
ranges, the evaluation pass (eval, with eval_step ranges holding their own batch_wait, h2d_submit,
normalize and forward, and eval_reduce) and the checkpoint written (checkpoint). Only torch_step
ranges are steps and only the ranges inside them phases: eval's nested ranges are listed as
eval/NAME, its input copies are left out of copy_count, and the device work launched and the idle
gaps begun inside eval or checkpoint are charged to "eval" or "checkpoint". summary.json's
epoch_boundary and summary.md's "Epoch boundary" say what each cost against the median training
step, beside the report's training.epochs timing of them (nsys_analysis.capture.epochs).

Every export and --report is checked before any work (a missing file, a directory, an unreadable
file), and so is every output: --out (and each --rank-out) must be a directory or creatable, and no
file the analysis writes there may be a directory, FIFO or socket. No output may be an input, or
another output (two --rank-out or --repeat-out that are one directory, or one of them --out's own
files), and no export, --report or --untraced may be given twice (or one as the other). Outputs are
written atomically (a staging file beside each, renamed over it); a symlink is followed, a character
device such as /dev/null written in place. An export row no nsys writes (a time that is not an
integer, an end before its start, a byte count that is not one) is refused, naming the export and
its table, and so is one export of several processes' torch_step ranges (one export per rank); an
NVTX range with no name is counted as "(unnamed)". A report's capture.steps and batch_size must be
whole numbers >= 0 and its images/s a finite number (null: absent).

Exit status (nsys_analysis.common.exit_status): 0 done; 1 an output could not be written when its
turn came, or matplotlib is missing for the figures; 2 unusable input (missing file, a directory,
unreadable, not SQLite, no NVTX_EVENTS, bad report or --untraced report; with several exports also
two of one rank, or a report of another rank; with --repeats a report without images/s), an output
path that cannot be written, or a bad command line; 3 with --check when any check is false or not
evaluable; 130 Ctrl-C.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The analysis itself lives in the nsys_analysis package beside this script.
from nsys_analysis.capture.checks import failed_checks  # noqa: E402
from nsys_analysis.capture.export import AnalysisError  # noqa: E402
from nsys_analysis.capture.cost import DEFAULT_MAX_SLOWDOWN  # noqa: E402
from nsys_analysis.capture.pipeline import (  # noqa: E402
    REPEATS_FILES,
    analyze,
    analyze_ranks,
    analyze_repeats,
    capture_outputs,
    check_outputs,
    ranks_outputs,
)
from nsys_analysis.common.exit_status import (  # noqa: E402
    CHECKS_FAILED,
    FAILURE,
    OK,
    USAGE,
    exit_with,
)
from nsys_analysis.common.files import (  # noqa: E402
    OutputError,
    UsageError,
    check_input_file,
    check_inputs_distinct,
    check_output_file,
    check_outputs_apart,
)
from nsys_analysis.common.formatting import fmt  # noqa: E402
from nsys_analysis.common.plotting import require_matplotlib  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        # The first paragraph (one sentence, wrapped) on one line; the rest, as written, after.
        description=" ".join(__doc__.split("\n\n")[0].split("\n")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument(
        "export",
        nargs="+",
        help="nsys SQLite export (nsys export --type=sqlite); several: one per rank, in rank order",
    )
    p.add_argument(
        "--out",
        required=True,
        help="directory for summary.json, summary.md and figures (ranks.json, ranks.md and "
        "rank<r>/ for several exports)",
    )
    p.add_argument(
        "--report",
        action="append",
        help="run report: train_resnet50 --report JSON, or seed_workload.py's line; "
        "once per export",
    )
    p.add_argument(
        "--rank-out",
        action="append",
        metavar="DIR",
        help="where a rank's summary goes instead of OUT/rank<r> (once per export, in their "
        "order); makes even one export a ranks analysis",
    )
    p.add_argument(
        "--untraced",
        action="append",
        metavar="REPORT",
        help="run report of the same command run without nsys (repeatable; with several exports "
        "once per export, with --repeats any number, every capture gets all)",
    )
    p.add_argument(
        "--max-tracer-slowdown",
        type=float,
        default=DEFAULT_MAX_SLOWDOWN,
        metavar="F",
        help="capture_cost fails when traced / untraced images/s < 1 - F (default %g)"
        % DEFAULT_MAX_SLOWDOWN,
    )
    p.add_argument(
        "--repeats",
        action="store_true",
        help="the exports are captures of one configuration: each summarised, the median one in "
        "full, the spread in repeats.json / repeats.md",
    )
    p.add_argument(
        "--repeat-out",
        action="append",
        metavar="DIR",
        help="with --repeats, where a capture's summary goes instead of OUT/capture<k> "
        "(once per export)",
    )
    p.add_argument(
        "--repeats-json",
        metavar="FILE",
        help="with --repeats: the spread as JSON (default OUT/repeats.json)",
    )
    p.add_argument(
        "--repeats-md",
        metavar="FILE",
        help="with --repeats: the spread as Markdown (default OUT/repeats.md)",
    )
    p.add_argument(
        "--expected-steps",
        type=int,
        metavar="M",
        help="steps the capture must hold (default: the report's capture.steps)",
    )
    p.add_argument(
        "--check",
        "--strict",
        dest="check",
        action="store_true",
        help="exit 3 when any check fails or cannot be evaluated, naming it",
    )
    p.add_argument(
        "--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)"
    )
    a = p.parse_args(argv)
    if a.expected_steps is not None and a.expected_steps < 0:
        p.error("expected --expected-steps >= 0, got %d" % a.expected_steps)
    n = len(a.export)
    if a.report and len(a.report) != n and not a.repeats:  # --repeats says it its own way
        p.error("expected one --report per export (%d), got %d" % (n, len(a.report)))
    if a.rank_out and len(a.rank_out) != n:
        p.error("expected one --rank-out per export (%d), got %d" % (n, len(a.rank_out)))
    if not (0 <= a.max_tracer_slowdown < 1):  # NaN fails too
        p.error("expected --max-tracer-slowdown in [0, 1), got %g" % a.max_tracer_slowdown)
    if a.repeats:
        check_repeats_args(p, a, n)
    else:
        for flag, value in (
            ("--repeat-out", a.repeat_out),
            ("--repeats-json", a.repeats_json),
            ("--repeats-md", a.repeats_md),
        ):
            if value:
                p.error("%s needs --repeats" % flag)
        if (n > 1 or a.rank_out) and a.untraced and len(a.untraced) != n:
            p.error(
                "expected one --untraced per export (%d), got %d (or none)" % (n, len(a.untraced))
            )
    return a


def check_repeats_args(p, a, n):
    """--repeats' own rules; p.error() (exit 2) naming the flag."""
    if a.rank_out:
        p.error(
            "--rank-out conflicts with --repeats (the exports are captures of one process, "
            "not ranks)"
        )
    if not a.report or len(a.report) != n:
        p.error(
            "--repeats needs one --report per export (%d), got %d: the median capture is chosen "
            "by their images/s" % (n, len(a.report or ()))
        )
    if a.repeat_out and len(a.repeat_out) != n:
        p.error("expected one --repeat-out per export (%d), got %d" % (n, len(a.repeat_out)))


def check_paths(a, ranks_mode):
    """Every input readable and every output writable, before any work; raises UsageError naming the
    argument. (Each rank's own directory is checked by analyze_ranks(), which knows the ranks, and
    each capture's of --repeats by analyze_repeats().)"""
    for path in a.export:
        check_input_file("export", path, "an nsys SQLite export file (nsys export --type=sqlite)")
    for path in a.report or ():
        check_input_file("--report", path, "a run report file", streams=True)
    for path in a.untraced or ():
        check_input_file("--untraced", path, "an untraced run's report file", streams=True)
    figures = not a.no_figures
    names = ranks_outputs(figures) if ranks_mode else capture_outputs(figures)
    check_outputs("--out", a.out, names)
    inputs = (
        [("export", p) for p in a.export]
        + [("--report", p) for p in a.report or ()]
        + [("--untraced", p) for p in a.untraced or ()]
    )
    check_inputs_distinct([("export", p) for p in a.export])
    check_inputs_distinct(inputs[len(a.export) :])
    outputs = [("--out", os.path.join(a.out, name)) for name in names]
    if a.repeats:
        outputs += [("--repeats-json", a.repeats_json), ("--repeats-md", a.repeats_md)]
    check_outputs_apart(outputs, inputs)
    if a.repeats:
        for flag, path, name in (
            ("--repeats-json", a.repeats_json, REPEATS_FILES[0]),
            ("--repeats-md", a.repeats_md, REPEATS_FILES[1]),
        ):
            check_output_file(
                flag if path else "--out", path or os.path.join(a.out, name), create_dirs=True
            )


def run(a, ranks_mode):
    """The analysis: (summaries, the summary, ranks dict or repeats' checks whose checks decide,
    each summary's directory)."""
    figures, slowdown = not a.no_figures, a.max_tracer_slowdown
    if a.repeats:
        summaries, r = analyze_repeats(
            a.export,
            a.out,
            a.report,
            a.untraced or (),
            a.repeat_out,
            a.repeats_json,
            a.repeats_md,
            a.expected_steps,
            figures,
            slowdown,
        )
        dirs = r["analysis_dirs"]
        checks, details = {}, {}
        for k, s in enumerate(summaries, 1):
            for name, value in s["checks"].items():
                checks["capture%d.%s" % (k, name)] = value
                details["capture%d.%s" % (k, name)] = s["check_details"][name]
        return summaries, {"checks": checks, "check_details": details, "repeats": r}, dirs
    if not ranks_mode:
        s = analyze(
            a.export[0],
            a.out,
            a.report[0] if a.report else None,
            a.expected_steps,
            figures=figures,
            untraced_paths=a.untraced or (),
            max_slowdown=slowdown,
        )
        return [s], s, [a.out]
    summaries, s = analyze_ranks(
        a.export,
        a.out,
        a.report,
        a.expected_steps,
        figures=figures,
        rank_dirs=a.rank_out,
        untraced_paths=a.untraced,
        max_slowdown=slowdown,
    )
    return summaries, s, a.rank_out or [os.path.join(a.out, "rank%d" % r) for r in s["ranks"]]


def cost_line(s):
    """The capture-cost line of one summary on stdout, None without untraced runs."""
    t = s["capture_cost"]["throughput"]
    if not t["untraced_runs"]:
        return None
    bound = s["capture_cost"]["tracer_bound"]
    return "  capture cost: traced %s images/s, untraced %s (%s x)%s" % (
        fmt(t["traced_images_per_s"], 1),
        fmt(t["untraced_images_per_s"], 1),
        fmt(t["traced_over_untraced"]),
        ": TRACER-BOUND, trust the untraced figures for throughput" if bound else "",
    )


def report(a, ranks_mode, summaries, s, rank_dirs):
    """The lines on stdout, and the checks that did not pass on stderr; returns the exit status."""
    for path, rs, out in zip(a.export, summaries, rank_dirs):
        print(
            "%s: %d steps, window %s ms, %s%% no device activity, %s H2D copies -> %s"
            % (
                path,
                rs["steps"],
                fmt(rs["capture_window_ms"]),
                fmt(rs["no_activity_pct"], 2),
                fmt(rs["h2d_copies"]),
                out,
            )
        )
        if cost_line(rs):
            print(cost_line(rs))
    if a.repeats:
        r = s["repeats"]
        print(
            "repeats: %d captures, the median capture %d (%s) analysed in full -> %s; spread in %s"
            % (
                r["captures"],
                r["median_capture"],
                r["exports"][r["median_capture"] - 1],
                a.out,
                a.repeats_md or os.path.join(a.out, REPEATS_FILES[1]),
            )
        )
    if ranks_mode:
        print(
            "ranks %s: NCCL %s ms, exposed %s%% of the window; a straggler in %d of %d steps -> %s"
            % (
                ", ".join(map(str, s["ranks"])),
                " / ".join(fmt(p["nccl_ms"]) for p in s["per_rank"]),
                " / ".join(fmt(p["exposed_comm_pct"], 2) for p in s["per_rank"]),
                sum(1 for st in s["stragglers"] if st["straggler"] is not None),
                s["steps_compared"],
                a.out,
            )
        )
    fails = failed_checks(s)
    for name, detail in fails:
        print(
            "check %s %s: %s"
            % (name, "not evaluable" if s["checks"][name] is None else "FAILED", detail),
            file=sys.stderr,
        )
    if a.check and fails:
        print(
            "error: %d check(s) did not pass: %s" % (len(fails), ", ".join(n for n, _ in fails)),
            file=sys.stderr,
        )
        return CHECKS_FAILED
    return OK


def main(argv=None):
    a = parse_args(argv)
    ranks_mode = not a.repeats and (len(a.export) > 1 or bool(a.rank_out))
    try:
        check_paths(a, ranks_mode)
        if not a.no_figures:
            require_matplotlib()
        summaries, s, rank_dirs = run(a, ranks_mode)
    except (AnalysisError, UsageError) as e:
        print("error: %s" % e, file=sys.stderr)
        return USAGE
    except OutputError as e:
        print("error: %s" % e, file=sys.stderr)
        return FAILURE
    return report(a, ranks_mode, summaries, s, rank_dirs)


if __name__ == "__main__":
    exit_with(main, "analyze.py")
