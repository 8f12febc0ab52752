"""scripts/experiments/benchmarks.py's GPU measurements: running the programs (directly, or under
profile.sh and analysed with capture.pipeline), the measuring commands, Nsight Compute's CSV, and
the Markdown tables of docs/BENCHMARKS.md. Imports from common and capture."""
