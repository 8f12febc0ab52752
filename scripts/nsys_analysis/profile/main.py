"""profile.sh's entry point: the command line, the binary's checks and configuration, then one
process's captures or several ranks', each error turned into its message and exit status.

scripts/profile.sh runs run() with every argument (the interpreter found as the other scripts find
it); main() does the work and returns the exit status.
"""

import signal
import sys
from types import FrameType
from typing import Optional, Sequence

from ..common import files
from ..common.exit_status import FAILURE, OK, USAGE, exit_with
from .cli import HELP, check_nsys_opts, parse_args
from .errors import ProfileError, UsageError
from .plan import Commands, nsys_options
from .program import TrainConfig, check_binary, program_of, read_config
from .runs import UntracedCheckpoints, profile_ranks, profile_single

PROG = "profile.sh"
# 128 + SIGTERM: the status a shell script stopped by SIGTERM exits with.
TERMINATED = 128 + signal.SIGTERM


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


def _terminated(signum: int, frame: Optional[FrameType]) -> None:
    """SIGTERM: unwinds like an exit (the private checkpoint directory is removed), status 143."""
    raise SystemExit(TERMINATED)


def run() -> None:
    """profile.sh's process: main() on sys.argv[1:], then exits with its status; Ctrl-C ends it with
    "profile.sh: interrupted" and exit_status.INTERRUPTED, SIGTERM with 143 (128 + 15), each after
    the clean-up. Children are not signalled here: in profile.sh's process group, they get the
    terminal's Ctrl-C themselves."""
    signal.signal(signal.SIGTERM, _terminated)
    exit_with(lambda: main(sys.argv[1:]), PROG)
