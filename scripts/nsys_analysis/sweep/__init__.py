"""sweep.py's input-pipeline comparison: the configurations and shuffled plan, each run (retried
once, checked, analysed with capture.pipeline), and the sweep's tables and figures 4-5. Imports from
common and capture."""
