"""Analysis of Nsight Systems captures of the ResNet-50 workload, the captures themselves, and the
sweep and benchmarks built on them: scripts/analyze.py, scripts/sweep.py,
scripts/kernel_families.py and scripts/experiments/benchmarks.py are command lines over this
package, scripts/profile.sh a thin wrapper around profile/.

Five sub-packages, each importing only from those listed before it (tests/scripts/test_layout.py
checks this):

  common/    what every script shares, no analysis in it
    argtypes      argparse types the scripts share (positive_int, unit_fraction)
    exit_status   the scripts' exit statuses, one name each (OK, FAILURE, USAGE, CHECKS_FAILED,
                  DEADLINE)
    files         checks of input and output paths before any work; writes that follow symlinks,
                  write /dev/null in place and replace only regular files, atomically (write_text,
                  atomic_output, open_stream)
    formatting    the one number formatter of the scripts' tables, and the Markdown table
    plotting      matplotlib (Agg) and the figures' style and colours; saving a figure (save_figure)
    paths         where profile.sh and the default train_resnet50 are
    runner        running a command with a time limit that stops its whole process group

  capture/   one nsys export (analyze.py), several ranks' exports of one run, several captures of
             one configuration
    records       named records of one export (ranges, kernels, copies, memsets, graphs recorded
                  whole, runtime calls), the range names, the window
    export        reading an nsys SQLite export into an Export (thread names and profiler overhead
                  too)
    report        run reports (train_resnet50's JSON, seed_workload.py's line)
    intervals     interval arithmetic on ns times, the span holding a time (SpanIndex), grouped
                  duration statistics
    epochs        the epoch boundary in a window across an epoch's end: its eval and checkpoint
                  ranges, which are no steps, and what they cost against a step (summary.json's
                  epoch_boundary)
    phases        the main thread's step-level phases, and the GPU time of the work launched in each
    idle_gaps     where and why the device sat idle inside the window; the host stalls among those
                  gaps
    kernels       layout-conversion kernels, kernel families and short kernel labels
    cost          what the capture itself cost: traced vs untraced throughput and host time per
                  phase, runtime calls per thread and step, nsys's own overhead, the idle time the
                  tracer explains (summary.json's capture_cost)
    summary       summary.json's numbers (compute_summary)
    checks        the capture checks, and the cross-check with nsys stats CSVs
    markdown      summary.md, ranks.md of several ranks, repeats.md of several captures
    figures       the article's figures of one capture (1-3, 5, 6) and the ranks figure
    ranks         a data-parallel run's ranks compared: NCCL kernels per step, exposed
                  communication, stragglers, every rank's checks
    repeats       several captures of one configuration (profile.sh --repeat N): the median capture,
                  and the spread of the headline figures across them
    pipeline      one capture end to end (analyze), several ranks' (analyze_ranks), several captures
                  of one configuration (analyze_repeats); their outputs

  sweep/     sweep.py: the input-pipeline comparison over configurations and seeds
    plan          the sweep's configurations and shuffled run plan
    runs          one sweep run (attempts, report, capture checks) and the whole plan (--resume,
                  --deadline)
    tables        the sweep's rows, sweep.md, the CSV files, sweep.json
    figures       figures 4 and 5 of a sweep

  bench/     benchmarks.py: the GPU measurements of docs/BENCHMARKS.md
    runs          how benchmarks.py runs the programs, directly or under profile.sh; its JSON files
    commands      benchmarks.py's measuring commands (checks, compare, scan, loader, experiments,
                  ncu)
    ncu           Nsight Compute's raw CSV, grouped by kernel kind
    tables        benchmarks.py's `table`

  profile/   profile.sh: captures under nsys, their untraced runs, exports, stats and analyses
    errors        the two ways profile.sh stops: an error with its exit status, a usage error
    cli           profile.sh's command line as it has always been parsed, and its --help text
    program       the program captured (train_resnet50 or a wrapped command), the binary's checks,
                  its configuration asked of it (--print-config)
    plan          the commands as argv lists and shell lines (nsys profile, the untraced run,
                  export, stats, the --nproc launcher, analyze.py); a dry run's list of them
    outputs       every output's name, their checks before anything runs, stale outputs removed,
                  the run reports copied or saved, the closing listing
    runs          the logged runs, the untraced run's checkpoint directory, one process's captures
                  and several ranks' capture
    main          the entry point: the steps in order, each error's message and exit status

sweep/, bench/ and profile/ import from common/ and capture/, never from each other (sweep.py and
benchmarks.py run profile.sh as a program).
"""
