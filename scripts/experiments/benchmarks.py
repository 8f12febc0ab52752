#!/usr/bin/env python3
"""GPU benchmarks of the workload: capture checks, the side-by-side comparison with the Python
reference, the NVTX cost, process teardown, and a scan of loader settings; then the tables of
docs/BENCHMARKS.md.

usage: scripts/experiments/benchmarks.py checks  --data ROOT --out DIR
       scripts/experiments/benchmarks.py compare --data ROOT --out DIR
                                         [--python-ref seed_workload.py]
       scripts/experiments/benchmarks.py scan    --data ROOT --out DIR
       scripts/experiments/benchmarks.py loader  --data ROOT --out DIR [--workers 1 8 16]
       scripts/experiments/benchmarks.py experiments --data ROOT --out DIR
       scripts/experiments/benchmarks.py ncu     --out DIR [--ncu-skip N --ncu-count M]
       scripts/experiments/benchmarks.py table   --out DIR

checks   captures 8 and 64 steps, iterator reused and reset, under the article's nsys command
         (scripts/profile.sh) and runs analyze.py --check on each: exactly M torch_step ranges in
         capture_window, 2 x M host-to-device copies, no synchronization inside a step, no layout
         conversion kernels.
compare  64 captured steps, batch 128, under the same nsys command: (1) train_resnet50 --synthetic,
         then --rounds rounds of (2) train_resnet50 with its defaults and (3) the Python reference,
         back to back (the reference is loader-bound and varies from run to run: each round gives a
         paired ratio (2)/(3), and the table reports their median). Then, without nsys: NVTX on vs
         off (alternating, --repeats each) and the teardown of a default run (time from the report
         line to process exit).
scan     without nsys: the synthetic ceiling, then workers x prefetch x work unit, 64 steps each.
loader   loader_bench --json at each --workers count (the loader alone; fused vs full decode).
experiments  the experiment flags: bf16 (ceiling and loader-fed), eager vs --cuda-graph ceilings
         (paired), uint8 vs float32 transfers (nsys),
         --nvtx-detail layers vs steps, --sync-every-step under nsys, --torch-profiler-trace.
ncu      Nsight Compute (ncu, clocks left alone) on every kernel of one GPU-bound training step
         (train_resnet50 --synthetic; --ncu-skip launches skipped first, --ncu-count profiled):
         duration, DRAM bytes and the speed-of-light percentages, grouped by kernel kind.
table    reads DIR/*.json written by the other commands and prints Markdown tables.

Every command writes DIR/<command>.json; runs live in DIR/<command>/. Before a command runs, --out,
its <command>.json and <command>/ are checked (--out a directory or creatable; no directory, FIFO or
socket where the file goes); results are written atomically, a symlink followed.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 when a run failed (checks: when a check
failed), a program or tool is missing, a result file of DIR cannot be read (table), or an output
could not be written; 2 for usage errors (a flag's value, an --out that cannot be written, table's
--out not a directory); 130 Ctrl-C.
"""

import argparse
import math
import os
import sys

# The commands themselves live in the nsys_analysis package of scripts/, the folder above this one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nsys_analysis.bench.commands import COMMANDS, BenchSettings, check_outputs  # noqa: E402
from nsys_analysis.bench.runs import BenchmarkError  # noqa: E402
from nsys_analysis.bench.tables import render_tables  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import OutputError, UsageError  # noqa: E402


def parse_args(argv):
    """(parsed flags, the arguments after `--`)."""
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("command", choices=list(COMMANDS) + ["table"])
    p.add_argument("--data", help="Food-101 root (at least 12,000 images for the checks)")
    p.add_argument("--out", required=True, help="output directory")
    p.add_argument("--binary", help="train_resnet50 (default: $TRAIN_BIN or build/bin/)")
    p.add_argument("--python-ref", help="the Python reference, seed_workload.py (compare)")
    p.add_argument("--steps", type=int, default=64, help="captured steps (compare, scan)")
    p.add_argument("--repeats", type=int, default=3, help="runs per NVTX/teardown measurement")
    p.add_argument(
        "--rounds",
        "--python-repeats",
        type=int,
        default=3,
        help="compare: rounds of (2) the loader-fed run and (3) the Python reference",
    )
    p.add_argument("--timeout", type=float, default=300, help="seconds per run")
    p.add_argument(
        "--ncu-skip",
        type=int,
        default=700,
        help="ncu: kernel launches to skip (start-up and the warm-up step)",
    )
    p.add_argument("--ncu-count", type=int, default=540, help="ncu: kernels to profile (one step)")
    p.add_argument("--workers", type=int, nargs="+", default=[1, 2, 3, 4, 6, 8])
    p.add_argument("--prefetch", type=int, nargs="+", default=[2])
    p.add_argument("--units", nargs="+", default=["batch", "sample"])
    argv = list(sys.argv[1:] if argv is None else argv)
    # After `--`: flags for every train_resnet50 run (e.g. -- --device cpu --batch-size 4).
    extra = argv[argv.index("--") + 1 :] if "--" in argv else []
    argv = argv[: argv.index("--")] if "--" in argv else argv
    args = p.parse_args(argv)
    if args.command not in ("table", "ncu") and not args.data:
        p.error("--data is required for %s" % args.command)
    if not (args.timeout > 0 and math.isfinite(args.timeout)):
        p.error("expected --timeout > 0 seconds, got %g" % args.timeout)
    return args, extra


def table(out):
    """`table`: the tables of the JSON files in out on stdout."""
    if not os.path.isdir(out):
        print(
            "benchmarks.py: error: --out %s: %s, expected the directory of the other commands' "
            "JSON files"
            % (out, "no such directory" if not os.path.exists(out) else "not a directory"),
            file=sys.stderr,
        )
        return USAGE
    sys.stdout.write(render_tables(out))
    return OK


def main(argv=None):
    args, extra = parse_args(argv)
    try:
        if args.command == "table":
            return table(args.out)
        check_outputs(args.command, args.out)
        opts = BenchSettings(
            out=args.out,
            data=args.data,
            binary=args.binary,
            python_ref=args.python_ref,
            steps=args.steps,
            repeats=args.repeats,
            rounds=args.rounds,
            timeout=args.timeout,
            ncu_skip=args.ncu_skip,
            ncu_count=args.ncu_count,
            workers=args.workers,
            prefetch=args.prefetch,
            units=args.units,
            extra=extra,
        )
        return COMMANDS[args.command](opts)
    except UsageError as e:
        print("benchmarks.py: error: %s" % e, file=sys.stderr)
        return USAGE
    except (BenchmarkError, OutputError) as e:
        print("benchmarks.py: error: %s" % e, file=sys.stderr)
        return FAILURE


if __name__ == "__main__":
    exit_with(main, "benchmarks.py")
