"""Analysis of Nsight Systems captures of the ResNet-50 workload, shared by scripts/analyze.py,
scripts/sweep.py and scripts/benchmarks.py.

  records     named records of one export (ranges, kernels, copies, memsets, runtime calls), the window
  export      reading an nsys SQLite export into an Export
  report      run reports (train_resnet50's JSON, seed_workload.py's line)
  intervals   interval arithmetic on ns times, grouped duration statistics
  idle_gaps   where and why the device sat idle inside the window
  kernels     layout-conversion kernels and short kernel labels
  summary     summary.json's numbers (compute_summary)
  checks      the capture checks, and the cross-check with nsys stats CSVs
  formatting  the one number formatter of the scripts' tables
  markdown    summary.md
  figures     the article's figures
  pipeline    one capture end to end (analyze)
  runner      running a command with a time limit that stops its whole process group
"""
