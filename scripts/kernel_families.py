#!/usr/bin/env python3
"""Kernel time by family, runs side by side: what --fused-bn takes out of the step.

usage: kernel_families.py SUMMARY.json [SUMMARY.json ...] [--names NAME ...] [--out FILE.md]

Each SUMMARY.json is analyze.py's summary of one capture (its `kernel_families`, computed over every
kernel of the export: nsys_analysis.kernels.kernel_family_table). Prints a Markdown table, one row per
family (batch norm, the fused BN+ReLU and BN+add+ReLU, ReLU, add, convolution, GEMM, optimizer,
pooling, copies and casts, other) and, per run, its share of the kernel time and its milliseconds per
step, then the kernel time per step and the run's images/s; below it, per run, the largest kernels
that no family names ("other", by short label). --names labels the columns (default: each file's folder name).
Example, eager against --fused-bn at bf16:

  scripts/profile.sh --prefix out/e16 --analyze --synthetic --steps 64 --precision bf16
  scripts/profile.sh --prefix out/e16f --analyze --synthetic --steps 64 --precision bf16 --fused-bn
  scripts/kernel_families.py out/e16_analysis/summary.json out/e16f_analysis/summary.json \\
      --names eager fused

Exit status: 0 done; 2 a file missing, not JSON, or without kernel_families (an export without
device data, or an analyze.py older than the families), or --names of another length.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nsys_analysis.formatting import fmt  # noqa: E402
from nsys_analysis.kernels import KERNEL_FAMILIES  # noqa: E402
from nsys_analysis.markdown import table  # noqa: E402


class UsageError(Exception):
    pass


def load(path):
    """The summary's kernel families, steps and images/s. Raises UsageError naming the file."""
    try:
        with open(path) as f:
            s = json.load(f)
    except OSError as e:
        raise UsageError("%s: cannot read (%s)" % (path, e.strerror))
    except ValueError as e:
        raise UsageError("%s: not JSON (%s)" % (path, e))
    if not isinstance(s, dict) or not s.get("kernel_families"):
        raise UsageError("%s: no kernel_families (an export without kernels, or a summary written by an "
                         "older analyze.py: run scripts/analyze.py on the export again)" % path)
    return s


def family_table(summaries, names):
    """The Markdown lines of the side-by-side table."""
    fams = [f for f in KERNEL_FAMILIES if any(r["family"] == f for s in summaries for r in s["kernel_families"])]
    header = ["family"]
    for n in names:
        header += ["%s %%" % n, "%s ms/step" % n]
    rows = []
    for fam in fams:
        row = [fam]
        for s in summaries:
            r = next((r for r in s["kernel_families"] if r["family"] == fam), None)
            row += [fmt(r["pct"] if r else 0.0, 1), fmt(r.get("ms_per_step") if r else 0.0, 2)]
        rows.append(row)
    total = ["all kernels"]
    for s in summaries:
        steps = s.get("steps") or None
        ms = sum(r["total_ms"] for r in s["kernel_families"])
        total += ["100.0", fmt(ms / steps if steps else None, 2)]
    rows.append(total)
    rows.append(["images/s"] + sum(([fmt(s.get("images_per_s"), 1), ""] for s in summaries), []))
    lines = [table(header, rows, ["l"] + ["r"] * (2 * len(summaries)))]
    for name, s in zip(names, summaries):
        other = next((r for r in s["kernel_families"] if r["family"] == "other" and r.get("parts")), None)
        if other:
            steps = s.get("steps") or None
            lines.append("\nLargest in other, %s: %s" % (name, "; ".join(
                "%s %s ms/step (%s%%)" % (p["label"], fmt(p["total_ms"] / steps if steps else None, 2),
                                          fmt(p["pct"], 1)) for p in other["parts"])))
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summaries", nargs="+", metavar="SUMMARY.json")
    ap.add_argument("--names", nargs="+", help="column names, one per summary")
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args(argv)
    try:
        if args.names and len(args.names) != len(args.summaries):
            raise UsageError("--names: expected %d names (one per summary), got %d"
                             % (len(args.summaries), len(args.names)))
        summaries = [load(p) for p in args.summaries]
    except UsageError as e:
        print("kernel_families.py: error: %s" % e, file=sys.stderr)
        return 2
    names = args.names or [os.path.basename(os.path.dirname(os.path.abspath(p))) for p in args.summaries]
    text = "\n".join(family_table(summaries, names)) + "\n"
    sys.stdout.write(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
