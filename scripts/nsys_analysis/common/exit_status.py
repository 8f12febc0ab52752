"""The exit statuses of the Python scripts (analyze.py, sweep.py, benchmarks.py, kernel_families.py,
bench_batchnorm.py, learning_curve.py, reference_epochs.py), one name each. The project's table of
every program's and script's statuses is lib/core/exit_status.h's, and docs/failures.md's; a test
checks these values against that page's table.

Each script uses the subset its docstring lists.
"""

OK = 0
"""Done: every output written (analyze.py: checks reported; sweep.py: every run aggregated)."""

FAILURE = 1
"""Bad data or a failed run: a run that failed or failed a check (sweep.py, benchmarks.py), a tool
or program missing (benchmarks.py; bench_batchnorm.py: PyTorch, torchvision or a CUDA device), an
unreadable result file, an output that could not be written, or matplotlib missing for the
figures."""

USAGE = 2
"""A bad command line or input named by it: a flag's value, a missing, unreadable or unusable input
file (analyze.py: also an export or report it cannot use), an output path that cannot be written."""

CHECKS_FAILED = 3
"""analyze.py --check: a capture check failed or could not be evaluated."""

DEADLINE = 4
"""sweep.py --deadline: the time ran out before every run; rerun with --resume to finish."""

INTERRUPTED = 130
"""128 + SIGINT (docs/failures.md's "128 + N" row): stopped by Ctrl-C; one line says so, not a
traceback."""

TERMINATED = 143
"""128 + SIGTERM (the same row): stopped by `kill`, a scheduler or a timeout; as Ctrl-C, after the
same cleanup."""

# Every status above by name, for tests and tables.
ALL = {
    "OK": OK,
    "FAILURE": FAILURE,
    "USAGE": USAGE,
    "CHECKS_FAILED": CHECKS_FAILED,
    "DEADLINE": DEADLINE,
    "INTERRUPTED": INTERRUPTED,
    "TERMINATED": TERMINATED,
}


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the script is, so that whatever undoes a Ctrl-C (a temporary tree
    removed, a child process stopped) undoes it too."""


def _raise_terminated(signum, frame):
    raise Terminated()


def exit_with(main, prog):
    """sys.exit(main()); on Ctrl-C (KeyboardInterrupt, after whatever cleanup it unwound through)
    one line, "PROG: interrupted", and INTERRUPTED; on SIGTERM the same cleanup, "PROG: terminated"
    and TERMINATED."""
    import signal
    import sys

    signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        status = main()
    except Terminated:
        sys.stderr.write("\n%s: terminated\n" % prog)
        status = TERMINATED
    except KeyboardInterrupt:
        sys.stderr.write("\n%s: interrupted\n" % prog)
        status = INTERRUPTED
    sys.exit(status)
