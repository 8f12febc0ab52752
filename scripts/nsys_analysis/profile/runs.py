"""profile.sh's runs: one process's captures (each followed by its untraced run), or one capture of
several ranks under a launcher; then the exports, stats and analyses; or, for --dry-run, every
command printed in order instead.

Processes: everything runs in the calling thread, one child process at a time; each call blocks
until the child has exited. A child inherits stdin and starts a session of its own (start_child()),
so that what it starts (nsys's program, a launcher's ranks) stays in its process group, and a signal
reaches it only through profile.sh, once: SIGINT (Ctrl-C, or `kill -INT` to profile.sh alone),
SIGTERM (`kill`, a scheduler) and SIGHUP (a closed terminal) are passed on to the child's process
group, which gets STOP_GRACE_S to end (nsys writes its capture out) before SIGKILL; then profile.sh
stops as the Python scripts do (common/exit_status.exit_with(): one line, 130 or 143; 129 for
SIGHUP), nothing of its left running. A logged run (the capture, the untraced run) has its stdout
and stderr together copied, as they come, to profile.sh's stdout and to its log (read until the pipe
closes, as tee did, then the child is reaped); the exports, stats and analyses share profile.sh's
stdout and stderr. What profile.sh itself says goes to stderr, each command as "profile.sh: COMMAND"
before it runs; the closing listing of outputs to stdout.
"""

import contextlib
import fnmatch
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from types import FrameType
from typing import BinaryIO, Optional, Sequence

from ..common import files, runner
from ..common.exit_status import FAILURE, OK, USAGE, Terminated
from .cli import Options
from .errors import ProfileError
from .outputs import (
    check_outputs,
    copy_report,
    missing_csvs,
    prepare,
    ranks_listing,
    ranks_outputs,
    ranks_stale_outputs,
    save_report_line,
    single_listing,
    single_outputs,
    stale_outputs,
)
from .plan import (
    CHECKPOINTS_PREFIX,
    Commands,
    capture_prefixes,
    choose_launcher,
    export_command,
    launcher_command,
    rank_path,
    rank_prefix,
    ranks_analysis,
    ranks_dry_run,
    ranks_untraced_reports,
    show_command,
    single_analysis,
    single_dry_run,
    stats_command,
)

# Where a Python for analyze.py is looked for, in order, after $PYTHON (as
# scripts/lib/find_python.sh looks: on Debian the pyenv python3 first on PATH may lack the
# system's python3-matplotlib).
PYTHONS = ("python3", "/usr/bin/python3")
NSYS_MISSING = (
    "nsys (Nsight Systems CLI) is not on PATH; install Nsight Systems or add its bin/ directory to "
    "PATH"
)
# A line of a wrapped command's output longer than this is no report: it is not kept.
MAX_LINE_BYTES = 16 << 20
# What failed when a capture exits nonzero: nsys profile exits with its program's status, or with
# its own when it fails itself; which of the two its output in the log says.
CAPTURE_WHAT = "nsys profile (nsys or the profiled program)"
RANKS_CAPTURE_WHAT = "the ranks' nsys profile (the launcher, nsys or the profiled program)"
# The signals that stop profile.sh, each passed on to the command running.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# After a stop signal, the seconds the running child's process group (nsys and the program, or
# the launcher and its ranks) gets to end before SIGKILL: nsys writes its capture out once the
# program has stopped, which a large capture takes a while to do. cli.HELP says how long.
STOP_GRACE_S = 30.0
# After SIGKILL, the seconds waited for the child before profile.sh stops anyway (a process stuck
# in the kernel, or one that left the group and holds the output pipe).
KILL_WAIT_S = 5.0
# How often what is left of a stopped child's process group is looked at.
_POLL_S = 0.05


def note(message: str) -> None:
    """A line on stderr, "profile.sh: MESSAGE"."""
    sys.stderr.write("profile.sh: %s\n" % message)
    sys.stderr.flush()


def warn(message: str) -> None:
    """A warning on stderr: "profile.sh: warning: MESSAGE"."""
    note("warning: " + message)


def say(lines: Sequence[str]) -> None:
    """Lines on stdout."""
    sys.stdout.write("".join(line + "\n" for line in lines))
    sys.stdout.flush()


class _Stop:
    """The stop signals' state. child: the running child (None between children); starting: one is
    being started; unsent: a signal that came as it started, for it once it has; signum: the first
    stop signal that came while a child ran (None: none); killed: the grace ran out and the
    child got SIGKILL."""

    child: "Optional[subprocess.Popen[bytes]]" = None
    starting = False
    unsent: Optional[int] = None
    signum: Optional[int] = None
    killed = False


_stop = _Stop()


def handle_stop_signals() -> None:
    """SIGINT, SIGTERM and SIGHUP (a closed terminal: the children, in sessions of their own, would
    not get it) stop profile.sh through _on_stop_signal() from here on, each unless ignored (SIGINT
    in a background job of a script, SIGHUP under nohup: the children ignore it too)."""
    for signum in STOP_SIGNALS:
        if signal.getsignal(signum) != signal.SIG_IGN:
            signal.signal(signum, _on_stop_signal)


def _raise_stop(signum: int) -> None:
    """The stop, as exit_with() ends a script: KeyboardInterrupt for SIGINT, Terminated for
    SIGTERM (the cleanup they unwind through runs, then one line and 128 + N); SystemExit(129),
    without a line, for SIGHUP (no terminal to read it)."""
    signal.setitimer(signal.ITIMER_REAL, 0)
    if signum == signal.SIGINT:
        raise KeyboardInterrupt()
    if signum == signal.SIGTERM:
        raise Terminated()
    raise SystemExit(128 + signum)


def _on_stop_signal(signum: int, frame: Optional[FrameType]) -> None:
    """A stop signal (STOP_SIGNALS): with no child running, profile.sh stops at once
    (_raise_stop()); while one runs (or starts), the signal is passed on to its process group, each
    time one comes, and the first starts the grace (SIGALRM then: _on_grace_over()); end_child()
    stops profile.sh once the child is gone."""
    if _stop.child is None and not _stop.starting:
        _raise_stop(signum)
    if _stop.signum is None:
        _stop.signum = signum
        signal.signal(signal.SIGALRM, _on_grace_over)
        signal.setitimer(signal.ITIMER_REAL, STOP_GRACE_S)
    if _stop.child is not None:
        _signal_group(_stop.child.pid, signum)
    else:
        _stop.unsent = signum


def _on_grace_over(signum: int, frame: Optional[FrameType]) -> None:
    """SIGALRM, STOP_GRACE_S after the stop signal: the child, its process group and every process
    it started get SIGKILL, and KILL_WAIT_S more; once those run out too, profile.sh stops without
    waiting further."""
    proc = _stop.child
    if proc is None or _stop.killed:
        _raise_stop(_stop.signum or signal.SIGTERM)
        return
    _stop.killed = True
    note("still running %g s after the signal: SIGKILL" % STOP_GRACE_S)
    doomed = _descendants(proc.pid) + ([proc.pid] if proc.returncode is None else [])
    for pid in doomed:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGKILL)
    _signal_group(proc.pid, signal.SIGKILL)
    signal.setitimer(signal.ITIMER_REAL, KILL_WAIT_S)


def _signal_group(pgid: int, signum: int) -> None:
    """signum to the process group pgid, if anything is left of it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def _processes() -> list[tuple[int, bytes, int, int]]:
    """Every process as (pid, state, ppid, process group) ([] without a /proc)."""
    return runner.processes() or []


def _descendants(pid: int) -> list[int]:
    """Every process pid started, and those they started, ... (those that left its group too)."""
    children: dict[int, list[int]] = {}
    for p, _, ppid, _ in _processes():
        children.setdefault(ppid, []).append(p)
    out: list[int] = []
    todo = list(children.get(pid, []))
    while todo:
        p = todo.pop()
        out.append(p)
        todo += children.get(p, [])
    return out


def start_child(argv: Sequence[str], **popen_args) -> "subprocess.Popen[bytes]":
    """argv started in a session of its own (so in a process group of its own, with all it starts),
    stdin inherited, popen_args given to Popen; it is the running child until end_child(). OSError
    when it cannot start (a stop signal that came meanwhile then stops profile.sh)."""
    _stop.starting = True
    try:
        proc = subprocess.Popen(list(argv), start_new_session=True, **popen_args)
        _stop.child = proc
    except OSError:
        if _stop.signum is not None:
            _raise_stop(_stop.signum)
        raise
    finally:
        _stop.starting = False
    if _stop.unsent is not None:  # it came as the child started
        _signal_group(proc.pid, _stop.unsent)
        _stop.unsent = None
    return proc


def end_child(proc: "subprocess.Popen[bytes]") -> None:
    """After proc has exited: no child runs from here. If a stop signal came while it ran, what is
    left of its process group is waited for (SIGKILLed once the grace runs out), then profile.sh
    stops (_raise_stop())."""
    if _stop.signum is not None:
        while runner.group_alive(proc.pid):
            time.sleep(_POLL_S)
    _stop.child = None
    if _stop.signum is not None:
        _raise_stop(_stop.signum)


def run_child(argv: Sequence[str], stdout=None, stderr=None) -> tuple[int, bytes]:
    """argv run as start_child() starts it, with stdout and stderr as given (None: profile.sh's;
    subprocess.PIPE for stdout: read), until it exits: its returncode and what it wrote to a piped
    stdout (b"" else). OSError when it cannot start; a stop signal stops it, then profile.sh."""
    proc = start_child(argv, stdout=stdout, stderr=stderr)
    out = proc.communicate()[0] or b""
    end_child(proc)
    return proc.returncode, out


def shell_status(returncode: int) -> int:
    """A child's exit status as a shell reports it: 128 + N when signal N ended it."""
    return 128 - returncode if returncode < 0 else returncode


def start_failure(argv: Sequence[str], e: OSError) -> tuple[int, str]:
    """The status (127 not found, 126 not runnable, as a shell's) and message of a command that
    could not start."""
    status = 127 if isinstance(e, FileNotFoundError) else 126
    return status, "profile.sh: cannot run %s: %s\n" % (argv[0], e.strerror or e)


class Logs:
    """The logged runs of one invocation. Each log is truncated by its first run and appended to by
    the next (PREFIX.log holds every capture, PREFIX.untraced.log every untraced run); echo is
    where the output is copied besides (None: profile.sh's stdout)."""

    def __init__(self, echo: Optional[BinaryIO] = None) -> None:
        self._echo = echo
        self._echo_closed = False
        self._begun: set[str] = set()

    def run(
        self, log: str, what: str, argv: Sequence[str], where: str = "", keep_json: bool = False
    ) -> list[str]:
        """Runs argv, shown first on stderr, its output on stdout and in log; blocks until it has
        exited. Returns the output's lines that may be JSON objects when keep_json (a wrapped
        command's report), else []. ProfileError with the command's status when it failed
        ("WHAT failed (exit N[ WHERE]); output in LOG"); files.OutputError when log cannot be
        written."""
        mode = "ab" if log in self._begun else "wb"
        self._begun.add(log)
        note(show_command(argv))
        sys.stdout.flush()
        lines: list[str] = []
        with files.open_stream(log, mode) as f:
            status = self._tee(argv, f, lines if keep_json else None)
        if status != 0:
            raise ProfileError(
                "%s failed (exit %d%s); output in %s"
                % (what, status, " " + where if where else "", log),
                status,
            )
        return lines

    def _write(self, log: BinaryIO, data: bytes) -> None:
        """data to the log and the echo (once the echo's reader is gone, to the log alone)."""
        log.write(data)
        log.flush()
        if self._echo_closed:
            return
        try:
            echo = self._echo or sys.stdout.buffer
            echo.write(data)
            echo.flush()
        except BrokenPipeError:
            self._echo_closed = True

    def _tee(self, argv: Sequence[str], log: BinaryIO, lines: Optional[list[str]]) -> int:
        """argv's output to the log and the echo until its pipe closes, then its exit status; the
        lines starting with `{` into lines when given."""
        try:
            proc = start_child(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        except OSError as e:
            status, message = start_failure(argv, e)
            self._write(log, message.encode())
            return status
        assert proc.stdout is not None  # stdout=PIPE: never None; narrows the type for mypy
        fd = proc.stdout.fileno()
        partial = b""
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self._write(log, chunk)
                if lines is not None:
                    *whole, partial = (partial + chunk).split(b"\n")
                    lines += _json_candidates(whole)
                    if len(partial) > MAX_LINE_BYTES:
                        partial = b""
        finally:
            proc.stdout.close()
        if lines is not None:
            lines += _json_candidates([partial])
        proc.wait()
        end_child(proc)
        return shell_status(proc.returncode)


def _json_candidates(raw: Sequence[bytes]) -> list[str]:
    """The lines that may be JSON objects (starting with `{`), decoded."""
    out = []
    for line in raw:
        if line.lstrip().startswith(b"{"):
            out.append(line.decode("utf-8", "replace"))
    return out


def run_step(argv: Sequence[str], what: str) -> None:
    """Runs argv (an export, stats, analyze.py), shown first on stderr, with profile.sh's stdout and
    stderr; blocks until it exits. ProfileError (exit_status.FAILURE) "WHAT failed (exit N)" when
    it fails."""
    note(show_command(argv))
    sys.stdout.flush()
    try:
        status = shell_status(run_child(argv)[0])
    except OSError as e:
        status, message = start_failure(argv, e)
        sys.stderr.write(message)
    if status != 0:
        raise ProfileError("%s failed (exit %d)" % (what, status), FAILURE)


def find_python(module: str) -> Optional[str]:
    """The first of $PYTHON, python3 and /usr/bin/python3 that is there and can import module, as
    given (a name, or a path); None when none can. Runs each candidate until one succeeds."""
    for candidate in (os.environ.get("PYTHON", ""),) + PYTHONS:
        if not candidate or shutil.which(candidate) is None:
            continue
        probe = [candidate, "-c", "import " + module]
        try:
            found = run_child(probe, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)[0]
        except OSError:
            continue
        if found == 0:
            return candidate
    return None


def analysis_python(dry_run: bool) -> str:
    """The Python analyze.py runs with (one with matplotlib); a dry run shows python3 when there is
    none. ProfileError (exit_status.FAILURE) otherwise."""
    python = find_python("matplotlib")
    if python is not None:
        return python
    if dry_run:
        return "python3"
    raise ProfileError(
        "no Python with matplotlib for analyze.py (tried $PYTHON, python3, /usr/bin/python3); "
        "install python3-matplotlib",
        FAILURE,
    )


def temporary_root() -> str:
    """Where temporary directories go: $TMPDIR, else /tmp."""
    return os.environ.get("TMPDIR") or "/tmp"


class UntracedCheckpoints:
    """The untraced run's checkpoint directory: never the capture's (it would resume from the
    capture's last epoch, or overwrite it) but a private one in $TMPDIR, emptied before each capture
    (holding a copy of the newest checkpoint in the capture's directory, given, when the capture
    resumes) and removed after each untraced run and at the end (remove())."""

    def __init__(self, path: str, given: str, resume: bool) -> None:
        self.path = path
        self.given = given
        self.resume = resume

    @staticmethod
    def placeholder() -> str:
        """The path a dry run shows for the directory."""
        return "%s/%sXXXXXXXX" % (temporary_root(), CHECKPOINTS_PREFIX)

    @classmethod
    def create(cls, given: str, resume: bool) -> "UntracedCheckpoints":
        """A new private directory; ProfileError when it cannot be made."""
        try:
            path = tempfile.mkdtemp(prefix=CHECKPOINTS_PREFIX, dir=temporary_root())
        except OSError as e:
            raise ProfileError(
                "cannot create a temporary directory for the untraced run's checkpoints (%s)"
                % (e.strerror or e)
            )
        return cls(path, given, resume)

    def newest(self) -> Optional[str]:
        """The capture's newest checkpoint (the last checkpoint-e*.ckpt file by name), None when
        there is none."""
        try:
            names = sorted(
                e.name
                for e in os.scandir(self.given)
                if fnmatch.fnmatchcase(e.name, "checkpoint-e*.ckpt")
                and e.is_file(follow_symlinks=False)
            )
        except OSError:
            return None
        return os.path.join(self.given, names[-1]) if names else None

    def prepare(self) -> None:
        """Before a capture: the directory emptied, with a copy of the checkpoint the capture
        resumes from. ProfileError when it cannot be."""
        try:
            shutil.rmtree(self.path, ignore_errors=True)
            os.makedirs(self.path, exist_ok=True)
        except OSError as e:
            raise ProfileError(
                "cannot make %s, the untraced run's checkpoint directory (%s)"
                % (self.path, e.strerror or e)
            )
        newest = self.newest() if self.resume else None
        if newest is None:
            return
        try:
            shutil.copy(newest, self.path)
        except OSError as e:
            raise ProfileError(
                "cannot copy %s for the untraced run (%s)" % (newest, e.strerror or e)
            )

    def remove(self) -> None:
        """The directory removed (nothing when it is gone already)."""
        shutil.rmtree(self.path, ignore_errors=True)


def need_nsys() -> None:
    """ProfileError (exit_status.USAGE) unless nsys is on PATH."""
    if shutil.which("nsys") is None:
        raise ProfileError(NSYS_MISSING, USAGE)


def export_and_stats(pfx: str, what: str) -> None:
    """PFX.nsys-rep exported to PFX.sqlite, then its stats CSVs; ProfileError naming what ("of
    out/x", "for rank 1") when nsys fails or writes no PFX.sqlite; a warning naming each CSV nsys
    stats did not write (it skips a report without data, and exits 0)."""
    run_step(export_command(pfx), "nsys export " + what)
    if not os.path.exists(pfx + ".sqlite"):
        raise ProfileError("nsys export %s wrote no %s.sqlite" % (what, pfx))
    run_step(stats_command(pfx), "nsys stats " + what)
    missing = missing_csvs(pfx)
    if missing:
        warn(
            "nsys stats %s wrote no %s (no data for those reports in the capture)"
            % (what, " ".join(missing))
        )


def _capture_and_untraced(
    logs: Logs,
    o: Options,
    commands: Commands,
    checkpoints: Optional[UntracedCheckpoints],
    pfx: str,
) -> None:
    """Capture PFX, its run report into PFX.json, then (unless --no-untraced) its untraced run with
    its report in PFX.untraced.json."""
    prefix = o.prefix
    wrapped = not commands.is_train
    if o.untraced and checkpoints is not None:
        checkpoints.prepare()
    lines = logs.run(
        prefix + ".log",
        CAPTURE_WHAT,
        commands.nsys_profile(pfx, pfx + ".json"),
        keep_json=wrapped,
    )
    if not os.path.isfile(pfx + ".nsys-rep"):
        raise ProfileError(
            "nsys produced no %s.nsys-rep: the capture range never started (the program must call "
            "cudaProfilerStart; check %s.log)" % (pfx, prefix)
        )
    if commands.given_report:
        if os.path.isfile(commands.given_report):
            copy_report(commands.given_report, pfx + ".json")
        else:
            warn("the program wrote no report at %s" % commands.given_report)
    elif wrapped:
        # A wrapped command (the Python reference) prints its report as one JSON line.
        _save_report_line(lines, pfx + ".json")
    if not os.path.isfile(pfx + ".json"):
        warn("no run report at %s.json" % pfx)
    if not o.untraced:
        return
    lines = logs.run(
        prefix + ".untraced.log",
        "the untraced run",
        commands.untraced(pfx + ".untraced.json"),
        keep_json=wrapped,
    )
    if checkpoints is not None:
        checkpoints.remove()
    if wrapped:
        _save_report_line(lines, pfx + ".untraced.json")
    if not os.path.isfile(pfx + ".untraced.json"):
        warn("no untraced run report at %s.untraced.json" % pfx)


def _save_report_line(lines: Sequence[str], path: str) -> None:
    """save_report_line(), with a warning when the output held no report line."""
    if not save_report_line(lines, path):
        warn("no JSON report line in the program's output; no %s" % path)


def profile_single(
    o: Options, commands: Commands, checkpoints: Optional[UntracedCheckpoints]
) -> int:
    """One process: --repeat N captures, each followed by its untraced run, then every export and
    stats, the analysis (--analyze) and the listing; or, with --dry-run, every command printed.
    Returns exit_status.OK; ProfileError when something fails."""
    prefix = o.prefix
    pfxs = capture_prefixes(prefix, o.repeat)
    if o.dry_run:
        python = analysis_python(True) if o.analyze else None
        cmds = single_dry_run(commands, prefix, o.repeat, o.untraced, python)
        say([show_command(c) for c in cmds])
        return OK
    need_nsys()
    check_outputs(prefix, single_outputs(prefix, pfxs, o.untraced, o.analyze))
    prepare(prefix, stale_outputs(pfxs, commands.is_train and not commands.given_report))
    logs = Logs()
    for pfx in pfxs:
        _capture_and_untraced(logs, o, commands, checkpoints, pfx)
    for pfx in pfxs:
        export_and_stats(pfx, "of " + pfx)
    if o.analyze:
        python = analysis_python(False)
        if len(pfxs) > 1:
            for pfx in pfxs:
                if not os.path.isfile(pfx + ".json"):
                    raise ProfileError(
                        "--repeat %d --analyze needs every capture's run report (the median "
                        "capture is chosen by its images/s); no %s.json" % (o.repeat, pfx)
                    )
        reports = [pfx + ".json" for pfx in pfxs if os.path.isfile(pfx + ".json")]
        unreports = [
            pfx + ".untraced.json"
            for pfx in pfxs
            if o.untraced and os.path.isfile(pfx + ".untraced.json")
        ]
        run_step(single_analysis(python, prefix, pfxs, reports, unreports), "analyze.py")
    say(single_listing(prefix, pfxs, o.untraced, o.analyze))
    return OK


def _ranks_reports(prefix: str, nproc: int, commands: Commands) -> list[str]:
    """Each rank's run report as PREFIX.rank<r>.json (a report the configuration names copied from
    where the rank wrote it), with warnings for those missing; returns the reports there are."""
    if not commands.is_train:
        warn(
            "no run reports for a wrapped command under --nproc (its ranks' output is interleaved "
            "in %s.log)" % prefix
        )
    reports = []
    for r in range(nproc):
        report = rank_prefix(prefix, r) + ".json"
        if commands.given_report:
            source = rank_path(commands.given_report, r)
            if os.path.isfile(source):
                copy_report(source, report)
            else:
                warn("rank %d wrote no report at %s" % (r, source))
        if commands.is_train and not os.path.isfile(report):
            warn("no run report at %s" % report)
        if os.path.isfile(report):
            reports.append(report)
    return reports


def profile_ranks(
    o: Options, commands: Commands, checkpoints: Optional[UntracedCheckpoints]
) -> int:
    """--nproc N: one nsys per rank (a single nsys around the launcher would record every rank in
    one report, where how the ranks' cudaProfilerStart/Stop calls combine is undocumented), each
    naming its report after RANK from its environment; then the untraced launch, each rank's export
    and stats, the analysis of every rank and their comparison (--analyze), the listing; or, with
    --dry-run, every command printed. Returns exit_status.OK; ProfileError when something fails."""
    prefix = o.prefix
    nproc = o.nproc or 1
    launcher = choose_launcher(
        os.environ.get("PROFILE_LAUNCHER"), shutil.which("torchrun") is not None
    )
    traced_launch = launcher_command(
        launcher, nproc, commands.nsys_profile(prefix + ".rank%q{RANK}", prefix + ".json")
    )
    untraced = o.untraced
    if untraced and not commands.is_train:
        warn(
            "no untraced run for a wrapped command under --nproc (no report could be read from its "
            "ranks' interleaved output)"
        )
        untraced = False
    untraced_launch = (
        launcher_command(launcher, nproc, commands.untraced(prefix + ".untraced.json"))
        if untraced
        else None
    )
    if o.dry_run:
        python = analysis_python(True) if o.analyze else None
        say(
            [
                show_command(c)
                for c in ranks_dry_run(traced_launch, untraced_launch, prefix, nproc, python)
            ]
        )
        return OK
    need_nsys()
    if launcher == "torchrun" and shutil.which("torchrun") is None:
        raise ProfileError(
            "torchrun is not on PATH (PROFILE_LAUNCHER=torchrun); unset PROFILE_LAUNCHER to use "
            "scripts/launch_local.sh",
            USAGE,
        )
    check_outputs(prefix, ranks_outputs(prefix, nproc, untraced, o.analyze))
    prepare(
        prefix, ranks_stale_outputs(prefix, nproc, commands.is_train and not commands.given_report)
    )
    if untraced and checkpoints is not None:
        checkpoints.prepare()
    logs = Logs()
    where = "from " + launcher
    logs.run(prefix + ".log", RANKS_CAPTURE_WHAT, traced_launch, where)
    missing = [
        rank_prefix(prefix, r) + ".nsys-rep"
        for r in range(nproc)
        if not os.path.isfile(rank_prefix(prefix, r) + ".nsys-rep")
    ]
    if missing:
        raise ProfileError(
            "nsys produced no %s: the capture range never started on those ranks (the program "
            "must call cudaProfilerStart; check %s.log)" % (" ".join(missing), prefix)
        )
    reports = _ranks_reports(prefix, nproc, commands)
    unreports = ranks_untraced_reports(prefix, nproc) if untraced else []
    if untraced_launch is not None:
        logs.run(prefix + ".untraced.log", "the untraced run", untraced_launch, where)
        if checkpoints is not None:
            checkpoints.remove()
        for r, unreport in enumerate(ranks_untraced_reports(prefix, nproc)):
            if not os.path.isfile(unreport):
                warn("rank %d's untraced run wrote no %s" % (r, unreport))
                unreports = []
    for r in range(nproc):
        export_and_stats(rank_prefix(prefix, r), "for rank %d" % r)
    if o.analyze:
        python = analysis_python(False)
        if len(reports) != nproc:
            if reports:
                warn("not every rank has a run report; analyzing without reports")
            reports = []
        run_step(ranks_analysis(python, prefix, nproc, reports, unreports), "analyze.py")
    say(ranks_listing(prefix, nproc, untraced, o.analyze))
    return OK
