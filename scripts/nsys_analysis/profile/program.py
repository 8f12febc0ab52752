"""The program profile.sh captures: train_resnet50 (--binary, else $TRAIN_BIN, else
build/bin/train_resnet50) with the arguments meant for it, or a command wrapped after `--`. The
binary is checked before anything runs, dry runs included, and train_resnet50 is asked for the run's
configuration itself (`--print-config`: its flags parsed and validated as a run would, then the
report's `config` object on stdout), so that profile.sh never re-parses its flag table.

--print-config comes first, before the run's flags: after them, a last flag missing its value
(`... --report`) would take it as that value, and the question would become a training run."""

import json
import os
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Optional

from ..common.exit_status import USAGE
from ..common.paths import default_train_binary
from .cli import Options
from .errors import ProfileError, UsageError
from .plan import show_command
from .runs import run_child, shell_status, start_failure

# What the binary is named after: a command whose first word's file name starts with this is
# train_resnet50, asked for its configuration and given its reports by flag.
TRAIN_NAME = "train_resnet50"
# The flag that asks it for the run's configuration.
PRINT_CONFIG = "--print-config"


@dataclass
class Program:
    """The program to capture. command: its argv; is_train: it is train_resnet50 (by its file
    name); binary_source: where the binary came from for messages ("--binary", "TRAIN_BIN", "the
    default binary"), None for a wrapped command (which is not checked before it runs)."""

    command: list[str]
    is_train: bool
    binary_source: Optional[str] = None


@dataclass(frozen=True)
class TrainConfig:
    """The parts of train_resnet50's configuration profile.sh uses: cuda_graph (nsys then traces
    graph nodes), report (the --report it writes, "" none), checkpoint_dir ("" none), resume, data
    (--data's root, "" none: no output of profile.sh may go inside the dataset) and
    torch_profiler_trace (the trace it writes, "" none)."""

    cuda_graph: bool = False
    report: str = ""
    checkpoint_dir: str = ""
    resume: bool = False
    data: str = ""
    torch_profiler_trace: str = ""


class ConfigError(Exception):
    """--print-config's answer is not the configuration; the message says what it is instead."""


def is_train(word: str) -> bool:
    """True when a command's first word names train_resnet50 (its file name starts so)."""
    return os.path.basename(word.rstrip("/")).startswith(TRAIN_NAME)


def program_of(o: Options) -> Program:
    """The program of a command line: the wrapped command, else the training binary (--binary,
    $TRAIN_BIN when set and not empty, else the repository's build/bin/train_resnet50) with its
    arguments."""
    if o.command:
        return Program(list(o.command), is_train(o.command[0]))
    if o.binary is not None:
        binary, source = o.binary, "--binary"
    else:
        binary = default_train_binary()
        source = "TRAIN_BIN" if os.environ.get("TRAIN_BIN") else "the default binary"
    return Program([binary] + o.program_args, is_train(binary), source)


def check_binary(program: Program) -> None:
    """ProfileError (exit_status.USAGE) naming where the training binary came from unless it can
    run: a path must be an executable file, a bare name a program on PATH. A wrapped command is
    not checked here."""
    if program.binary_source is None:
        return
    binary, source = program.command[0], program.binary_source
    if "/" in binary:
        if os.path.isdir(binary):
            why = "is a directory, expected the train_resnet50 executable"
        elif not os.path.exists(binary):
            why = (
                "no such file: expected an executable train_resnet50 at %s (build it, or pass "
                "--binary PATH / TRAIN_BIN)" % binary
            )
        elif not (os.path.isfile(binary) and os.access(binary, os.X_OK)):
            why = "is not an executable file"
        else:
            return
    elif shutil.which(binary) is None:
        why = "expected %s on PATH, found none (pass --binary PATH / TRAIN_BIN)" % binary
    else:
        return
    raise ProfileError("%s %s: %s" % (source, binary, why), USAGE)


def parse_config(text: str) -> TrainConfig:
    """The configuration in --print-config's stdout; ConfigError saying what the text is instead:
    "not JSON (why)", "not an object", "no boolean cuda_graph and string report"."""
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise ConfigError("not JSON (%s)" % e)
    if not isinstance(doc, dict):
        raise ConfigError("not an object")
    if not (isinstance(doc.get("cuda_graph"), bool) and isinstance(doc.get("report"), str)):
        raise ConfigError("no boolean cuda_graph and string report")

    def string(name: str) -> str:
        value = doc.get(name)
        return value if isinstance(value, str) else ""

    return TrainConfig(
        cuda_graph=doc["cuda_graph"],
        report=doc["report"],
        checkpoint_dir=string("checkpoint_dir"),
        resume=bool(doc.get("resume", False)),
        data=string("data"),
        torch_profiler_trace=string("torch_profiler_trace"),
    )


def config_command(program: Program) -> list[str]:
    """The question for the run's configuration: the binary, --print-config, then the run's flags
    (first, so that no flag of the run can take it as its value). UsageError when the run's flags
    hold --print-config themselves: =false after profile.sh's would make the question a run."""
    for word in program.command[1:]:
        if word.partition("=")[0] == PRINT_CONFIG:
            raise UsageError(
                "%s: profile.sh asks the binary %s itself, before the run; drop it from the "
                "training flags" % (word, PRINT_CONFIG)
            )
    return program.command[:1] + [PRINT_CONFIG] + program.command[1:]


def read_config(program: Program) -> TrainConfig:
    """train_resnet50's configuration for the run's flags: config_command() run (stdin and stderr
    shared, so that its own message shows; blocks until it exits). ProfileError
    (exit_status.USAGE) when it is missing, refuses the flags, or answers something else."""
    exe = program.command[0]
    if "/" in exe:
        if not (os.path.isfile(exe) and os.access(exe, os.X_OK)):
            raise ProfileError(
                "expected an executable train_resnet50 at %s, found none (build it, or pass "
                "--binary PATH / TRAIN_BIN)" % exe,
                USAGE,
            )
    elif shutil.which(exe) is None:
        raise ProfileError(
            "expected %s on PATH, found none (pass --binary PATH / TRAIN_BIN)" % exe, USAGE
        )
    argv = config_command(program)
    try:
        returncode, out = run_child(argv, stdout=subprocess.PIPE)
        status, text = shell_status(returncode), out.decode("utf-8", "replace")
    except OSError as e:
        status, why = start_failure(argv, e)
        sys.stderr.write(why)
        text = ""
    if status != 0:
        raise ProfileError(
            "%s failed (exit %d): the training flags are refused (its message above), or the "
            "binary predates --print-config" % (show_command(argv), status),
            USAGE,
        )
    try:
        return parse_config(text)
    except ConfigError as e:
        raise ProfileError(
            "expected %s to print the run's configuration as one JSON object, got %s: %s"
            % (show_command(argv), e, text.rstrip("\n")[:200]),
            USAGE,
        )
