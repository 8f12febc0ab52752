"""The files the scripts read and write: checks of the paths a command line names, made before any
work (each message naming the flag and the path), and writes that never replace what is not a
regular file.

An output path is followed through its symlinks to the target, which may be
  absent or a regular file: written atomically: a staging file beside the target (not beside the
      link, so that the rename stays on one file system), fsynced, then renamed over it;
  a character device (/dev/null, a terminal): written in place, never replaced;
and nothing else: a directory, a FIFO, a socket or a block device is refused and left as it is (a
FIFO with no reader would also hang the writer). Staging files are created exclusively under a
hidden unique name, .NAME.XXXXXXXX.tmp beside the target, so no file or directory already there is
in their way or is ever written through. The rules are lib/core/output_file.h's, so that the
programs and the scripts treat an output path alike.

A log written while a command runs (open_stream()) is written in place, not atomically: what a run
printed before it was killed must stay.
"""

import contextlib
import errno
import os
import stat
import tempfile


class UsageError(Exception):
    """A path given on the command line that cannot be used; the message names the flag and the
    path. The scripts print it on one line and exit with exit_status.USAGE."""


class OutputError(Exception):
    """An output that could not be written when its turn came (the message names it); the scripts
    print it on one line and exit with exit_status.FAILURE."""


class _Refused(Exception):
    """Why an output path cannot be written, as the tail of a message."""


def describe(mode):
    """What a file of this stat mode is, for a message: "a directory", "a FIFO", ..."""
    for test, name in (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISREG, "a regular file"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def _stat(path):
    """os.stat(path) (symlinks followed), None when nothing is there; _Refused for a symlink loop, a
    path through a file, or a path this user cannot look up."""
    try:
        return os.stat(path)
    except FileNotFoundError:
        return None
    except NotADirectoryError:
        raise _Refused("%s is not a directory" % _first_non_directory(path))
    except OSError as e:
        raise _Refused(
            "a symlink loop" if e.errno == errno.ELOOP else "cannot look it up (%s)" % e.strerror
        )


def _first_non_directory(path):
    """The first leading component of path that exists and is not a directory."""
    parts = os.path.abspath(path).split(os.sep)
    for i in range(2, len(parts) + 1):
        prefix = os.sep.join(parts[:i])
        try:
            if not stat.S_ISDIR(os.stat(prefix).st_mode):
                return prefix
        except OSError:
            break
    return os.path.dirname(path) or path


def _nearest_existing(path):
    """(ancestor, its stat): the nearest leading directory of path that exists (path itself
    included)."""
    current = os.path.abspath(path)
    while True:
        try:
            return current, os.stat(current)
        except OSError:
            parent = os.path.dirname(current)
            if parent == current:
                raise _Refused("no leading directory of it exists")
            current = parent


def _writable_directory(directory, create):
    """Raises _Refused unless files can be created in directory (or, with create, in the directories
    os.makedirs() would create there)."""
    ancestor, st = _nearest_existing(directory)
    if ancestor != os.path.abspath(directory) and not create:
        raise _Refused("its directory %s does not exist" % directory)
    if not stat.S_ISDIR(st.st_mode):
        raise _Refused("%s is %s, not a directory" % (ancestor, describe(st.st_mode)))
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise _Refused("cannot create files in %s (not writable)" % ancestor)


def _resolve(path, create_dirs=False):
    """(target, stat or None) of an output path, or _Refused saying why it cannot be written."""
    if not path:
        raise _Refused("an empty path")
    st = _stat(path)
    if st is not None and stat.S_ISCHR(st.st_mode):
        if not os.access(path, os.W_OK):
            raise _Refused("a character device this user cannot write")
        return path, st
    if st is not None and not stat.S_ISREG(st.st_mode):
        raise _Refused(
            "is %s, expected a regular file or a character device such as /dev/null (it is never "
            "replaced)" % describe(st.st_mode)
        )
    target = os.path.realpath(path)
    _writable_directory(os.path.dirname(target), create_dirs)
    return target, st


def check_output_file(flag, path, create_dirs=False):
    """Before any work: raises UsageError ("FLAG PATH: why") unless an output can be written at path
    as write_text() and atomic_output() write it. create_dirs: its missing directories will be made
    first (the nearest one that exists must then be writable)."""
    try:
        _resolve(path, create_dirs)
    except _Refused as e:
        raise UsageError("%s %s: %s" % (flag, path, e))


def _same_file(a, b):
    """True when paths a and b name one file: the same existing file (links followed), or the same
    path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outputs_apart(outputs, inputs):
    """Before any work: raises UsageError unless no output is an input or another output. outputs:
    (flag, path) pairs (path None: not asked for); inputs: (what, path) pairs. A script never writes
    over what it reads."""
    given = [(flag, path) for flag, path in outputs if path]
    for i, (flag, path) in enumerate(given):
        for what, source in inputs:
            if _same_file(path, source):
                raise UsageError(
                    "%s %s: is the %s %s; write the output elsewhere" % (flag, path, what, source)
                )
        for other_flag, other in given[:i]:
            if _same_file(path, other):
                raise UsageError(
                    "%s %s: is %s's file too; give each output its own" % (flag, path, other_flag)
                )


def check_inputs_distinct(inputs):
    """Before any work: raises UsageError when two of inputs, (what, path) pairs, name one file (the
    same export as two ranks, an untraced run's report that is the traced run's): each stands for
    a run of its own."""
    for i, (what, path) in enumerate(inputs):
        for other_what, other in inputs[:i]:
            if _same_file(path, other):
                raise UsageError(
                    "%s %s: is the %s %s too; each must be a file of its own run"
                    % (what, path, other_what, other)
                )


def check_output_dir(flag, path):
    """Before any work: raises UsageError naming flag and path unless path is a writable directory
    (symlinks followed) or can be created (its nearest existing leading directory is writable)."""
    try:
        if not path:
            raise _Refused("an empty path")
        st = _stat(path)
        if st is None:
            _writable_directory(path, create=True)
        elif not stat.S_ISDIR(st.st_mode):
            raise _Refused("is %s, expected a directory" % describe(st.st_mode))
        elif not os.access(path, os.W_OK | os.X_OK):
            raise _Refused("the directory is not writable")
    except _Refused as e:
        raise UsageError("%s %s: %s" % (flag, path, e))


def check_input_file(flag, path, expected, streams=False):
    """Before any work: raises UsageError ("FLAG PATH: why, expected EXPECTED") unless path is a
    file this user can read: a regular file, or with streams also a FIFO or character device (read
    once, as `<(command)` gives). flag may be a name such as "export" for a positional argument."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        raise UsageError("%s %s: no such file" % (flag, path))
    except OSError as e:
        why = (
            "%s is not a directory" % _first_non_directory(path)
            if e.errno == errno.ENOTDIR
            else e.strerror
        )
        raise UsageError("%s %s: cannot read it (%s)" % (flag, path, why))
    if stat.S_ISDIR(st.st_mode):
        raise UsageError("%s %s: is a directory, expected %s" % (flag, path, expected))
    if not (
        stat.S_ISREG(st.st_mode)
        or (streams and (stat.S_ISFIFO(st.st_mode) or stat.S_ISCHR(st.st_mode)))
    ):
        raise UsageError("%s %s: is %s, expected %s" % (flag, path, describe(st.st_mode), expected))
    if not os.access(path, os.R_OK):
        raise UsageError("%s %s: cannot read it (permission denied)" % (flag, path))


def make_dirs(path):
    """os.makedirs(path, exist_ok=True), or OutputError naming path (a file in the way, no
    permission)."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as e:
        raise OutputError("cannot create the directory %s: %s" % (path, e.strerror or e))


def remove_stale(path):
    """Removes the regular file at path, or at its symlink's target (the link stays), so that an
    output a run fails to write shows as missing instead of as an earlier run's; leaves anything
    else (a device, a FIFO) as it is. Raises OutputError naming path when the file cannot be
    removed."""
    try:
        st = os.stat(path)
    except OSError:
        return
    if stat.S_ISREG(st.st_mode):
        try:
            os.remove(os.path.realpath(path))
        except FileNotFoundError:
            pass
        except OSError as e:
            raise OutputError("cannot remove the earlier %s: %s" % (path, e.strerror or e))


def _new_file_mode(st):
    """The mode of a file replacing one of stat st (None: a new file, as open() would make it)."""
    if st is not None:
        return stat.S_IMODE(st.st_mode)
    mask = os.umask(0)
    os.umask(mask)
    return 0o666 & ~mask


@contextlib.contextmanager
def atomic_output(path, mode="w", **open_args):
    """with atomic_output(path) as f: write the output's contents to f; when the block ends without
    an exception they are put in place as the module docstring says (the staging file is removed
    otherwise). mode is "w" or "wb"; open_args go to open() (encoding, newline). Raises OutputError
    naming path when the path is refused or a write fails."""
    try:
        target, st = _resolve(path)
    except _Refused as e:
        raise OutputError("cannot write %s: %s" % (path, e))
    if st is not None and stat.S_ISCHR(st.st_mode):
        try:
            with open(path, mode, **open_args) as f:
                yield f
        except OSError as e:
            raise OutputError("cannot write %s: %s" % (path, e.strerror or e))
        return
    directory, name = os.path.split(target)
    try:
        fd, staging = tempfile.mkstemp(prefix="." + name + ".", suffix=".tmp", dir=directory)
    except OSError as e:
        raise OutputError(
            "cannot write %s: cannot create a staging file in %s (%s)"
            % (path, directory, e.strerror)
        )
    try:
        with os.fdopen(fd, mode, **open_args) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(staging, _new_file_mode(st))
        os.replace(staging, target)
    except BaseException as e:
        with contextlib.suppress(OSError):
            os.unlink(staging)
        if isinstance(e, OSError):
            raise OutputError("cannot write %s: %s" % (path, e.strerror or e)) from e
        raise
    _sync_directory(directory)


def _sync_directory(directory):
    """fsync a directory, so that a rename in it survives a crash; where that is not possible,
    nothing."""
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def write_text(path, text):
    """Writes text (UTF-8) to the output at path, atomically where it is a regular file or
    absent."""
    with atomic_output(path, "w", encoding="utf-8") as f:
        f.write(text)


def open_stream(path, mode="wb"):
    """Opens the output at path for writing in place as something runs (a log): a symlink followed,
    a regular file truncated, a character device written; anything else refused. Raises OutputError.
    """
    try:
        _resolve(path)
        return open(path, mode)
    except _Refused as e:
        raise OutputError("cannot write %s: %s" % (path, e))
    except OSError as e:
        raise OutputError("cannot write %s: %s" % (path, e.strerror or e))
