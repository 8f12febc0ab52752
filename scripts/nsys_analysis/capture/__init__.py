"""One Nsight Systems capture: reading its SQLite export and run report, the numbers, checks, tables
and figures of summary.json / summary.md (what the capture itself cost included, against untraced
runs), several ranks' captures of one run compared (ranks.json), and several captures of one
configuration (repeats.json). pipeline.analyze(), analyze_ranks() and analyze_repeats() are
analyze.py's work. Imports from common only."""
