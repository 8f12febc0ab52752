#!/usr/bin/env python3
"""Read an Nsight Systems SQLite export of the ResNet-50 workload: tables, checks and the article's figures.

usage: analyze.py EXPORT.sqlite --out DIR [--report run.json] [--expected-steps M] [--check]
                  [--no-figures]

Writes into DIR:
  summary.json         numbers and checks (nsys_analysis.summary.compute_summary lists every key)
  summary.md           phases, per-step input timing, top kernels, memory operations, CUDA API calls,
                       other NVTX domains, checks
  fig1_phases.png      total duration of each phase range, torch_step and capture_window excluded
  fig2_top_kernels.png the twelve largest kernel groups by demangled name, with launch counts
  fig3_timeline.png    host ranges above kernel / copy / memset lanes, first step to last device op
  fig5_batch_wait.png  time inside batch_wait per step
(Figure 4 compares configurations; scripts/sweep.py draws it with nsys_analysis.figures.plot_sweep().)

The export may come from any nsys 2023+ release: tables and columns are looked up by name, optional
tables may be absent, enum ids are read from the ENUM_* tables when present. Range text comes from
NVTX_EVENTS.text or, for registered strings, NVTX_EVENTS.textId -> StringIds. The training loop's ranges
live in NVTX's default domain (domainId 0 or NULL); ranges of other domains (the C++ loader's
`data_pipeline`: load_batch, load_sample, reuse_fence) are listed separately and never counted as
steps or phases.

Exit status: 0 done; 2 unusable input (missing file, not SQLite, no NVTX_EVENTS, bad report);
3 with --check when any check is false or not evaluable.
"""

import argparse
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The analysis itself lives in the nsys_analysis package beside this script.
from nsys_analysis.checks import failed_checks  # noqa: E402
from nsys_analysis.export import AnalysisError  # noqa: E402
from nsys_analysis.figures import require_matplotlib  # noqa: E402
from nsys_analysis.formatting import fmt  # noqa: E402
from nsys_analysis.pipeline import analyze  # noqa: E402


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("export", help="nsys SQLite export (nsys export --type=sqlite)")
    p.add_argument("--out", required=True, help="directory for summary.json, summary.md and figures")
    p.add_argument("--report", help="run report: train_resnet50 --report JSON, or seed_workload.py's line")
    p.add_argument("--expected-steps", type=int, metavar="M",
                   help="steps the capture must hold (default: the report's capture.steps)")
    p.add_argument("--check", "--strict", dest="check", action="store_true",
                   help="exit 3 when any check fails or cannot be evaluated, naming it")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    a = p.parse_args(argv)
    if a.expected_steps is not None and a.expected_steps < 0:
        p.error("expected --expected-steps >= 0, got %d" % a.expected_steps)
    if not a.no_figures:
        require_matplotlib()
    try:
        s = analyze(a.export, a.out, a.report, a.expected_steps, figures=not a.no_figures)
    except AnalysisError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    fails = failed_checks(s)
    print("%s: %d steps, window %s ms, %s%% no device activity, %s H2D copies -> %s" % (
        a.export, s["steps"], fmt(s["capture_window_ms"]), fmt(s["no_activity_pct"], 2),
        fmt(s["h2d_copies"]), a.out))
    for name, detail in fails:
        print("check %s %s: %s" % (name, "not evaluable" if s["checks"][name] is None else "FAILED", detail),
              file=sys.stderr)
    if a.check and fails:
        print("error: %d check(s) did not pass: %s" % (len(fails), ", ".join(n for n, _ in fails)), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
