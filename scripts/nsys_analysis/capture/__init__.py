"""One Nsight Systems capture: reading its SQLite export and run report, the numbers, checks, tables and
figures of summary.json / summary.md, and several ranks' captures of one run compared (ranks.json).
pipeline.analyze() and analyze_ranks() are analyze.py's work. Imports from common only."""
