"""profile.sh's command line, parsed as the shell script always parsed it (no abbreviations, flags
and the training binary's arguments in any order, `--` before a wrapped command), its usage errors
(each naming the flag) and the --help text, which is the documentation users read."""

import argparse
import re
from dataclasses import dataclass, field
from typing import Optional, Sequence

from ..common.argtypes import positive_int
from .errors import UsageError

HELP = """\
usage: scripts/profile.sh --prefix PREFIX [--binary PATH] [--nproc N] [--repeat N] [--no-untraced]
                          [--lean] [--nsys-opt OPT]... [--analyze] [--dry-run]
                          [PROGRAM ARGS...] [-- PROGRAM ARGS... | -- COMMAND [ARGS...]]

Capture train_resnet50 (or any command) under the article's Nsight Systems options, run it again
without nsys (the untraced run), then export the capture to SQLite and the four nsys stats CSV
summaries.

  --prefix PREFIX  names every output: PREFIX.nsys-rep, PREFIX.sqlite, PREFIX_<report>.csv,
                   PREFIX.json (run report), PREFIX.log (program and nsys output),
                   PREFIX.untraced.json (the untraced run's report) and PREFIX.untraced.log (its
                   output). No '%' in it (nsys profile reads %p, %q{VAR}, ... in its --output)
  --binary PATH    the training binary (default: $TRAIN_BIN, else build/bin/train_resnet50)
  --nproc N        N (1 to 64) data-parallel ranks on this machine, one nsys per rank:
                     torchrun --standalone --nproc-per-node N --no-python nsys profile ...
                       --output=PREFIX.rank%q{RANK} PROGRAM ARGS... --report PREFIX.json
                   (scripts/launch_local.sh N -- nsys profile ... when torchrun is not on PATH, or
                   with PROFILE_LAUNCHER=local; PROFILE_LAUNCHER=torchrun insists on torchrun).
                   Outputs are per rank, PREFIX.rank<r> in place of PREFIX (train_resnet50 writes
                   PREFIX.rank<r>.json itself), except the one PREFIX.log of all ranks; the
                   untraced run is the same launcher line without nsys, each rank's report
                   PREFIX.untraced.rank<r>.json
  --repeat N       N captures, each followed by its untraced run (capture 1, untraced 1, capture 2,
                   ...; default 1). With N > 1 capture k's outputs are named PREFIX.k:
                   PREFIX.k.nsys-rep, .sqlite, .json, .untraced.json, PREFIX.k_<report>.csv;
                   PREFIX.log holds every capture's output, PREFIX.untraced.log every untraced
                   run's. Not with --nproc
  --no-untraced    no untraced run
  --lean           nsys --trace=cuda,nvtx: the article's options without the OS runtime trace
                   (osrt), which no analysis reads (it shows pthread and syscall waits in the GUI
                   only)
  --nsys-opt OPT   one more nsys profile option, as given (repeatable), e.g.
                   --osrt-threshold=10000 or --cuda-flush-interval=10000; what each costs is in
                   docs/capturing.md
  --analyze        also run scripts/analyze.py on the export, with the untraced run's report (into
                   PREFIX_analysis/); with --repeat N > 1, each capture's summary into
                   PREFIX.k_analysis/ (with every untraced report), the median capture by traced
                   images/s (the lower middle one of an even N) in full, figures too, into
                   PREFIX_analysis/, and the spread of the headline figures across the captures
                   into PREFIX_repeats.json and PREFIX_repeats.md; with --nproc, each rank into
                   PREFIX.rank<r>_analysis/ and the ranks compared in PREFIX_ranks_analysis/
                   (ranks.md)
  --dry-run        print every command in order (captures, untraced runs, exports, analyses), run
                   nothing (but train_resnet50 --print-config, see below)
  -h, --help       this text

Arguments other than these, and arguments after `--` that start with `-`, go to the training binary.
Before anything runs (--dry-run included), the binary is asked for the run's configuration with
--print-config before those arguments (so that a last flag missing its value is refused, never run;
--print-config among them is refused): flags it refuses stop here (exit 2, its message passed on).
When the configuration has cuda_graph, nsys also gets --cuda-graph-trace=node: each replay's
kernels, copies and memsets as their own records (by default nsys records a replay as one graph
range, not its kernels), unless --nsys-opt gives --cuda-graph-trace itself.
After `--`, a first word that is not a flag starts a different command to wrap instead, e.g.
  scripts/profile.sh --prefix out/py_reuse8 -- python3 peer/seed_workload.py ROOT --steps 8
train_resnet50 gets `--report PREFIX.json` unless its configuration has a report (then that report
is copied to PREFIX.json; with --nproc each rank's, REPORT with .rank<r> before its extension, to
PREFIX.rank<r>.json);
for other commands the last stdout line that is a JSON object becomes PREFIX.json (not with
--nproc: the ranks' output is interleaved in PREFIX.log).

The untraced run, right after its capture, is the same command without nsys: Nsight Systems' CUDA
trace slows every runtime call, and a thread making hundreds a step (the GPU decode stage) can
leave a traced device starved that runs at its ceiling untraced. train_resnet50 gets
`--report PREFIX.untraced.json` in place of any --report of its arguments; a wrapped command's last
JSON stdout line becomes PREFIX.untraced.json (none under --nproc). analyze.py reads it
(--untraced): summary.md's "Capture cost" says what the tracing cost and whether the capture is
tracer-bound. The untraced run never shares the capture's --checkpoint-dir: it gets a private
temporary directory instead (with --resume, holding a copy of the checkpoint the capture resumed
from), removed after it.

The binary is checked first, --dry-run included: a path must be an executable file, a bare name a
program on PATH. Then, --dry-run included, before anything is removed: no output may lie inside the
dataset --data reads, and the run's own --report, --torch-profiler-trace (with --nproc each rank's)
and --checkpoint-dir may not be one of PREFIX's outputs (--report PREFIX.json, the run report
itself, is fine): each is a usage error. Before a capture, every output (PREFIX.nsys-rep, .sqlite,
.json, .untraced.json, .log, .untraced.log, the CSVs; per rank with --nproc, per capture with
--repeat) is checked: a directory, FIFO or socket there stops the run (symlinks are followed,
/dev/null is fine). Stale outputs of an earlier run are removed first (a symlink's target, the link
kept; never a device or FIFO); PREFIX.json is written atomically (beside its target, then renamed
over it). The closing listing names the files that are there: nsys stats writes no CSV for a report
without data (a warning names it).

SIGINT (Ctrl-C), SIGTERM (`kill`, a scheduler) and SIGHUP (a closed terminal), sent to profile.sh
alone or to its process group, are passed on to the command running (nsys and the program, the
launcher and its ranks, in a process group of their own), which gets 30 s to end (nsys writes its
capture out) before SIGKILL; then profile.sh stops (with one line for SIGINT and SIGTERM), nothing
of its left running.

Exit status: the program's when it fails, traced or untraced (traced: nsys profile's, which is
the program's or nsys's own failure, the log says which; with --nproc, the launcher's); 2 usage
errors, nsys, the launcher, the binary (missing, a directory, not executable) or a Python 3 to run
profile.sh missing, flags the binary refuses, an output path that cannot be written or that the
checks above refuse; 1 no capture (.nsys-rep, of any rank) or export (.sqlite) produced, export /
stats / analyze.py failed, or PREFIX.json could not be written; 130 SIGINT, 143 SIGTERM,
129 SIGHUP.
"""

# The flags that take a value, as `--flag VALUE` or `--flag=VALUE`.
_VALUED = ("--prefix", "--binary", "--nproc", "--repeat", "--nsys-opt")
# What a count may be: 1 to 6 decimal digits (leading zeros allowed, no sign, no spaces).
_COUNT = re.compile(r"[0-9]{1,6}")
# The most ranks --nproc starts on this machine: scripts/launch_local.sh's bound (N in 1..64), kept
# whatever the launcher, so that torchrun and the local launcher take the same values.
MAX_NPROC = 64


@dataclass
class Options:
    """profile.sh's command line. binary: --binary's value (None: not given; $TRAIN_BIN or the
    default then); nproc: --nproc's (None: one process); program_args: the training binary's
    arguments; command: the wrapped command after `--` ([] when none); help: -h or --help was met
    (nothing after it was parsed)."""

    prefix: str = ""
    binary: Optional[str] = None
    nproc: Optional[int] = None
    repeat: int = 1
    untraced: bool = True
    lean: bool = False
    nsys_opts: list[str] = field(default_factory=list)
    analyze: bool = False
    dry_run: bool = False
    program_args: list[str] = field(default_factory=list)
    command: list[str] = field(default_factory=list)
    help: bool = False


def count(flag: str, text: str, what: str) -> int:
    """The value of a count flag (--nproc, --repeat) in base 10; UsageError naming flag, what it
    counts and the text unless it is a positive integer of at most 6 digits."""
    if _COUNT.fullmatch(text):
        try:
            return int(positive_int(text))
        except argparse.ArgumentTypeError:
            pass  # 0, 00, ...: the message below
    raise UsageError("expected %s to be a positive integer (%s), got '%s'" % (flag, what, text))


def parse_args(argv: Sequence[str]) -> Options:
    """Options from profile.sh's arguments; UsageError for a flag without its value, a missing or
    directory --prefix, a bad count, --repeat N > 1 with --nproc, or arguments of the training
    binary (or --binary) beside a wrapped command. -h/--help ends the parse at once (help=True)."""
    o = Options()
    raw: dict[str, str] = {}  # the count flags' texts, checked once all are read
    args = list(argv)
    i = 0
    while i < len(args):
        arg = args[i]
        name, eq, value = arg.partition("=")
        if arg in _VALUED:
            if i + 1 >= len(args):
                raise UsageError("expected a value after %s" % arg)
            name, value = arg, args[i + 1]
            i += 2
        elif eq and name in _VALUED:
            i += 1
        else:
            i += 1
            if arg == "--":
                break
            if arg in ("-h", "--help"):
                o.help = True
                return o
            if arg == "--no-untraced":
                o.untraced = False
            elif arg == "--lean":
                o.lean = True
            elif arg == "--analyze":
                o.analyze = True
            elif arg == "--dry-run":
                o.dry_run = True
            else:
                o.program_args.append(arg)
            continue
        if name == "--prefix":
            o.prefix = value
        elif name == "--binary":
            o.binary = value
        elif name == "--nsys-opt":
            o.nsys_opts.append(value)
        else:
            raw[name] = value
    rest = args[i:]  # after `--` ([] when there is none)
    if rest and rest[0].startswith("-"):
        o.program_args += rest
    else:
        o.command = rest
    _check(o, raw)
    return o


def _check(o: Options, raw: dict[str, str]) -> None:
    """The checks made once every argument is read, in profile.sh's order; sets nproc and
    repeat."""
    if not o.prefix:
        raise UsageError(
            "expected --prefix PREFIX (outputs are named PREFIX.nsys-rep, PREFIX.sqlite, ...)"
        )
    if o.prefix.endswith("/"):
        raise UsageError("expected --prefix to name a file prefix, got directory '%s'" % o.prefix)
    # nsys profile reads % in --output as a pattern (%p the pid, %q{VAR} a variable, ...): the
    # capture would land elsewhere than the PREFIX.nsys-rep every later step reads.
    if "%" in o.prefix:
        raise UsageError(
            "expected --prefix without '%%' (nsys profile expands %%p, %%q{VAR}, ... in its "
            "--output), got '%s'" % o.prefix
        )
    if "--nproc" in raw:
        o.nproc = count("--nproc", raw["--nproc"], "ranks on this machine")
        if o.nproc > MAX_NPROC:
            raise UsageError(
                "expected --nproc to be at most %d (ranks on this machine), got '%s'"
                % (MAX_NPROC, raw["--nproc"])
            )
    o.repeat = count("--repeat", raw.get("--repeat", "1"), "captures, each with its untraced run")
    # Repeated captures of several ranks would need a ranks analysis per repeat and a spread of
    # ranks comparisons; one profile.sh per repeat, each with its own --prefix, does it.
    if o.nproc is not None and o.repeat > 1:
        raise UsageError(
            "--repeat %d conflicts with --nproc %d: repeated captures of several ranks are not "
            "supported (run profile.sh once per repeat, each with its own --prefix)"
            % (o.repeat, o.nproc)
        )
    if o.command:
        wrapped = " ".join(o.command)
        if o.program_args:
            raise UsageError(
                "arguments before -- (%s) apply only to the training binary, got a command after "
                "--: %s" % (" ".join(o.program_args), wrapped)
            )
        if o.binary is not None:
            raise UsageError("--binary conflicts with the command after --: %s" % wrapped)


def check_nsys_opts(values: Sequence[str]) -> None:
    """UsageError unless every --nsys-opt value is an option (starts with -). profile.sh checks
    them after the binary, before asking it for its configuration."""
    for value in values:
        if not value.startswith("-"):
            raise UsageError(
                "expected --nsys-opt to be an nsys profile option (starting with -), got '%s'"
                % value
            )
