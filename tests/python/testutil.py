"""Helpers shared by the Python tests."""

import os
import stat
import sys


def write_exe(path, body, interpreter=sys.executable):
    """Writes an executable script: `#!interpreter` then body. Returns path."""
    with open(path, "w") as f:
        f.write("#!%s\n%s" % (interpreter, body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def alive(pid):
    """True while pid runs. A zombie counts as stopped: where init does not reap orphans (some
    containers), a killed grandchild stays a zombie, which os.kill(pid, 0) alone still reports."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0] not in ("Z", "X")
    except OSError:
        return False
