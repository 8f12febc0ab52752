#!/usr/bin/env python3
"""Run the article's input-pipeline comparison: configurations x seeds in a shuffled order, each
captured with scripts/profile.sh (or, with --no-nsys, run directly for its report), then one table
and figures 4-5.

usage: sweep.py [--data DIR] [--binary PATH] [--configs FILE.json] [--only NAME ...]
                [--seeds 2026 2027] [--order-seed N] [--timeout 600] [--out DIR]
                [--no-nsys] [--no-untraced] [--dry-run] [--no-figures] [--run-figures]
                [-- EXTRA ARGS FOR EVERY RUN]

Every run lives in OUT/runs/<config>_<seed>/ (attempt logs, run report, capture, analysis). A run
that exceeds --timeout is killed and retried once; both attempts are recorded. Each captured run is
followed, right away, by its untraced run: the same command, seed and flags without nsys
(untraced.json and untraced_attempt<N>.log in its folder; --no-untraced: none; --no-nsys runs are
all untraced already), whose images/s the tables give beside the capture's, with their ratio and
whether the capture was tracer-bound (traced below 0.90x untraced: the tracing, not the input
pipeline, set its pace; reported, not excluded). --resume keeps an untraced run already finished. A
run whose checks fail (analysis checks of its capture, and its report's step count / interruption
flag) is not aggregated, and the table says which check failed. Outputs in OUT: sweep.md, sweep.csv
(one row per configuration: each repetition and the mean), runs.csv, sweep.json, fig4_sweep.png,
fig5_batch_wait.png.

Configurations are flag sets for train_resnet50 (keys are its flags in snake_case: steps, workers,
prefetch_factor, pin_memory, reuse_iterator, ...). --configs FILE replaces the default list with
{"name": {flag: value, ...}, ...}; flags a configuration does not give keep the baseline's. A flag
also given after `--` overrides the configuration's (e.g. -- --device cpu --batch-size 4 --steps 2).

--configs, --out and every file the sweep writes at the top of OUT are checked before any run (--out
must be a directory or creatable; nothing there may be a directory, FIFO or socket where a file
goes, nor the --configs file or the binary). In --configs, a name or a flag given twice, or a
configuration's own seed (the seeds are --seeds'), is refused. Outputs are written atomically; a
symlink is followed, a character device such as /dev/null written in place. With --resume, a run's
result.json is kept only when it is the run this sweep would make (the same command and steps); one
made otherwise (another configuration, `--` arguments, --data or --binary), or that cannot be read,
is reported and the run made again.

Exit status: 0 every run aggregated; 1 some run failed, timed out twice or failed a check, or an
output could not be written; 2 usage (a flag's value, an unreadable --configs, an --out that cannot
be written); 4 --deadline reached (rerun with --resume to finish); 130 Ctrl-C (the run under way
stopped). The names: nsys_analysis.common.exit_status.
"""

import argparse
import math
import os
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# The sweep itself lives in the nsys_analysis package beside this script.
from nsys_analysis.common.exit_status import DEADLINE, FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import (  # noqa: E402
    OutputError,
    UsageError,
    check_input_file,
    check_outputs_apart,
)
from nsys_analysis.common.paths import default_train_binary  # noqa: E402
from nsys_analysis.common.plotting import require_matplotlib  # noqa: E402
from nsys_analysis.sweep.plan import (  # noqa: E402
    DEFAULT_CONFIGS,
    DEFAULT_SEEDS,
    ConfigError,
    expected_steps,
    load_configs,
    make_plan,
    run_args,
    select_configs,
)
from nsys_analysis.sweep.runs import (  # noqa: E402
    DeadlineReached,
    SweepSettings,
    check_run_outputs,
    run_output_paths,
    run_sweep,
)
from nsys_analysis.sweep.tables import check_outputs, output_paths, write_outputs  # noqa: E402


def parse_args(argv):
    """(parsed flags, arguments after `--`)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    extra = []
    if "--" in argv:
        i = argv.index("--")
        argv, extra = argv[:i], argv[i + 1 :]
    p = argparse.ArgumentParser(
        # The first paragraph (one sentence, wrapped) on one line; the rest, as written, after.
        description=" ".join(__doc__.split("\n\n")[0].split("\n")),
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__.split("\n\n", 1)[1],
    )
    p.add_argument("--data", help="dataset root passed to every run as --data")
    p.add_argument(
        "--binary",
        default=default_train_binary(),
        help="train_resnet50 or any executable taking its flags (default: $TRAIN_BIN, else "
        "build/bin/train_resnet50)",
    )
    p.add_argument("--configs", help="JSON file of configurations replacing the article's eight")
    p.add_argument("--only", nargs="+", metavar="NAME", help="run only these configurations")
    p.add_argument(
        "--seeds",
        nargs="+",
        type=int,
        default=list(DEFAULT_SEEDS),
        help="seeds (default 2026 2027)",
    )
    p.add_argument(
        "--order-seed", type=int, default=1, help="seed of the shuffled run order (default 1)"
    )
    p.add_argument(
        "--timeout",
        type=float,
        default=600,
        help="seconds per run attempt; one retry (default 600)",
    )
    p.add_argument(
        "--out", default=os.path.join("out", "sweep"), help="output directory (default out/sweep)"
    )
    p.add_argument(
        "--no-nsys", action="store_true", help="run the binary directly; use only the run reports"
    )
    p.add_argument(
        "--no-untraced",
        action="store_true",
        help="no untraced run after each captured one (the capture's cost then unknown)",
    )
    p.add_argument("--dry-run", action="store_true", help="print the shuffled plan and exit")
    p.add_argument(
        "--resume",
        action="store_true",
        help="keep runs that finished in an earlier sweep into the same --out",
    )
    p.add_argument(
        "--deadline",
        type=float,
        default=0,
        help="start no new run after this many seconds (one run at least); exit 4 "
        "(continue with --resume)",
    )
    p.add_argument(
        "--no-figures", action="store_true", help="skip figures 4 and 5 (no matplotlib needed)"
    )
    p.add_argument(
        "--run-figures", action="store_true", help="also draw figures 1-3 and 5 for every capture"
    )
    p.add_argument("--profile-script", default=SweepSettings.profile_script, help=argparse.SUPPRESS)
    p.add_argument(
        "--fig5-left",
        nargs="+",
        metavar="NAME",
        help="configurations in figure 5's left panel (default reset_8 reuse_8, those run)",
    )
    p.add_argument(
        "--fig5-right",
        nargs="+",
        metavar="NAME",
        help="configurations in figure 5's right panel (default reuse_64, when run)",
    )
    a = p.parse_args(argv)
    if not (a.timeout > 0 and math.isfinite(a.timeout)):
        p.error("expected --timeout > 0 seconds, got %g" % a.timeout)
    if not (a.deadline >= 0 and math.isfinite(a.deadline)):
        p.error("expected --deadline >= 0 seconds (0: none), got %g" % a.deadline)
    if len(set(a.seeds)) != len(a.seeds):
        p.error("expected distinct --seeds, got %s" % " ".join(map(str, a.seeds)))
    a.timeout = int(a.timeout) if float(a.timeout).is_integer() else a.timeout
    return a, extra


def plan_runs(a, extra):
    """(configurations, shuffled plan); raises ConfigError or UsageError for a flag that cannot be
    used."""
    if a.configs:
        check_input_file("--configs", a.configs, "a JSON file of configurations")
    configs = select_configs(load_configs(a.configs) if a.configs else DEFAULT_CONFIGS, a.only)
    for cfg in configs.values():
        expected_steps(cfg, extra)
    for flag, names in (("--fig5-left", a.fig5_left), ("--fig5-right", a.fig5_right)):
        unknown = [n for n in names or () if n not in configs]
        if unknown:  # a name the defaults give but the sweep does not run is left out of the panel
            raise ConfigError(
                "expected %s names among the configurations run (%s), got %s"
                % (flag, ", ".join(configs), ", ".join(unknown))
            )
    return configs, make_plan(configs, a.seeds, a.order_seed)


def check_environment(a, settings, plan):
    """The binary, nsys, matplotlib and every output path, before any run; returns an error message
    or None."""
    if not (os.path.isfile(a.binary) and os.access(a.binary, os.X_OK)):
        return (
            "expected an executable --binary, got %s (build train_resnet50 or pass --binary)"
            % a.binary
        )
    if not a.no_nsys and shutil.which("nsys") is None:
        return (
            "nsys (Nsight Systems CLI) is not on PATH; add it, or pass --no-nsys to use the run "
            "reports alone"
        )
    check_outputs(settings, figures=not a.no_figures)
    check_run_outputs(plan, settings)
    # A sweep never writes over what it reads: --configs, or the binary it runs.
    inputs = [("--configs file", a.configs)] if a.configs else []
    inputs.append(("--binary", a.binary))
    for path in output_paths(settings, not a.no_figures) + run_output_paths(plan, settings):
        check_outputs_apart([("--out", path)], inputs)
    if not a.no_figures or a.run_figures:
        require_matplotlib()
    return None


def main(argv=None):
    a, extra = parse_args(argv)
    try:
        configs, plan = plan_runs(a, extra)
    except (ConfigError, UsageError) as e:
        print("sweep: error: %s" % e, file=sys.stderr)
        return USAGE
    if a.dry_run:
        for i, (name, seed) in enumerate(plan, 1):
            print(
                "%2d. %s seed %d: %s"
                % (i, name, seed, " ".join(run_args(configs[name], seed, a.data, extra)))
            )
        if not (a.no_nsys or a.no_untraced):
            print(
                "sweep: each captured run is followed by its untraced run, the same command "
                "without nsys (--no-untraced: none)",
                file=sys.stderr,
            )
        return OK
    settings = SweepSettings(
        out=a.out,
        binary=a.binary,
        data=a.data,
        extra=extra,
        seeds=a.seeds,
        order_seed=a.order_seed,
        timeout=a.timeout,
        no_nsys=a.no_nsys,
        run_figures=a.run_figures,
        resume=a.resume,
        deadline=a.deadline,
        fig5_left=a.fig5_left or SweepSettings.fig5_left,
        fig5_right=a.fig5_right or SweepSettings.fig5_right,
        profile_script=a.profile_script,
        untraced=not a.no_untraced,
    )
    try:
        error = check_environment(a, settings, plan)
    except UsageError as e:
        error = str(e)
    if error:
        print("sweep: error: %s" % error, file=sys.stderr)
        return USAGE
    try:
        results = run_sweep(plan, configs, settings)
        write_outputs(configs, results, settings, figures=not a.no_figures)
    except DeadlineReached as e:
        print("sweep: %s" % e, file=sys.stderr)
        return DEADLINE
    except OutputError as e:
        print("sweep: error: %s" % e, file=sys.stderr)
        return FAILURE
    excluded = [r for r in results if not r.aggregated]
    print(
        "sweep: %d of %d runs aggregated; table in %s"
        % (len(results) - len(excluded), len(results), os.path.join(a.out, "sweep.md"))
    )
    return FAILURE if excluded else OK


if __name__ == "__main__":
    exit_with(main, "sweep.py")
