"""scripts/profile.sh's work: capturing train_resnet50 (or a wrapped command) under Nsight Systems,
its untraced runs, the exports, stats and analyses, in one process or on several ranks, several
times over (--repeat). profile.sh is a thin wrapper that finds an interpreter and runs
main.run() with every argument. Imports from common and capture only.

  errors    the two ways profile.sh stops: an error with its exit status, a usage error
  cli       the command line as profile.sh has always parsed it, and its --help text
  program   the program captured (train_resnet50 or a wrapped command), the binary's checks, its
            configuration asked of it (--print-config)
  plan      the commands, as argv lists and as shell lines: nsys profile, the untraced run, export,
            stats, the launcher of --nproc, analyze.py; a dry run's list of them
  outputs   every output's name, their checks before anything runs (the dataset, the program's own
            outputs), stale outputs removed, the run reports copied or saved, the closing listing
            of what was written
  runs      running them: each child in a process group of its own, SIGINT and SIGTERM passed on
            to it, the logged runs (output on stdout and in the log), the untraced run's
            checkpoint directory, one process's captures and several ranks' capture
  main      the entry point: the steps in order, each error's message and exit status
"""
