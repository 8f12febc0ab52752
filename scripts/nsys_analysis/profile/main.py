"""profile.sh's entry point: the command line, the binary's checks and configuration, the outputs'
checks against the program's inputs and outputs, then one process's captures or several ranks',
each error turned into its message and exit status.

scripts/profile.sh runs run() with every argument (the interpreter found as the other scripts find
it); main() does the work and returns the exit status.
"""

import sys
from typing import Sequence

from ..common import files
from ..common.exit_status import FAILURE, OK, USAGE, exit_with
from .cli import HELP, check_nsys_opts, parse_args
from .errors import ProfileError, UsageError
from .outputs import check_given_outputs, check_outside_dataset, command_outputs
from .plan import Commands, nsys_options
from .program import TrainConfig, check_binary, program_of, read_config
from .runs import UntracedCheckpoints, handle_stop_signals, profile_ranks, profile_single

PROG = "profile.sh"


def error(message: str) -> None:
    """One line on stderr: "profile.sh: error: MESSAGE"."""
    sys.stderr.write("%s: error: %s\n" % (PROG, message))


def main(argv: Sequence[str]) -> int:
    """profile.sh with arguments argv; returns its exit status: OK, the profiled program's when it
    failed, exit_status.USAGE for what could be fixed before anything ran, exit_status.FAILURE for
    a run without its outputs. The untraced run's private checkpoint directory is removed however
    it ends."""
    try:
        o = parse_args(argv)
        if o.help:
            sys.stdout.write(HELP)
            return OK
        program = program_of(o)
        check_binary(program)
        check_nsys_opts(o.nsys_opts)
        config = read_config(program) if program.is_train else TrainConfig()
        # Before anything is removed or runs (dry runs too): no output inside the dataset, none
        # that is a file the program writes by its own flags.
        outputs = command_outputs(o)
        check_outside_dataset(o.prefix, outputs, config.data)
        given = [
            ("--report", config.report),
            ("--torch-profiler-trace", config.torch_profiler_trace),
            ("--checkpoint-dir", config.checkpoint_dir),
        ]
        check_given_outputs(o, given, outputs)
        checkpoints = None
        private = ""
        if program.is_train and o.untraced and config.checkpoint_dir:
            if o.dry_run:
                private = UntracedCheckpoints.placeholder()
            else:
                checkpoints = UntracedCheckpoints.create(config.checkpoint_dir, config.resume)
                private = checkpoints.path
        commands = Commands(
            program.command,
            program.is_train,
            nsys_options(o.lean, o.nsys_opts, config.cuda_graph),
            config.report,
            private,
            config.resume,
        )
        try:
            if o.nproc is not None:
                return profile_ranks(o, commands, checkpoints)
            return profile_single(o, commands, checkpoints)
        finally:
            if checkpoints is not None:
                checkpoints.remove()
    except UsageError as e:
        error(e.message)
        sys.stderr.write("run scripts/profile.sh --help for usage\n")
        return USAGE
    except ProfileError as e:
        error(e.message)
        return e.status
    except files.OutputError as e:
        error(str(e))
        return FAILURE


def _stoppable_main(argv: Sequence[str]) -> int:
    """main(argv) with the stop signals handled by runs.handle_stop_signals()."""
    handle_stop_signals()
    return main(argv)


def run() -> None:
    """profile.sh's process: main() on sys.argv[1:], then exits with its status. SIGINT (Ctrl-C,
    or sent to profile.sh alone), SIGTERM and SIGHUP are passed on to the running child's process
    group (each child has its own: see runs.py), which is waited for (SIGKILL after
    runs.STOP_GRACE_S); then, after the clean-up (the private checkpoint directory removed),
    exit_with()'s one line, "profile.sh: interrupted" and 130, or "profile.sh: terminated" and 143;
    129 for SIGHUP."""
    exit_with(lambda: _stoppable_main(sys.argv[1:]), PROG)
