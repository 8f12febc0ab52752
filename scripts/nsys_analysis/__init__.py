"""Analysis of Nsight Systems captures of the ResNet-50 workload, and the sweep and benchmarks built on
it: scripts/analyze.py, scripts/sweep.py and scripts/benchmarks.py are command lines over this package.

  records       named records of one export (ranges, kernels, copies, memsets, graphs recorded whole,
                runtime calls), the range names, the window
  export        reading an nsys SQLite export into an Export
  report        run reports (train_resnet50's JSON, seed_workload.py's line)
  intervals     interval arithmetic on ns times, the span holding a time (SpanIndex), grouped duration
                statistics
  phases        the main thread's step-level phases, and the GPU time of the work launched in each
  idle_gaps     where and why the device sat idle inside the window; the host stalls among those gaps
  kernels       layout-conversion kernels and short kernel labels
  summary       summary.json's numbers (compute_summary)
  checks        the capture checks, and the cross-check with nsys stats CSVs
  formatting    the one number formatter of the scripts' tables
  markdown      summary.md, and ranks.md of several ranks
  figures       the article's figures
  ranks         a data-parallel run's ranks compared: NCCL kernels per step, exposed communication,
                stragglers, every rank's checks
  pipeline      one capture end to end (analyze), and several ranks' (analyze_ranks)
  runner        running a command with a time limit that stops its whole process group
  paths         where profile.sh and the default train_resnet50 are
  sweep_plan    the sweep's configurations and shuffled run plan
  sweep_runs    one sweep run (attempts, report, capture checks) and the whole plan (--resume, --deadline)
  sweep_tables  the sweep's rows, sweep.md, the CSV files, sweep.json and figures 4-5
  bench_runs    how benchmarks.py runs the programs, directly or under profile.sh; its JSON files
  bench_commands  benchmarks.py's measuring commands (checks, compare, scan, loader, experiments, ncu)
  ncu           Nsight Compute's raw CSV, grouped by kernel kind
  bench_tables  benchmarks.py's `table`
"""
