"""Helpers shared by the Python tests: where the repository is, executable stand-ins, a temporary
directory per test with a bin/ folder for them, clean-up of the processes a test started, and
running a command as an unprivileged user."""

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import unittest

# This file is tests/scripts/support/testutil.py.
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
SCRIPTS_DIR = os.path.join(REPO, "scripts")
FIXTURE_DIR = os.path.join(REPO, "tests", "fixtures", "nsys")

# The argv prefix that runs a command as an unprivileged user, for tests of what such a user cannot
# read or write (root can): as root, `setpriv` to nobody (util-linux; None when there is none); []
# when the tests already run unprivileged.
_SETPRIV = shutil.which("setpriv")
AS_UNPRIVILEGED = (
    ([_SETPRIV, "--reuid=65534", "--regid=65534", "--clear-groups"] if _SETPRIV else None)
    if os.geteuid() == 0
    else []
)


def write_file(root, rel, text):
    """Writes root/rel (its folders made as needed)."""
    os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
    with open(os.path.join(root, rel), "w") as f:
        f.write(text)


def write_exe(path, body, interpreter=sys.executable):
    """Writes an executable script: `#!interpreter` then body. Returns path."""
    with open(path, "w") as f:
        f.write("#!%s\n%s" % (interpreter, body))
    os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


# The start of a train_resnet50 stand-in's body (write_exe()): with --print-config it answers as the
# real binary does (scripts/profile.sh asks it): the flags parsed, the last one given winning, and
# validated, then one JSON object, the run report's config section, on stdout; a bad --cuda-graph
# value is a usage error (exit 2). Its argv is appended to $FAKE_CONFIG_LOG when set;
# $FAKE_PRINT_CONFIG, when set, is printed instead of the JSON.
ANSWER_PRINT_CONFIG = r"""
import json, os, sys
if "--print-config" in sys.argv[1:]:
    _args = sys.argv[1:]
    if os.environ.get("FAKE_CONFIG_LOG"):
        with open(os.environ["FAKE_CONFIG_LOG"], "a") as f:
            f.write(json.dumps(_args) + "\n")
    if "FAKE_PRINT_CONFIG" in os.environ:
        print(os.environ["FAKE_PRINT_CONFIG"])
        sys.exit(0)
    _config = {"data": "", "cuda_graph": False, "report": "", "steps": 64, "workers": 8,
               "checkpoint_dir": "", "resume": False}
    for i, arg in enumerate(_args):
        name, eq, value = arg.partition("=")
        if not eq and name in ("--report", "--steps", "--data", "--workers", "--checkpoint-dir"):
            value = _args[i + 1] if i + 1 < len(_args) else ""
        if name == "--checkpoint-dir":
            _config["checkpoint_dir"] = value
        if name == "--resume":
            _config["resume"] = not eq or value in ("true", "1", "yes", "on")
        if name == "--cuda-graph":
            value = value if eq else "true"
            if value not in ("true", "1", "yes", "on", "false", "0", "no", "off"):
                print("train_resnet50: error: --cuda-graph: expected true or false, got '%s'"
                      % value, file=sys.stderr)
                sys.exit(2)
            _config["cuda_graph"] = value in ("true", "1", "yes", "on")
        elif name in ("--report", "--data"):
            _config[name[2:]] = value
        elif name in ("--steps", "--workers"):
            _config[name[2:]] = int(value)
    print(json.dumps(_config, indent=2))
    sys.exit(0)
"""


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


class ScratchCase(unittest.TestCase):
    """Each test gets a fresh temporary directory, tmp (removed afterwards, whatever happens), and
    the path of a bin/ folder in it, bin, where fake() puts the stand-ins of the programs under test
    (made on the first one). Processes the test started are SIGKILLed at its end when still running
    (kill_at_end())."""

    # The temporary directory's name prefix, which says whose it is when one is left behind.
    tmp_prefix = "python_test_"

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix=self.tmp_prefix)
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.bin = os.path.join(self.tmp, "bin")

    def fake(self, name, body, where=None):
        """An executable stand-in `name` (write_exe()'s Python script body) in bin/, or in the
        folder where; returns its path."""
        where = where or self.bin
        os.makedirs(where, exist_ok=True)
        return write_exe(os.path.join(where, name), body)

    def kill_at_end(self, *pids):
        """SIGKILLs each pid at the end of the test if it still runs (a stand-in that outlived a
        time limit must not outlive the test). Returns the pids."""
        for pid in pids:
            self.addCleanup(_kill_if_alive, pid)
        return pids


def _kill_if_alive(pid):
    if alive(pid):
        os.kill(pid, signal.SIGKILL)


class StandInPackagesCase(unittest.TestCase):
    """For a script that imports PyTorch: each test gets a temporary directory, tmp, first on the
    PYTHONPATH of run_script(), where package() writes stand-in packages (a torch that raises
    ImportError, one without CUDA, ...). SCRIPT is the script's path."""

    SCRIPT = None

    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="standin_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def package(self, name, text):
        """A package `name` (a/b for a sub-package) whose __init__.py is text."""
        os.makedirs(os.path.join(self.tmp, name), exist_ok=True)
        with open(os.path.join(self.tmp, name, "__init__.py"), "w") as f:
            f.write(text)

    def run_script(self, *args):
        """SCRIPT run with args by this interpreter, the stand-ins first on its path: a
        CompletedProcess."""
        env = dict(os.environ, PYTHONPATH=self.tmp)
        return subprocess.run(
            [sys.executable, self.SCRIPT, *args],
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
