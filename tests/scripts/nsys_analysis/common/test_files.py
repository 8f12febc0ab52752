"""Tests for scripts/nsys_analysis/common/files.py: an output's symlink is followed (the target
written, the staging file beside the target, the link kept), a FIFO is refused and left as it is,
/dev/null is written in place and stays a character device, a regular file is replaced atomically
with its mode kept, nothing is left behind by a failed write, a directory named like a staging file
is no obstacle; and the up-front checks of inputs and outputs name the flag and the path.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/common/test_files.py
"""

import glob
import os
import stat
import unittest
from unittest import mock

from scripts.support.testutil import ScratchCase
from nsys_analysis.common.files import (
    OutputError,
    UsageError,
    atomic_output,
    check_input_file,
    check_output_dir,
    check_output_file,
    open_stream,
    remove_stale,
    write_text,
)


class OutputFileTest(ScratchCase):
    def path(self, *parts):
        return os.path.join(self.tmp, *parts)

    def test_a_symlink_is_followed(self):
        os.mkdir(self.path("real"))
        target = self.path("real", "out.md")
        link = self.path("link.md")
        os.symlink(target, link)  # dangling: the target is made
        write_text(link, "one\n")
        self.assertTrue(os.path.islink(link))
        with open(target) as f:
            self.assertEqual(f.read(), "one\n")
        seen = []
        real_mkstemp = __import__("tempfile").mkstemp

        def mkstemp(**kw):
            seen.append(kw["dir"])
            return real_mkstemp(**kw)

        with mock.patch("tempfile.mkstemp", side_effect=mkstemp):
            write_text(link, "two\n")  # replacing the target
        self.assertEqual(seen, [self.path("real")])  # staged beside the target, not beside the link
        self.assertTrue(os.path.islink(link))
        with open(link) as f:
            self.assertEqual(f.read(), "two\n")
        self.assertEqual(sorted(os.listdir(self.path("real"))), ["out.md"])

    def test_a_fifo_is_refused_and_left_alone(self):
        fifo = self.path("out.fifo")
        os.mkfifo(fifo)
        with self.assertRaisesRegex(
            UsageError,
            r"^--out %s: is a FIFO, expected a regular file or a character "
            r"device such as /dev/null \(it is never replaced\)$" % fifo,
        ):
            check_output_file("--out", fifo)
        for write in (lambda: write_text(fifo, "x"), lambda: open_stream(fifo)):
            with self.assertRaisesRegex(OutputError, "cannot write %s: is a FIFO" % fifo):
                write()
        self.assertTrue(stat.S_ISFIFO(os.lstat(fifo).st_mode))
        # Through a symlink too.
        os.symlink(fifo, self.path("link"))
        with self.assertRaisesRegex(UsageError, "is a FIFO"):
            check_output_file("--out", self.path("link"))
        self.assertEqual(sorted(os.listdir(self.tmp)), ["link", "out.fifo"])

    def test_dev_null_is_written_in_place(self):
        check_output_file("--out", os.devnull)
        write_text(os.devnull, "discarded\n")
        with atomic_output(os.devnull, "wb") as f:
            f.write(b"\x89PNG")
        with open_stream(os.devnull) as f:
            f.write(b"log\n")
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))

    def test_a_regular_file_is_replaced_atomically_with_its_mode(self):
        out = self.path("out.json")
        write_text(out, "old\n")
        os.chmod(out, 0o640)
        inode = os.stat(out).st_ino
        write_text(out, "new\n")
        st = os.stat(out)
        self.assertNotEqual(st.st_ino, inode)  # a new file renamed over the old one
        self.assertEqual(stat.S_IMODE(st.st_mode), 0o640)
        with open(out) as f:
            self.assertEqual(f.read(), "new\n")
        # A failed write leaves the old contents and no staging file.
        with self.assertRaises(RuntimeError):
            with atomic_output(out) as f:
                f.write("half")
                raise RuntimeError("stop")
        with open(out) as f:
            self.assertEqual(f.read(), "new\n")
        self.assertEqual(os.listdir(self.tmp), ["out.json"])

    def test_a_new_file_gets_the_umask_mode(self):
        old = os.umask(0o027)
        self.addCleanup(os.umask, old)
        write_text(self.path("new.md"), "x")
        self.assertEqual(stat.S_IMODE(os.stat(self.path("new.md")).st_mode), 0o640)

    def test_a_directory_named_like_a_staging_file_is_no_obstacle(self):
        out = self.path("summary.json")
        for name in ("summary.json.tmp", ".summary.json.tmp"):
            os.mkdir(self.path(name))
        check_output_file("--out", out)
        write_text(out, "{}\n")
        with open(out) as f:
            self.assertEqual(f.read(), "{}\n")
        self.assertTrue(os.path.isdir(self.path("summary.json.tmp")))
        self.assertEqual(glob.glob(self.path(".summary.json.*.tmp")), [])

    def test_output_paths_that_cannot_be_written(self):
        os.mkdir(self.path("dir"))
        with open(self.path("file"), "w") as f:
            f.write("x")
        os.symlink("loop", self.path("loop"))
        cases = [
            (self.path("dir"), "is a directory, expected a regular file"),
            (self.path("file", "x.md"), "%s is not a directory" % self.path("file")),
            (self.path("none", "x.md"), "its directory %s does not exist" % self.path("none")),
            (self.path("loop"), "a symlink loop"),
            ("", "an empty path"),
        ]
        for path, why in cases:
            with self.subTest(path=path):
                with self.assertRaises(UsageError) as cm:
                    check_output_file("--out", path)
                self.assertTrue(
                    str(cm.exception).startswith("--out %s: %s" % (path, why)), str(cm.exception)
                )
        check_output_file("--out", self.path("none", "deeper", "x.md"), create_dirs=True)

    def test_output_directories(self):
        with open(self.path("file"), "w") as f:
            f.write("x")
        check_output_dir("--out", self.tmp)
        check_output_dir("--out", self.path("new", "deeper"))
        with self.assertRaisesRegex(
            UsageError, r"^--out %s: is a regular file, expected a directory$" % self.path("file")
        ):
            check_output_dir("--out", self.path("file"))
        with self.assertRaisesRegex(
            UsageError,
            r"^--out %s: %s is not a directory$" % (self.path("file", "sub"), self.path("file")),
        ):
            check_output_dir("--out", self.path("file", "sub"))
        with mock.patch("os.access", return_value=False):
            with self.assertRaisesRegex(UsageError, "the directory is not writable"):
                check_output_dir("--out", self.tmp)
            with self.assertRaisesRegex(
                UsageError, "cannot create files in %s \\(not writable\\)" % self.tmp
            ):
                check_output_dir("--out", self.path("new"))
            with self.assertRaisesRegex(UsageError, "cannot create files in %s" % self.tmp):
                check_output_file("--out", self.path("x.json"))

    def test_input_files(self):
        with open(self.path("report.json"), "w") as f:
            f.write("{}")
        os.mkfifo(self.path("fifo"))
        check_input_file("--report", self.path("report.json"), "a run report file")
        check_input_file("--report", self.path("fifo"), "a run report file", streams=True)
        cases = [
            (self.path("nope"), "no such file"),
            (self.tmp, "is a directory, expected a run report file"),
            (self.path("fifo"), "is a FIFO, expected a run report file"),
            (
                self.path("report.json", "x"),
                "cannot read it (%s is not a directory)" % self.path("report.json"),
            ),
        ]
        for path, why in cases:
            with self.subTest(path=path):
                with self.assertRaises(UsageError) as cm:
                    check_input_file("--report", path, "a run report file")
                self.assertEqual(str(cm.exception), "--report %s: %s" % (path, why))
        with mock.patch("os.access", return_value=False):
            with self.assertRaisesRegex(UsageError, "cannot read it \\(permission denied\\)"):
                check_input_file("--report", self.path("report.json"), "a run report file")

    def test_remove_stale_follows_the_link_and_spares_devices(self):
        os.mkdir(self.path("real"))
        with open(self.path("real", "run.json"), "w") as f:
            f.write("{}")
        os.symlink(self.path("real", "run.json"), self.path("run.json"))
        remove_stale(self.path("run.json"))
        self.assertTrue(os.path.islink(self.path("run.json")))
        self.assertFalse(os.path.exists(self.path("real", "run.json")))
        os.mkfifo(self.path("fifo"))
        remove_stale(self.path("fifo"))
        remove_stale(os.devnull)
        remove_stale(self.path("absent"))
        self.assertTrue(os.path.exists(self.path("fifo")))
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))


if __name__ == "__main__":
    unittest.main()
