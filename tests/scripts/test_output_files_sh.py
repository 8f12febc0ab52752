"""Tests for scripts/lib/output_files.sh, the shell scripts' output rules (those of
nsys_analysis/common/files.py): write_file follows a symlink (the target written, its staging file
beside the target, the link kept), writes /dev/null in place, refuses a FIFO or a directory and
leaves it, keeps a replaced file's mode; output_problem says why a path cannot be written;
remove_stale removes a link's regular target only.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_output_files_sh.py
"""

import os
import shutil
import stat
import subprocess
import unittest

from scripts.support.testutil import REPO, ScratchCase

HELPER = os.path.join(REPO, "scripts", "lib", "output_files.sh")
BASH = shutil.which("bash") or "/bin/bash"


class OutputFilesShTest(ScratchCase):
    def sh(self, script, stdin=""):
        return subprocess.run(
            [BASH, "-c", 'source "$0"; ' + script, HELPER],
            input=stdin,
            capture_output=True,
            text=True,
            timeout=20,
            cwd=self.tmp,
        )

    def test_write_file_follows_a_symlink(self):
        os.mkdir(os.path.join(self.tmp, "real"))
        os.symlink(os.path.join(self.tmp, "real", "run.json"), os.path.join(self.tmp, "run.json"))
        for text in ("one\n", "two\n"):  # a new target, then one replaced
            r = self.sh("write_file run.json", text)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.islink(os.path.join(self.tmp, "run.json")))
            with open(os.path.join(self.tmp, "real", "run.json")) as f:
                self.assertEqual(f.read(), text)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "real")), ["run.json"])
        self.assertEqual(sorted(os.listdir(self.tmp)), ["real", "run.json"])

    def test_write_file_keeps_the_mode_and_dev_null(self):
        path = os.path.join(self.tmp, "r.json")
        with open(path, "w") as f:
            f.write("old")
        os.chmod(path, 0o640)
        r = self.sh("write_file r.json && write_file /dev/null", "new")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(stat.S_IMODE(os.stat(path).st_mode), 0o640)
        with open(path) as f:
            self.assertEqual(f.read(), "new")
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))

    def test_what_is_refused_is_left_as_it_is(self):
        os.mkfifo(os.path.join(self.tmp, "fifo"))
        os.mkdir(os.path.join(self.tmp, "dir"))
        with open(os.path.join(self.tmp, "file"), "w") as f:
            f.write("x")
        os.symlink("loop", os.path.join(self.tmp, "loop"))
        cases = [
            ("fifo", "is a FIFO"),
            ("dir", "is a directory"),
            ("file/x", "%s/file is not a directory" % self.tmp),
            ("loop", "a symlink loop"),
            ("", "an empty path"),
        ]
        for path, why in cases:
            with self.subTest(path=path):
                r = self.sh('output_problem "%s"' % path)
                self.assertEqual(r.returncode, 1)
                self.assertTrue(r.stdout.startswith(why), r.stdout)
                r = self.sh('write_file "%s"' % path, "data")
                self.assertEqual(r.returncode, 1)
                self.assertIn("cannot write %s: %s" % (path, why), r.stderr)
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(self.tmp, "fifo")).st_mode))
        self.assertEqual(os.listdir(os.path.join(self.tmp, "dir")), [])
        r = self.sh("output_problem new/deeper/x.json && output_problem /dev/null")
        self.assertEqual((r.returncode, r.stdout), (0, ""))

    def test_remove_stale(self):
        os.mkdir(os.path.join(self.tmp, "real"))
        with open(os.path.join(self.tmp, "real", "old.sqlite"), "w") as f:
            f.write("stale")
        os.symlink(os.path.join(self.tmp, "real", "old.sqlite"), os.path.join(self.tmp, "x.sqlite"))
        os.mkfifo(os.path.join(self.tmp, "x.log"))
        r = self.sh("remove_stale x.sqlite x.log absent /dev/null")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(os.path.islink(os.path.join(self.tmp, "x.sqlite")))
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "real", "old.sqlite")))
        self.assertTrue(stat.S_ISFIFO(os.lstat(os.path.join(self.tmp, "x.log")).st_mode))
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))


if __name__ == "__main__":
    unittest.main()
