#!/usr/bin/env python3
"""Read an Nsight Systems SQLite export of the ResNet-50 workload: tables, checks and the article's figures.

usage: analyze.py EXPORT.sqlite --out DIR [--report run.json] [--expected-steps M] [--check]
                  [--no-figures]
       analyze.py RANK0.sqlite RANK1.sqlite ... --out DIR [--report RANK0.json --report RANK1.json ...]
                  [--rank-out DIR0 --rank-out DIR1 ...] [--expected-steps M] [--check] [--no-figures]

Writes into DIR:
  summary.json         numbers and checks (nsys_analysis.capture.summary.compute_summary lists every key)
  summary.md           idle gaps, host stalls, checks, phases, per-step input timing, GPU time per phase,
                       top kernels, kernel time by family (scripts/kernel_families.py compares runs),
                       memory operations, CUDA API calls, other NVTX domains
  fig1_phases.png      total duration of each phase range, torch_step and capture_window excluded
  fig2_top_kernels.png the twelve largest kernel groups by demangled name, with launch counts
  fig3_timeline.png    host ranges above kernel (and whole-graph) / copy / memset lanes, first step to
                       last device op
  fig5_batch_wait.png  time inside batch_wait per step
  fig6_gpu_phases.png  per step, the GPU time of the work launched in each phase, stacked (the device-side
                       counterpart of figure 1: backward's kernels, launched from autograd's thread, count
                       under backward)
(Figure 4 compares configurations; scripts/sweep.py draws it with nsys_analysis.sweep.figures.plot_sweep().)

Several exports (or any --rank-out) are the ranks of one data-parallel run, one nsys export per rank
(scripts/profile.sh --nproc N writes PREFIX.rank<r>.sqlite). A rank is the `.rank<r>` in its export's
file name, else its position on the command line; --report, when given, is given once per export, in
the same order (a report's dist.rank must match). Each rank gets what one export gets, in DIR/rank<r>/
(or the i-th --rank-out), and DIR holds the comparison (nsys_analysis.capture.ranks.compute_ranks() lists
every key):
  ranks.json           per rank: NCCL kernels per step, exposed communication, data_load end offsets;
                       per step: the straggler and how long the others' all-reduces waited for it;
                       every rank's checks (rank<r>.<check>) and same_step_count
  ranks.md             those tables
  fig_ranks.png        data_load end and NCCL time per step and rank
--expected-steps applies to every rank; --check needs every check of every rank and same_step_count.

The export may come from any nsys 2023+ release: tables and columns are looked up by name, optional
tables may be absent, enum ids are read from the ENUM_* tables when present. Range text comes from
NVTX_EVENTS.text or, for registered strings, NVTX_EVENTS.textId -> StringIds. The training loop's ranges
live in NVTX's default domain (domainId 0 or NULL); ranges of other domains (the C++ loader's
`data_pipeline`: load_batch, load_sample, reuse_fence) are listed separately and never counted as
steps or phases.

Every export and --report is checked before any work (a missing file, a directory, an unreadable file),
and so is every output: --out (and each --rank-out) must be a directory or creatable, and no file the
analysis writes there may be a directory, FIFO or socket. Outputs are written atomically (a staging file
beside each, renamed over it); a symlink is followed, a character device such as /dev/null written in place.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 an output could not be written when its turn
came, or matplotlib is missing for the figures; 2 unusable input (missing file, a directory, unreadable,
not SQLite, no NVTX_EVENTS, bad report; with several exports also two of one rank, or a report of another
rank), an output path that cannot be written, or a bad command line; 3 with --check when any check is false
or not evaluable.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The analysis itself lives in the nsys_analysis package beside this script.
from nsys_analysis.capture.checks import failed_checks  # noqa: E402
from nsys_analysis.capture.export import AnalysisError  # noqa: E402
from nsys_analysis.capture.pipeline import (analyze, analyze_ranks, capture_outputs, check_outputs,  # noqa: E402
                                            ranks_outputs)
from nsys_analysis.common.exit_status import CHECKS_FAILED, FAILURE, OK, USAGE  # noqa: E402
from nsys_analysis.common.files import OutputError, UsageError, check_input_file  # noqa: E402
from nsys_analysis.common.formatting import fmt  # noqa: E402
from nsys_analysis.common.plotting import require_matplotlib  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("export", nargs="+",
                   help="nsys SQLite export (nsys export --type=sqlite); several: one per rank, in rank order")
    p.add_argument("--out", required=True,
                   help="directory for summary.json, summary.md and figures (ranks.json, ranks.md and "
                        "rank<r>/ for several exports)")
    p.add_argument("--report", action="append",
                   help="run report: train_resnet50 --report JSON, or seed_workload.py's line; once per export")
    p.add_argument("--rank-out", action="append", metavar="DIR",
                   help="where a rank's summary goes instead of OUT/rank<r> (once per export, in their order); "
                        "makes even one export a ranks analysis")
    p.add_argument("--expected-steps", type=int, metavar="M",
                   help="steps the capture must hold (default: the report's capture.steps)")
    p.add_argument("--check", "--strict", dest="check", action="store_true",
                   help="exit 3 when any check fails or cannot be evaluated, naming it")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    a = p.parse_args(argv)
    if a.expected_steps is not None and a.expected_steps < 0:
        p.error("expected --expected-steps >= 0, got %d" % a.expected_steps)
    n = len(a.export)
    if a.report and len(a.report) != n:
        p.error("expected one --report per export (%d), got %d" % (n, len(a.report)))
    if a.rank_out and len(a.rank_out) != n:
        p.error("expected one --rank-out per export (%d), got %d" % (n, len(a.rank_out)))
    return a


def check_paths(a, ranks_mode):
    """Every input readable and every output writable, before any work; raises UsageError naming the
    argument. (Each rank's own directory is checked by analyze_ranks(), which knows the ranks.)"""
    for path in a.export:
        check_input_file("export", path, "an nsys SQLite export file (nsys export --type=sqlite)")
    for path in a.report or ():
        check_input_file("--report", path, "a run report file", streams=True)
    figures = not a.no_figures
    check_outputs("--out", a.out, ranks_outputs(figures) if ranks_mode else capture_outputs(figures))


def run(a, ranks_mode):
    """The analysis: (summaries, the summary or ranks dict whose checks decide, each rank's directory)."""
    if not ranks_mode:
        s = analyze(a.export[0], a.out, a.report[0] if a.report else None, a.expected_steps,
                    figures=not a.no_figures)
        return [s], s, [a.out]
    summaries, s = analyze_ranks(a.export, a.out, a.report, a.expected_steps, figures=not a.no_figures,
                                 rank_dirs=a.rank_out)
    return summaries, s, a.rank_out or [os.path.join(a.out, "rank%d" % r) for r in s["ranks"]]


def report(a, ranks_mode, summaries, s, rank_dirs):
    """The lines on stdout, and the checks that did not pass on stderr; returns the exit status."""
    for path, rs, out in zip(a.export, summaries, rank_dirs):
        print("%s: %d steps, window %s ms, %s%% no device activity, %s H2D copies -> %s" % (
            path, rs["steps"], fmt(rs["capture_window_ms"]), fmt(rs["no_activity_pct"], 2),
            fmt(rs["h2d_copies"]), out))
    if ranks_mode:
        print("ranks %s: NCCL %s ms, exposed %s%% of the window; a straggler in %d of %d steps -> %s" % (
            ", ".join(map(str, s["ranks"])), " / ".join(fmt(p["nccl_ms"]) for p in s["per_rank"]),
            " / ".join(fmt(p["exposed_comm_pct"], 2) for p in s["per_rank"]),
            sum(1 for st in s["stragglers"] if st["straggler"] is not None), s["steps_compared"], a.out))
    fails = failed_checks(s)
    for name, detail in fails:
        print("check %s %s: %s" % (name, "not evaluable" if s["checks"][name] is None else "FAILED", detail),
              file=sys.stderr)
    if a.check and fails:
        print("error: %d check(s) did not pass: %s" % (len(fails), ", ".join(n for n, _ in fails)), file=sys.stderr)
        return CHECKS_FAILED
    return OK


def main(argv=None):
    a = parse_args(argv)
    ranks_mode = len(a.export) > 1 or bool(a.rank_out)
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
    sys.exit(main())
