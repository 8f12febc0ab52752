"""Runs a command with a time limit that holds: its output streamed to a log, and on timeout its
whole process group (the command and everything it started: profile.sh -> nsys -> train_resnet50)
stopped.

Used by sweep.py and benchmarks.py for every run. POSIX only.
"""

import os
import selectors
import signal
import subprocess
import time
from typing import NamedTuple, Optional

from .files import open_stream

OK, FAILED, TIMEOUT = "ok", "failed", "timeout"

# Seconds a process group gets after SIGTERM before SIGKILL (nsys may take a moment to stop its
# target).
TERM_GRACE_S = 5.0
# How often the group is polled while it stops, and the longest wait for output between checks of
# the time limit and of the command's exit.
_POLL_S = 0.05
# How long output is still read after the command exits, when something it left holds the pipe.
_DRAIN_S = 1.0


class RunResult(NamedTuple):
    """What run() saw. status: OK (exit 0), FAILED (another exit status, or the command could not
    start: returncode None and error says why) or TIMEOUT (returncode None: the group was stopped).
    """

    status: str
    returncode: Optional[int]
    seconds: float
    error: Optional[str] = None


def run(cmd, log_path, timeout=None, env=None, on_line=None):
    """Runs cmd (an argv list) with stdin from /dev/null, stdout and stderr together into log_path
    (after a first line "$ cmd"), and returns a RunResult. Blocks until the command exits or timeout
    seconds pass (None: no limit).

    The command starts a session of its own, so that on timeout SIGTERM, then SIGKILL after
    TERM_GRACE_S, reach every process it started; the command is reaped before run() returns.
    on_line, when given, is called in the calling thread with each line of output (str, without its
    line end) as soon as it is read, for timing. A command that cannot start is reported in the log
    and in RunResult.error, not raised. KeyboardInterrupt (or any exception from on_line) stops the
    group too, then propagates. The log is written in place (files.open_stream()): files.OutputError
    when it cannot be, before the command starts.
    """
    started = time.monotonic()
    deadline = None if timeout is None else started + timeout
    with open_stream(log_path, "wb") as log:
        log.write(("$ %s\n" % " ".join(cmd)).encode())
        log.flush()
        try:
            proc = subprocess.Popen(
                cmd,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
        except OSError as e:
            log.write(("cannot start: %s\n" % e).encode())
            return RunResult(FAILED, None, time.monotonic() - started, str(e))
        assert proc.stdout is not None  # stdout=PIPE: never None; narrows the type for mypy
        try:
            finished = _pump(proc, log, deadline, on_line)
        except BaseException:
            _stop_group(proc)
            raise
        finally:
            proc.stdout.close()
        if not finished:
            _stop_group(proc)
            return RunResult(TIMEOUT, None, time.monotonic() - started)
    rc = proc.returncode
    return RunResult(OK if rc == 0 else FAILED, rc, time.monotonic() - started)


def _pump(proc, log, deadline, on_line):
    """Copies proc's output to log (and lines to on_line) until proc has exited (True) or the
    deadline passes (False). After the exit, what is in the pipe is read for at most _DRAIN_S more:
    a process the command left behind that still holds the pipe is not waited for."""
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    sel = selectors.DefaultSelector()
    sel.register(fd, selectors.EVENT_READ)
    partial = b""
    eof = False
    drain_end = None
    try:
        while True:
            now = time.monotonic()
            if drain_end is None and proc.poll() is not None:
                drain_end = now + _DRAIN_S
            if drain_end is not None and (eof or now >= drain_end):
                break
            if deadline is not None and now >= deadline and drain_end is None:
                return False
            wait = _POLL_S if deadline is None else min(_POLL_S, deadline - now)
            if eof:  # the pipe is closed but the command still runs: wait for its exit
                try:
                    proc.wait(timeout=wait)
                except subprocess.TimeoutExpired:
                    pass
                continue
            if not sel.select(0 if drain_end is not None else wait):
                if drain_end is not None:
                    break  # exited, and nothing more to read now
                continue
            chunk = _read(fd)
            if chunk is None:
                continue
            if not chunk:
                eof = True
                continue
            log.write(chunk)
            log.flush()
            if on_line:
                *lines, partial = (partial + chunk).split(b"\n")
                for line in lines:
                    on_line(line.rstrip(b"\r").decode("utf-8", "replace"))
    finally:
        sel.close()
    if partial and on_line:
        on_line(partial.decode("utf-8", "replace"))
    return True


def _read(fd):
    """Up to 64 KiB from a non-blocking fd: b"" at end of file, None when nothing is there yet."""
    try:
        return os.read(fd, 65536)
    except BlockingIOError:
        return None


def _stop_group(proc):
    """SIGTERM to proc's process group, SIGKILL when anything in it is still alive after
    TERM_GRACE_S; then reaps proc. Returns without waiting further for processes SIGKILL cannot end
    at once (stuck in the kernel)."""
    pgid = proc.pid  # start_new_session: the command leads its own group
    for sig, grace in ((signal.SIGTERM, TERM_GRACE_S), (signal.SIGKILL, TERM_GRACE_S)):
        try:
            os.killpg(pgid, sig)
        except (ProcessLookupError, PermissionError):
            break
        end = time.monotonic() + grace
        while time.monotonic() < end:
            proc.poll()
            if proc.returncode is not None and not group_alive(pgid):
                return
            time.sleep(_POLL_S)
    try:
        proc.wait(timeout=TERM_GRACE_S)
    except subprocess.TimeoutExpired:
        pass


def processes():
    """Every process as (pid, state, ppid, process group), from /proc; None without a /proc."""
    try:
        pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
    except OSError:
        return None
    out = []
    for pid in pids:
        try:
            with open("/proc/%d/stat" % pid, "rb") as f:
                stat = f.read()
        except OSError:
            continue
        # Fields after the command name (which may hold spaces and parentheses): state ppid pgrp ...
        fields = stat[stat.rindex(b")") + 2 :].split()
        out.append((pid, fields[0], int(fields[1]), int(fields[2])))
    return out


def group_alive(pgid):
    """True while a process of group pgid runs. Zombies do not count: an orphan's parent may be an
    init that never reaps (some containers), and a zombie has already stopped."""
    procs = processes()
    if procs is None:  # no /proc: any member, zombie or not
        try:
            os.killpg(pgid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False
    return any(pgrp == pgid and state not in (b"Z", b"X") for _, state, _, pgrp in procs)
