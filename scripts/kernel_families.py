#!/usr/bin/env python3
"""Kernel time by family, runs side by side: what --fused-bn takes out of the step.

usage: kernel_families.py SUMMARY.json [SUMMARY.json ...] [--names NAME ...] [--out FILE.md]

Each SUMMARY.json is analyze.py's summary of one capture (its `kernel_families`, computed over every
kernel of the export: nsys_analysis.capture.kernels.kernel_family_table). Prints a Markdown table,
one row per family (batch norm, the fused BN+ReLU and BN+add+ReLU, the BN apply passes of
--fuse-conv-bn on cuDNN's pointwise kernels, ReLU, add, convolution, GEMM, optimizer, pooling,
copies and casts, other) and, per run, its share of the kernel time and its
milliseconds per step, then the kernel time per step and the run's images/s; below it, per run, the
largest kernels that no family names ("other", by short label). --names labels the columns (default:
each file's folder name). Example, eager against --fused-bn at bf16:

  scripts/profile.sh --prefix out/e16 --analyze --synthetic --steps 64 --precision bf16
  scripts/profile.sh --prefix out/e16f --analyze --synthetic --steps 64 --precision bf16 --fused-bn
  scripts/kernel_families.py out/e16_analysis/summary.json out/e16f_analysis/summary.json \\
      --names eager fused

--out FILE is checked before anything is read (a directory, FIFO or socket there is refused) and
written atomically; a symlink is followed, a character device such as /dev/null written in place.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 --out could not be written when its turn
came; 2 a file missing, not JSON, or without kernel_families (an export without device data, or an
analyze.py older than the families) or with families of another form, --names of another length, or
an --out that cannot be written; 130 Ctrl-C.
"""

import argparse
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nsys_analysis.capture.kernels import KERNEL_FAMILIES  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import (  # noqa: E402
    OutputError,
    UsageError,
    check_output_file,
    check_outputs_apart,
    write_text,
)
from nsys_analysis.common.formatting import fmt, table  # noqa: E402


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _valid_families(families):
    """True when families is a list of rows as kernel_family_table() writes them: a family name,
    numbers for total_ms (and pct, ms_per_step when present), and parts each with a label and
    numbers."""
    if not isinstance(families, list):
        return False
    for r in families:
        if not (
            isinstance(r, dict)
            and isinstance(r.get("family"), str)
            and _number(r.get("total_ms"))
            and all(_number(r[k]) for k in ("pct", "ms_per_step") if r.get(k) is not None)
        ):
            return False
        parts = r.get("parts") or []
        if not (
            isinstance(parts, list)
            and all(
                isinstance(p, dict)
                and "label" in p
                and _number(p.get("total_ms"))
                and _number(p.get("pct"))
                for p in parts
            )
        ):
            return False
    return True


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
        raise UsageError(
            "%s: no kernel_families (an export without kernels, or a summary written by an "
            "older analyze.py: run scripts/analyze.py on the export again)" % path
        )
    if not _valid_families(s["kernel_families"]):
        raise UsageError(
            "%s: kernel_families is not a list of families as analyze.py writes them" % path
        )
    if not (s.get("steps") is None or _number(s["steps"])):
        raise UsageError("%s: steps is %r, expected a number" % (path, s["steps"]))
    return s


def family_table(summaries, names):
    """The Markdown lines of the side-by-side table."""
    fams = [
        f
        for f in KERNEL_FAMILIES
        if any(r["family"] == f for s in summaries for r in s["kernel_families"])
    ]
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
        other = next(
            (r for r in s["kernel_families"] if r["family"] == "other" and r.get("parts")), None
        )
        if other:
            steps = s.get("steps") or None
            lines.append(
                "\nLargest in other, %s: %s"
                % (
                    name,
                    "; ".join(
                        "%s %s ms/step (%s%%)"
                        % (
                            p["label"],
                            fmt(p["total_ms"] / steps if steps else None, 2),
                            fmt(p["pct"], 1),
                        )
                        for p in other["parts"]
                    ),
                )
            )
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("summaries", nargs="+", metavar="SUMMARY.json")
    ap.add_argument("--names", nargs="+", help="column names, one per summary")
    ap.add_argument("--out", help="also write the table here")
    args = ap.parse_args(argv)
    try:
        if args.names and len(args.names) != len(args.summaries):
            raise UsageError(
                "--names: expected %d names (one per summary), got %d"
                % (len(args.summaries), len(args.names))
            )
        if args.out is not None:
            check_output_file("--out", args.out)
            check_outputs_apart([("--out", args.out)], [("summary", p) for p in args.summaries])
        summaries = [load(p) for p in args.summaries]
    except UsageError as e:
        print("kernel_families.py: error: %s" % e, file=sys.stderr)
        return USAGE
    names = args.names or [
        os.path.basename(os.path.dirname(os.path.abspath(p))) for p in args.summaries
    ]
    text = "\n".join(family_table(summaries, names)) + "\n"
    sys.stdout.write(text)
    if args.out:
        try:
            write_text(args.out, text)
        except OutputError as e:
            print("kernel_families.py: error: %s" % e, file=sys.stderr)
            return FAILURE
    return OK


if __name__ == "__main__":
    exit_with(main, "kernel_families.py")
