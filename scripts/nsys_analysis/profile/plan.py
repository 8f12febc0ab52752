"""The commands profile.sh runs, as argv lists, and each as the shell line it prints (a dry run
prints them all in order): the capture (nsys profile around the program), the untraced run, the
export and stats of each capture, the launcher of --nproc N, and analyze.py. Nothing here runs or
reads anything."""

import os
import re
from dataclasses import dataclass
from typing import Optional, Sequence

from ..common.paths import SCRIPTS_DIR
from .errors import UsageError

# The article's nsys profile options: CUDA, NVTX and the OS runtime traced, no sampling or context
# switches, the capture range the program's cudaProfilerStart/Stop calls.
NSYS_PROFILE_OPTS = (
    "--trace=cuda,nvtx,osrt",
    "--sample=none",
    "--cpuctxsw=none",
    "--capture-range=cudaProfilerApi",
    "--capture-range-end=stop",
)
# --lean's trace: without the OS runtime, which no analysis reads.
LEAN_TRACE = "--trace=cuda,nvtx"
# Added for a run whose configuration has cuda_graph, unless --nsys-opt sets the level itself.
GRAPH_NODES = "--cuda-graph-trace=node"
# The nsys stats reports, each written to PFX_<report>.csv.
STATS_REPORTS = ("nvtx_sum", "cuda_gpu_kern_sum", "cuda_gpu_mem_time_sum", "cuda_api_sum")
ANALYZE_PY = os.path.join(SCRIPTS_DIR, "analyze.py")
LAUNCH_LOCAL = os.path.join(SCRIPTS_DIR, "launch_local.sh")
LAUNCHERS = ("torchrun", "local")
# The name of the untraced run's private checkpoint directory in $TMPDIR (tempfile fills in the
# rest; a dry run shows XXXXXXXX).
CHECKPOINTS_PREFIX = "profile_sh_checkpoints."

# Words shown as they are: no character a shell would act on. {NAME} (nsys's %q{RANK}) needs no
# quotes: braces expand only around a comma or `..`.
_PLAIN = re.compile(r"(?:[A-Za-z0-9_./=,:@%+-]|\{[A-Za-z0-9_]*\})+")
# The characters bash's printf %q puts a backslash before.
_BACKSLASHED = frozenset(" \t\n!\"$&'()*,;<>?[\\]^`{|}")
# Inside $'...': the characters with a letter escape.
_ANSI_C = {
    "\a": "\\a",
    "\b": "\\b",
    "\x1b": "\\E",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
    "\v": "\\v",
    "\\": "\\\\",
    "'": "\\'",
}


def shell_word(word: str) -> str:
    """word as a shell reads it back: as it is when plain, else quoted as bash's printf %q quotes
    (in a UTF-8 locale): '' for nothing, $'...' when a character is not printable, else a backslash
    before each character the shell would act on."""
    if _PLAIN.fullmatch(word):
        return word
    if not word:
        return "''"
    if not word.isprintable():
        out = []
        for ch in word:
            if ch in _ANSI_C:
                out.append(_ANSI_C[ch])
            elif ch.isprintable():
                out.append(ch)
            else:
                out.extend("\\%03o" % b for b in ch.encode("utf-8", "surrogateescape"))
        return "$'%s'" % "".join(out)
    out = []
    for i, ch in enumerate(word):
        tilde = ch == "~" and (i == 0 or word[i - 1] in ":=")
        if ch in _BACKSLASHED or (ch == "#" and i == 0) or tilde:
            out.append("\\")
        out.append(ch)
    return "".join(out)


def show_command(argv: Sequence[str]) -> str:
    """A command as one line that a shell runs as the same argv (words quoted only where
    needed)."""
    return " ".join(shell_word(word) for word in argv)


def nsys_options(lean: bool, extra: Sequence[str], cuda_graph: bool) -> list[str]:
    """nsys profile's options: the article's (--lean: without osrt), then the --nsys-opt values as
    given, then --cuda-graph-trace=node for a CUDA-graph run unless an --nsys-opt value sets
    --cuda-graph-trace itself."""
    opts = ([LEAN_TRACE] + list(NSYS_PROFILE_OPTS[1:])) if lean else list(NSYS_PROFILE_OPTS)
    opts += extra
    if cuda_graph and " --cuda-graph-trace" not in " " + " ".join(extra):
        opts.append(GRAPH_NODES)
    return opts


def capture_prefixes(prefix: str, repeat: int) -> list[str]:
    """The prefix of each capture's outputs: PREFIX itself for one, PREFIX.1 ... PREFIX.N for
    --repeat N > 1."""
    return [prefix] if repeat == 1 else ["%s.%d" % (prefix, k) for k in range(1, repeat + 1)]


def rank_prefix(prefix: str, rank: int) -> str:
    """The prefix of one rank's outputs under --nproc: PREFIX.rank<r>."""
    return "%s.rank%d" % (prefix, rank)


def rank_path(path: str, rank: int) -> str:
    """path with .rank<r> before its extension, as train_resnet50 names each rank's report
    (lib/distributed/launch_env.cpp, rank_output_path: out/run.json -> out/run.rank0.json, out/run
    -> out/run.rank0, out/.hidden -> out/.hidden.rank0)."""
    directory, base = path.rpartition("/")[0::2]
    stem, dot, ext = base.rpartition(".")
    if not dot or not stem:
        return "%s.rank%d" % (path, rank)
    return "%s%s.rank%d.%s" % (directory + "/" if "/" in path else "", stem, rank, ext)


def choose_launcher(setting: Optional[str], torchrun_on_path: bool) -> str:
    """The launcher of --nproc: PROFILE_LAUNCHER's torchrun or local; auto (or unset or empty)
    picks torchrun when it is on PATH, else local (scripts/launch_local.sh). UsageError for any
    other value."""
    setting = setting or "auto"
    if setting == "auto":
        return "torchrun" if torchrun_on_path else "local"
    if setting not in LAUNCHERS:
        raise UsageError(
            "expected PROFILE_LAUNCHER to be torchrun, local or auto, got '%s'" % setting
        )
    return setting


def launcher_command(launcher: str, nproc: int, argv: Sequence[str]) -> list[str]:
    """argv started on nproc ranks of this machine by the launcher (torchrun or local)."""
    if launcher == "torchrun":
        return ["torchrun", "--standalone", "--nproc-per-node", str(nproc), "--no-python"] + list(
            argv
        )
    return [LAUNCH_LOCAL, str(nproc), "--"] + list(argv)


def export_command(pfx: str) -> list[str]:
    """PFX.nsys-rep exported to PFX.sqlite."""
    return [
        "nsys",
        "export",
        "--type=sqlite",
        "--force-overwrite=true",
        "--output=%s.sqlite" % pfx,
        pfx + ".nsys-rep",
    ]


def stats_command(pfx: str) -> list[str]:
    """PFX.sqlite's stats reports, each into PFX_<report>.csv."""
    return [
        "nsys",
        "stats",
        "--report=" + ",".join(STATS_REPORTS),
        "--format=csv",
        "--force-overwrite=true",
        "--output=" + pfx,
        pfx + ".sqlite",
    ]


def _flagged(flag: str, values: Sequence[str]) -> list[str]:
    """[flag, v1, flag, v2, ...]."""
    return [word for value in values for word in (flag, value)]


@dataclass
class Commands:
    """The program's commands: its capture under nsys and its untraced run.

    program: the program's argv; is_train: it is train_resnet50 (it gets --report by flag, its
    untraced run its own report and checkpoints); nsys_opts: nsys profile's options
    (nsys_options()); given_report: the --report its configuration has ("" none: profile.sh
    gives one); untraced_checkpoints: the untraced run's private --checkpoint-dir ("" when the run
    has none); resume: the capture resumes, so the untraced run resumes from its private directory
    too."""

    program: list[str]
    is_train: bool
    nsys_opts: list[str]
    given_report: str = ""
    untraced_checkpoints: str = ""
    resume: bool = False

    def traced(self, report: str) -> list[str]:
        """The program of a capture: train_resnet50 gets --report REPORT unless its configuration
        has a report of its own (copied to REPORT afterwards)."""
        if self.is_train and not self.given_report:
            return self.program + ["--report", report]
        return list(self.program)

    def nsys_profile(self, output: str, report: str) -> list[str]:
        """The capture: nsys profile writing OUTPUT.nsys-rep around traced(report)."""
        return (
            ["nsys", "profile"]
            + self.nsys_opts
            + ["--force-overwrite=true", "--output=" + output]
            + self.traced(report)
        )

    def untraced(self, report: str) -> list[str]:
        """The untraced run: a wrapped command as it is; train_resnet50 with any --report of its
        arguments removed and --report REPORT added (its own report, whatever the user's says), its
        --checkpoint-dir, --resume and --start-over replaced by the private directory (resumed from
        when the capture resumes)."""
        if not self.is_train:
            return list(self.program)
        out = self.program[:1]
        skip = False
        for word in self.program[1:]:
            if skip:
                skip = False
                continue
            name, eq, _ = word.partition("=")
            if name in ("--report", "--checkpoint-dir"):
                skip = not eq  # the value is the next word
            elif name not in ("--resume", "--start-over"):
                out.append(word)
        out += ["--report", report]
        if self.untraced_checkpoints:
            out += ["--checkpoint-dir", self.untraced_checkpoints]
            if self.resume:
                out.append("--resume")
        return out


def single_analysis(
    python: str,
    prefix: str,
    pfxs: Sequence[str],
    reports: Sequence[str],
    untraced_reports: Sequence[str],
) -> list[str]:
    """analyze.py over the captures pfxs with the run reports and untraced reports there are: one
    capture into PREFIX_analysis/; several with --repeats (each capture's summary into
    PFX_analysis/, the median capture into PREFIX_analysis/, the spread into PREFIX_repeats.json
    and .md)."""
    cmd = [python, ANALYZE_PY] + [pfx + ".sqlite" for pfx in pfxs]
    given = _flagged("--report", reports) + _flagged("--untraced", untraced_reports)
    out = prefix + "_analysis"
    if len(pfxs) == 1:
        return cmd + given + ["--out", out]
    return (
        cmd
        + ["--repeats"]
        + given
        + _flagged("--repeat-out", [pfx + "_analysis" for pfx in pfxs])
        + ["--out", out, "--repeats-json", prefix + "_repeats.json"]
        + ["--repeats-md", prefix + "_repeats.md"]
    )


def ranks_analysis(
    python: str,
    prefix: str,
    nproc: int,
    reports: Sequence[str],
    untraced_reports: Sequence[str],
) -> list[str]:
    """analyze.py over every rank's export (each into PREFIX.rank<r>_analysis/), the ranks
    compared in PREFIX_ranks_analysis/."""
    ranks = [rank_prefix(prefix, r) for r in range(nproc)]
    return (
        [python, ANALYZE_PY]
        + [rp + ".sqlite" for rp in ranks]
        + _flagged("--report", reports)
        + _flagged("--untraced", untraced_reports)
        + _flagged("--rank-out", [rp + "_analysis" for rp in ranks])
        + ["--out", prefix + "_ranks_analysis"]
    )


def rank_untraced_report(prefix: str, rank: int) -> str:
    """A rank's untraced report, PREFIX.untraced.rank<r>.json: what train_resnet50 given --report
    PREFIX.untraced.json writes as rank r (rank_path())."""
    return "%s.untraced.rank%d.json" % (prefix, rank)


def ranks_untraced_reports(prefix: str, nproc: int) -> list[str]:
    """Every rank's untraced report (rank_untraced_report())."""
    return [rank_untraced_report(prefix, r) for r in range(nproc)]


def single_dry_run(
    commands: Commands, prefix: str, repeat: int, untraced: bool, python: Optional[str]
) -> list[list[str]]:
    """Every command of one process's run in order: each capture and its untraced run, each
    export and stats, then (python given: --analyze) the analysis, every report assumed written."""
    pfxs = capture_prefixes(prefix, repeat)
    out: list[list[str]] = []
    for pfx in pfxs:
        out.append(commands.nsys_profile(pfx, pfx + ".json"))
        if untraced:
            out.append(commands.untraced(pfx + ".untraced.json"))
    for pfx in pfxs:
        out += [export_command(pfx), stats_command(pfx)]
    if python is not None:
        reports = [pfx + ".json" for pfx in pfxs]
        unreports = [pfx + ".untraced.json" for pfx in pfxs] if untraced else []
        out.append(single_analysis(python, prefix, pfxs, reports, unreports))
    return out


def ranks_dry_run(
    traced_launch: list[str],
    untraced_launch: Optional[list[str]],
    prefix: str,
    nproc: int,
    python: Optional[str],
) -> list[list[str]]:
    """Every command of an --nproc run in order: the traced launch, the untraced one (None:
    none), each rank's export and stats, then (python given: --analyze) the analysis of every
    rank, every report assumed written."""
    out = [traced_launch] + ([untraced_launch] if untraced_launch else [])
    ranks = [rank_prefix(prefix, r) for r in range(nproc)]
    for rp in ranks:
        out += [export_command(rp), stats_command(rp)]
    if python is not None:
        unreports = ranks_untraced_reports(prefix, nproc) if untraced_launch else []
        out.append(ranks_analysis(python, prefix, nproc, [rp + ".json" for rp in ranks], unreports))
    return out
