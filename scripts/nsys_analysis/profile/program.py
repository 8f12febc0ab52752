"""The program profile.sh captures: train_resnet50 (--binary, else $TRAIN_BIN, else
build/bin/train_resnet50) with the arguments meant for it, or a command wrapped after `--`. The
binary is checked before anything runs, dry runs included, and train_resnet50 is asked for the run's
configuration itself (`--print-config`: its flags parsed and validated as a run would, then the
report's `config` object on stdout), so that profile.sh never re-parses its flag table."""

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
from .errors import ProfileError
from .plan import show_command
from .runs import shell_status, start_failure

# What the binary is named after: a command whose first word's file name starts with this is
# train_resnet50, asked for its configuration and given its reports by flag.
TRAIN_NAME = "train_resnet50"


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
    graph nodes), report (the --report it writes, "" none), checkpoint_dir ("" none) and resume."""

    cuda_graph: bool = False
    report: str = ""
    checkpoint_dir: str = ""
    resume: bool = False


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
    checkpoint_dir = doc.get("checkpoint_dir")
    return TrainConfig(
        cuda_graph=doc["cuda_graph"],
        report=doc["report"],
        checkpoint_dir=checkpoint_dir if isinstance(checkpoint_dir, str) else "",
        resume=bool(doc.get("resume", False)),
    )


def read_config(program: Program) -> TrainConfig:
    """train_resnet50's configuration for the run's flags: the program run with --print-config
    (stdin and stderr shared, so that its own message shows; blocks until it exits). ProfileError
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
    argv = program.command + ["--print-config"]
    try:
        done = subprocess.run(argv, stdout=subprocess.PIPE)
        status, text = shell_status(done.returncode), done.stdout.decode("utf-8", "replace")
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
