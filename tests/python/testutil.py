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
