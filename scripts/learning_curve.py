#!/usr/bin/env python3
"""The learning curve of one or several train_resnet50 --epochs runs: loss and top-1 against epoch
and against wall time.

usage: learning_curve.py REPORT.json [REPORT.json ...] [--names NAME ...] [--out FIGURE.png]
                         [--table FILE.md] [--no-figures]

Each REPORT.json is a train_resnet50 --report of an --epochs run (or
scripts/experiments/reference_epochs.py's) (its `training.epochs`: per epoch the training loss, the
evaluation's top-1, top-5 and loss, images/s and the run's wall time at the epoch's end; a resumed
run's report holds the epochs of the run it continued). Prints a Markdown table per run (epoch,
train loss, eval loss, top-1, top-5, images/s, wall time; for an fp16 run also the loss scale and
the steps skipped so far), then the best top-1 and when it came (and which steps an fp16 run
skipped), and draws four panels into --out (default learning_curve.png): training and evaluation
loss, and top-1, each against the epoch and against wall time. --names labels the runs (default:
each report's file name without .json).

Example, the default recipe against the article's constant 0.1:

  train_resnet50 --data DIR --epochs 10 --report out/default.json
  train_resnet50 --data DIR --epochs 10 --lr-schedule constant --lr 0.1 --report out/constant.json
  scripts/learning_curve.py out/default.json out/constant.json --out out/curve.png

A report must be a regular file (a FIFO or a device is refused before it is read) of at most
256 MiB. A loss that was not finite may be null (train_resnet50), NaN or Infinity
(reference_epochs.py's json.dumps): the table shows nan, the figure a gap. Top-1, top-5 and
training.target_top1 are fractions in [0, 1] (0.5022, not 50.22); each epoch is a count held once;
elapsed_s and images_per_s are 0 or more, skipped_steps and skipped_at's steps counts; a report
otherwise is refused, naming the key and the epoch.

--out and --table are checked before anything is read (a directory, FIFO or socket there is refused,
and so is a report given as input, or one file for both) and written atomically; --out must name a
figure format (.png, .pdf, .svg, .eps, .ps, .jpg).

Exit status (nsys_analysis.common.exit_status): 0 done; 1 an output could not be written when its
turn came, or matplotlib missing (use --no-figures, or /usr/bin/python3); 2 a report missing, not a
regular file, too large, not JSON it can read, not train_resnet50's, without epochs (a run of
--warmup + --steps) or with epochs or a target_top1 of another form or out of range, --names of
another length, or an output that cannot be written; 130 Ctrl-C.
"""

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
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


# The programs whose reports hold `training.epochs`: the workload and
# scripts/experiments/reference_epochs.py.
PROGRAMS = ("train_resnet50", "reference_epochs")

# The most a report holds (a long run's: megabytes); a larger file is refused before it is read.
MAX_REPORT_BYTES = 256 << 20

# The figure formats --out takes (matplotlib's, without optional backends), by file extension.
FIGURE_FORMATS = (".png", ".pdf", ".svg", ".eps", ".ps", ".jpg", ".jpeg")


def _number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _count(value):
    """A count (an epoch, a step): an int, not a bool, 0 or more."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _fraction(value):
    """A share (top-1, top-5, a target): a finite number in [0, 1]."""
    return _number(value) and 0 <= value <= 1


def _shown(value):
    """value as JSON, for a message (at most 60 characters)."""
    text = json.dumps(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _loss(value):
    """A loss: a finite number, or NaN where the run's loss was not finite (train_resnet50's report
    writes null there, and says where in `nonfinite_loss`; reference_epochs.py's json.dumps writes
    NaN or Infinity); None when it is neither."""
    if value is None or (
        isinstance(value, float) and not math.isfinite(value)  # JSON's NaN, Infinity, -Infinity
    ):
        return float("nan")
    return value if _number(value) else None


def _read_json(path):
    """The JSON document at path, a regular file of at most MAX_REPORT_BYTES (a FIFO or a device
    would block or never end). Raises UsageError naming the file."""
    check_input_file("report", path, "a train_resnet50 --report JSON")
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_REPORT_BYTES + 1)
    except OSError as e:
        raise UsageError("%s: cannot read (%s)" % (path, e.strerror))
    if len(data) > MAX_REPORT_BYTES:
        raise UsageError("%s: more than the %d bytes a run report holds" % (path, MAX_REPORT_BYTES))
    try:
        return json.loads(data)
    except RecursionError:
        raise UsageError("%s: not JSON it can read (nested too deeply)" % path)
    except ValueError as e:
        raise UsageError("%s: not JSON (%s)" % (path, e))


def load(path):
    """The run's epochs as a list of dicts (epoch, train_loss, elapsed_s, images_per_s, and
    eval_top1, eval_top5, eval_loss or None), and its training section. Raises UsageError naming the
    file (and the key, and the epoch)."""
    doc = _read_json(path)
    if not isinstance(doc, dict) or doc.get("program") not in PROGRAMS:
        raise UsageError(
            '%s: not a train_resnet50 or reference_epochs.py report (no "program": '
            '"train_resnet50")' % path
        )
    training = doc.get("training")
    if not isinstance(training, dict) or not isinstance(training.get("epochs"), list):
        raise UsageError(
            "%s: no training.epochs (a run of --warmup + --steps, not --epochs)" % path
        )
    target = training.get("target_top1")
    if not (target is None or _fraction(target)):
        raise UsageError(
            "%s: training.target_top1 is %s, expected a fraction in [0, 1] or null"
            % (path, _shown(target))
        )
    epochs = []
    seen: dict[int, int] = {}
    for i, entry in enumerate(training["epochs"]):
        epochs.append(_epoch(path, i, entry, seen))
    if doc.get("nonfinite_loss"):
        training = dict(training, nonfinite_loss=doc["nonfinite_loss"])
    if not epochs:
        raise UsageError(
            "%s: training.epochs is empty (the run stopped before its first epoch ended)" % path
        )
    return epochs, training


def _epoch(path, i, entry, seen):
    """training.epochs[i] as load() returns it. seen: {epoch: index} of the entries before it.
    Raises UsageError naming the file, the entry (and its epoch) and the key."""
    where = "%s: training.epochs[%d]" % (path, i)
    if not isinstance(entry, dict) or not _number(entry.get("epoch")):
        raise UsageError("%s lacks a number for epoch" % where)
    if not _count(entry["epoch"]):
        raise UsageError(
            "%s: epoch is %s, expected a count of epochs (0 or more)"
            % (where, _shown(entry["epoch"]))
        )
    if entry["epoch"] in seen:
        raise UsageError(
            "%s: epoch %d again (training.epochs[%d] has it; a report holds each epoch once)"
            % (where, entry["epoch"], seen[entry["epoch"]])
        )
    seen[entry["epoch"]] = i
    where += ' ("epoch": %d)' % entry["epoch"]
    if "train_loss" not in entry or _loss(entry["train_loss"]) is None:
        raise UsageError("%s lacks a number for train_loss (or null, NaN: not finite)" % where)
    for key in ("elapsed_s", "images_per_s"):
        if not _number(entry.get(key)):
            raise UsageError("%s lacks a number for %s" % (where, key))
        if entry[key] < 0:
            raise UsageError(
                "%s: %s is %s, expected a number, 0 or more" % (where, key, _shown(entry[key]))
            )
    ev = entry.get("eval")
    if ev is not None:
        if not isinstance(ev, dict):
            raise UsageError("%s: eval is %s, expected an object or null" % (where, _shown(ev)))
        for key in ("top1", "top5"):
            if not _number(ev.get(key)):
                raise UsageError("%s: eval lacks a number for %s" % (where, key))
            if not _fraction(ev[key]):
                raise UsageError(
                    "%s: eval.%s is %s, expected a fraction in [0, 1] (0.5022 for 50.22%%)"
                    % (where, key, _shown(ev[key]))
                )
        if "loss" not in ev or _loss(ev["loss"]) is None:
            raise UsageError("%s: eval lacks a number for loss (or null, NaN: not finite)" % where)
    return {
        "scaling": _loss_scaling(where, entry),
        "epoch": entry["epoch"] + 1,
        "train_loss": _loss(entry["train_loss"]),
        "elapsed_s": entry["elapsed_s"],
        "images_per_s": entry["images_per_s"],
        "eval_top1": ev["top1"] if ev else None,
        "eval_top5": ev["top5"] if ev else None,
        "eval_loss": _loss(ev["loss"]) if ev else None,
        "resumed": bool(entry.get("resumed")),
    }


def _loss_scaling(where, entry):
    """An fp16 epoch's loss scaling (loss_scale, skipped_steps, skipped_at: what train_resnet50 and
    reference_epochs.py write) as a dict, or None for an epoch without it (other precisions, or an
    older report). where: the file and the entry, for a message. Raises UsageError naming the key
    when the fields are of another form."""
    if entry.get("loss_scale") is None:
        return None
    at = entry.get("skipped_at", [])
    why = None
    if not (_number(entry["loss_scale"]) and entry["loss_scale"] > 0):
        why = "loss_scale is %s, expected a number above 0" % _shown(entry["loss_scale"])
    elif not _count(entry.get("skipped_steps", 0)):
        why = "skipped_steps is %s, expected a count of steps (0 or more)" % _shown(
            entry["skipped_steps"]
        )
    elif not (isinstance(at, list) and all(_count(s) for s in at)):
        why = "skipped_at is %s, expected a list of steps (each 0 or more)" % _shown(at)
    if why:
        raise UsageError("%s has loss_scale, but %s" % (where, why))
    return {
        "scale": entry["loss_scale"],
        "skipped": entry.get("skipped_steps", len(at)),
        "at": list(at),
    }


def _steps_named(steps):
    """ "0, 1 and 3" """
    words = [str(s) for s in steps]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _pct(v):
    return fmt(100.0 * v, 2) if v is not None else "-"


def run_table(name, epochs, training):
    """Markdown lines for one run."""
    fp16 = any(e["scaling"] for e in epochs)
    rows = []
    for e in epochs:
        row = [
            str(e["epoch"]) + (" (resumed)" if e["resumed"] else ""),
            fmt(e["train_loss"], 4),
            fmt(e["eval_loss"], 4) if e["eval_loss"] is not None else "-",
            _pct(e["eval_top1"]),
            _pct(e["eval_top5"]),
            fmt(e["images_per_s"], 1),
            fmt(e["elapsed_s"], 1),
        ]
        if fp16:
            s = e["scaling"]
            row += ["%g" % s["scale"], str(s["skipped"])] if s else ["-", "-"]
        rows.append(row)
    header = ["epoch", "train loss", "eval loss", "top-1 %", "top-5 %", "images/s", "wall s"]
    if fp16:
        header += ["loss scale", "skipped"]
    lines = [
        "### %s" % name,
        "",
        table(header, rows, ["l"] + ["r"] * (len(header) - 1)),
    ]
    scored = [e for e in epochs if e["eval_top1"] is not None]
    if scored:
        best = max(scored, key=lambda e: e["eval_top1"])
        lines += [
            "",
            "Best top-1 %s%% after epoch %d, at %s s."
            % (_pct(best["eval_top1"]), best["epoch"], fmt(best["elapsed_s"], 1)),
        ]
    last = epochs[-1]["scaling"]
    if last and last["skipped"]:
        named = len(last["at"]) == last["skipped"]
        lines.append(
            "Loss scaling (fp16): %d steps skipped%s."
            % (last["skipped"], ": steps %s (0-based)" % _steps_named(last["at"]) if named else "")
        )
    if training.get("nonfinite_loss"):
        lines.append(
            "A loss was not finite at %s: the figures after it are no result."
            % training["nonfinite_loss"]
        )
    if training.get("target_top1") is not None:
        lines.append(
            "Target top-1 %s%%: %s."
            % (
                _pct(training["target_top1"]),
                "reached" if training.get("target_reached") else "not reached",
            )
        )
    return lines + [""]


def draw(runs, path):
    from nsys_analysis.common.plotting import SEED_COLORS, require_matplotlib, save_figure

    plt = require_matplotlib()
    fig, axes = plt.subplots(2, 2, figsize=(11, 7.5))
    for i, (name, epochs) in enumerate(runs):
        colour = SEED_COLORS[i % len(SEED_COLORS)]
        for col, key in ((0, "epoch"), (1, "elapsed_s")):
            xs = [e[key] for e in epochs]
            ax = axes[0][col]
            ax.plot(
                xs,
                [e["train_loss"] for e in epochs],
                "-o",
                color=colour,
                ms=3,
                label="%s train" % name,
            )
            scored = [e for e in epochs if e["eval_loss"] is not None]
            ax.plot(
                [e[key] for e in scored],
                [e["eval_loss"] for e in scored],
                "--s",
                color=colour,
                ms=3,
                label="%s eval" % name,
            )
            ax = axes[1][col]
            ax.plot(
                [e[key] for e in scored],
                [100.0 * e["eval_top1"] for e in scored],
                "-o",
                color=colour,
                ms=3,
                label=name,
            )
    axes[0][0].set_title("loss by epoch")
    axes[0][1].set_title("loss by wall time")
    axes[1][0].set_title("test top-1 by epoch")
    axes[1][1].set_title("test top-1 by wall time")
    for ax in axes[0]:
        ax.set_ylabel("cross-entropy")
        ax.legend(fontsize=8)
    for ax in axes[1]:
        ax.set_ylabel("top-1 %")
        ax.legend(fontsize=8)
    for ax in (axes[0][0], axes[1][0]):
        ax.set_xlabel("epoch")
    for ax in (axes[0][1], axes[1][1]):
        ax.set_xlabel("wall time (s, evaluation included)")
    fig.tight_layout()
    save_figure(fig, path)


def main(argv=None):
    ap = argparse.ArgumentParser(
        # The first paragraph (one sentence, wrapped) on one line; the rest, as written, after.
        description=" ".join(__doc__.split("\n\n")[0].split("\n")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    ap.add_argument("reports", nargs="+", metavar="REPORT.json")
    ap.add_argument("--names", nargs="+", help="run names, one per report")
    ap.add_argument(
        "--out", default="learning_curve.png", help="the figure (default learning_curve.png)"
    )
    ap.add_argument("--table", help="also write the tables here (Markdown)")
    ap.add_argument("--no-figures", action="store_true", help="print the tables only")
    args = ap.parse_args(argv)
    try:
        if args.names and len(args.names) != len(args.reports):
            raise UsageError(
                "--names: expected %d names (one per report), got %d"
                % (len(args.reports), len(args.names))
            )
        if not args.no_figures:
            if os.path.splitext(args.out)[1].lower() not in FIGURE_FORMATS:
                raise UsageError(
                    "--out %s: expected a figure file (%s), got '%s'"
                    % (
                        args.out,
                        ", ".join(FIGURE_FORMATS),
                        os.path.splitext(args.out)[1] or "no extension",
                    )
                )
            check_output_file("--out", args.out)
        if args.table is not None:
            check_output_file("--table", args.table)
        check_outputs_apart(
            [("--out", None if args.no_figures else args.out), ("--table", args.table)],
            [("report", p) for p in args.reports],
        )
        loaded = [load(p) for p in args.reports]
    except UsageError as e:
        print("learning_curve.py: error: %s" % e, file=sys.stderr)
        return USAGE
    names = args.names or [os.path.splitext(os.path.basename(p))[0] for p in args.reports]
    lines = []
    for name, (epochs, training) in zip(names, loaded):
        lines += run_table(name, epochs, training)
    text = "\n".join(lines)
    sys.stdout.write(text)
    try:
        if args.table:
            write_text(args.table, text)
        if not args.no_figures:
            draw([(n, e) for n, (e, _) in zip(names, loaded)], args.out)
            print("figure: %s" % args.out)
    except OutputError as e:
        print("learning_curve.py: error: %s" % e, file=sys.stderr)
        return FAILURE
    return OK


if __name__ == "__main__":
    exit_with(main, "learning_curve.py")
