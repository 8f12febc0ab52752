#!/usr/bin/env python3
"""Kernel time by family, runs side by side: what --fused-bn takes out of the step.

usage: kernel_families.py SUMMARY.json [SUMMARY.json ...] [--names NAME ...] [--out FILE.md]

Each SUMMARY.json is analyze.py's summary of one capture (its `kernel_families`, computed over every
kernel of the export: nsys_analysis.capture.kernels.kernel_family_table). Prints a Markdown table,
one row per family (batch norm, the fused BN+ReLU and BN+add+ReLU, the BN apply passes of
--fuse-conv-bn on cuDNN's pointwise kernels, ReLU, add, convolution, GEMM, optimizer, pooling,
copies and casts, other) and, per run, its share of the kernel time and its
milliseconds per step, then the kernel time per step and the run's images/s; below it, per run, the
largest kernels that no family names ("other", by short label). A family this script does not know
(a summary of another analyze.py's families) gets a row of its own, before other, so that the rows
always add up to all kernels. --names labels the columns (default: each file's folder name).
Example, eager against --fused-bn at bf16:

  scripts/profile.sh --prefix out/e16 --analyze --synthetic --steps 64 --precision bf16
  scripts/profile.sh --prefix out/e16f --analyze --synthetic --steps 64 --precision bf16 --fused-bn
  scripts/kernel_families.py out/e16_analysis/summary.json out/e16f_analysis/summary.json \\
      --names eager fused

A summary must be a regular file (a FIFO or a device such as /dev/zero is refused before it is read)
of at most 256 MiB. Each family row needs a name of its own (a family given twice is
refused), total_ms and pct (ms_per_step may be absent: it is then total_ms / steps); steps is a
count of the captured steps or null (0 or null: a capture without torch_step ranges, whose ms per
step is n/a).

--out FILE is checked before anything is read (a directory, FIFO or socket there is refused) and
written atomically; a symlink is followed, a character device such as /dev/null written in place.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 --out could not be written when its turn
came; 2 a file missing, not a regular file, too large, not JSON it can read, or without
kernel_families (an export without device data, or an analyze.py older than the families) or with
families of another form (a family twice or without pct included) or steps that are no count,
--names of another length, or an --out that cannot be written; 130 Ctrl-C.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nsys_analysis.capture.kernels import KERNEL_FAMILIES  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import (  # noqa: E402
    OutputError,
    UsageError,
    check_input_file,
    check_output_file,
    check_outputs_apart,
    write_text,
)
from nsys_analysis.common.formatting import fmt, table  # noqa: E402


# The most a summary.json holds (a long capture's: megabytes); a larger file is refused unread.
MAX_SUMMARY_BYTES = 256 << 20


def _number(value):
    """A finite number (not a bool): what the families' times and shares are."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value):
    """A count: an int (not a bool), 0 or more."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _check_families(path, families):
    """Raises UsageError naming the file (and the row and its family) unless families is a list of
    rows as kernel_family_table() writes them: a family name of its own (a family given twice is
    refused), total_ms and pct (finite numbers, 0 or more; ms_per_step too when present), and parts
    each with a label and numbers."""
    bad = "%s: kernel_families is not a list of families as analyze.py writes them" % path
    if not isinstance(families, list):
        raise UsageError(bad)
    seen: dict[str, int] = {}  # family: its row
    for i, r in enumerate(families):
        if not (isinstance(r, dict) and isinstance(r.get("family"), str) and r["family"]):
            raise UsageError("%s: kernel_families[%d] has no family name" % (bad, i))
        where = "%s: kernel_families[%d] (%s)" % (bad, i, r["family"])
        if not r["family"].isprintable():
            raise UsageError("%s: the family name holds a control character" % where)
        if r["family"] in seen:
            raise UsageError(
                "%s: kernel_families holds the family %s twice (kernel_families[%d] and [%d])"
                % (path, r["family"], seen[r["family"]], i)
            )
        seen[r["family"]] = i
        for key in ("total_ms", "pct", "ms_per_step"):
            if key not in r:
                if key == "ms_per_step":
                    continue
                raise UsageError("%s lacks %s" % (where, key))
            if not (_number(r[key]) and r[key] >= 0) or (key == "pct" and r[key] > 100):
                raise UsageError(
                    "%s: %s is %r, expected a number, 0 or more%s"
                    % (where, key, r[key], " and at most 100" if key == "pct" else "")
                )
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
            raise UsageError("%s: its parts are not labels with total_ms and pct" % where)


def _read_json(path):
    """The JSON document at path, a regular file of at most MAX_SUMMARY_BYTES (a FIFO or a device
    would block or never end). Raises UsageError naming the file."""
    check_input_file("summary", path, "analyze.py's summary.json")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_SUMMARY_BYTES + 1)
    except OSError as e:
        raise UsageError("%s: cannot read (%s)" % (path, e.strerror))
    if len(data) > MAX_SUMMARY_BYTES:
        raise UsageError(
            "%s: more than the %d bytes a summary.json holds" % (path, MAX_SUMMARY_BYTES)
        )
    try:
        return json.loads(data)
    except RecursionError:
        raise UsageError("%s: not JSON it can read (nested too deeply)" % path)
    except ValueError as e:
        raise UsageError("%s: not JSON (%s)" % (path, e))


def load(path):
    """The summary's kernel families, steps and images/s. Raises UsageError naming the file."""
    s = _read_json(path)
    if not isinstance(s, dict) or not s.get("kernel_families"):
        raise UsageError(
            "%s: no kernel_families (an export without kernels, or a summary written by an "
            "older analyze.py: run scripts/analyze.py on the export again)" % path
        )
    _check_families(path, s["kernel_families"])
    if not (s.get("steps") is None or _count(s["steps"])):
        raise UsageError(
            "%s: steps is %r, expected a count of steps (0 or more) or null" % (path, s["steps"])
        )
    return s


def _families(summaries):
    """The families of the table: those of KERNEL_FAMILIES the summaries hold, in its order, with
    any other (a summary of another analyze.py's families) before "other", as first met."""
    held = [r["family"] for s in summaries for r in s["kernel_families"]]
    known = [f for f in KERNEL_FAMILIES if f in held and f != "other"]
    unknown = [f for i, f in enumerate(held) if f not in KERNEL_FAMILIES and f not in held[:i]]
    return known + unknown + (["other"] if "other" in held else [])


def family_table(summaries, names):
    """The Markdown lines of the side-by-side table."""
    header = ["family"]
    for n in names:
        header += ["%s %%" % n, "%s ms/step" % n]
    rows = []
    for fam in _families(summaries):
        row = [fam]
        for s in summaries:
            steps = s.get("steps") or None
            r = next((r for r in s["kernel_families"] if r["family"] == fam), None)
            if r is None:
                row += [fmt(0.0, 1), fmt(0.0, 2)]
                continue
            per_step = r.get("ms_per_step")
            if per_step is None and steps:
                per_step = r["total_ms"] / steps
            row += [fmt(float(r["pct"]), 1), fmt(per_step, 2, ints_exact=False)]
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
    ap = argparse.ArgumentParser(
        # The first paragraph (one sentence, wrapped) on one line; the rest, as written, after.
        description=" ".join(__doc__.split("\n\n")[0].split("\n")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
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
