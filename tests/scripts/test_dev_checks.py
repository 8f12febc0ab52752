"""Tests for scripts/dev/check_{format,shell,python}.sh, the checks of the tree scripts/test.sh runs
first: on a small git tree of their own, each passes clean files, fails naming what it found, skips
with a note under --if-available where its tool is missing or another version than the reference
(and fails without it), and refuses an unknown option with exit 2.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_dev_checks.py
"""

import os
import shutil
import subprocess
import unittest

from scripts.support.testutil import REPO, ScratchCase, write_exe

BASH = shutil.which("bash") or "/bin/bash"
CLEAN = {
    "scripts/ok.sh": '#!/usr/bin/env bash\necho "$1"\n',
    "scripts/ok.py": "def twice(x: int) -> int:\n    return 2 * x\n\n\nprint(twice(2))\n",
    "lib/ok.cpp": "int twice(int x) { return 2 * x; }\n",
}


class DevChecksTest(ScratchCase):
    def setUp(self):
        super().setUp()
        self.tree = os.path.join(self.tmp, "tree")
        # The checks alone: the other tools of scripts/dev are files of their own to check.
        shutil.copytree(
            os.path.join(REPO, "scripts", "dev"),
            os.path.join(self.tree, "scripts", "dev"),
            ignore=lambda _, names: [n for n in names if not n.startswith("check")],
        )
        for name in ("pyproject.toml", ".flake8", ".clang-format"):
            shutil.copy(os.path.join(REPO, name), self.tree)
        for path, text in CLEAN.items():
            self.write(path, text)
        subprocess.run(["git", "init", "-q", self.tree], check=True)

    def write(self, path, text):
        full = os.path.join(self.tree, path)
        os.makedirs(os.path.dirname(full), exist_ok=True)
        with open(full, "w") as f:
            f.write(text)

    def check(self, name, *args, path=None):
        env = dict(os.environ)
        if path is not None:
            env["PATH"] = path
        return subprocess.run(
            [BASH, os.path.join(self.tree, "scripts", "dev", name), *args],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
        )

    def need(self, *tools):
        missing = [t for t in tools if not shutil.which(t)]
        if missing:
            self.skipTest("not installed: " + ", ".join(missing))

    def test_clean_files_pass(self):
        for name, tools in (
            ("check_shell.sh", ["shellcheck"]),
            ("check_python.sh", ["black", "flake8", "mypy"]),
            ("check_format.sh", ["clang-format"]),
        ):
            with self.subTest(name):
                self.need(*tools)
                r = self.check(name)
                self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
                self.assertIn(name + ": ", r.stdout)

    def test_a_shell_finding_fails_naming_the_file(self):
        self.need("shellcheck")
        self.write("scripts/bad.sh", "#!/usr/bin/env bash\nrm -rf $1/out\n")
        self.write(".ci/run", "#!/usr/bin/env bash\ncd $(dirname $0)\n")  # no .sh suffix
        r = self.check("check_shell.sh")
        self.assertEqual(r.returncode, 1)
        self.assertIn("scripts/bad.sh", r.stdout)
        self.assertIn(".ci/run", r.stdout)
        self.assertIn("SC2086", r.stdout)

    def test_each_python_tool_fails_naming_what_it_found(self):
        self.need("black", "flake8", "mypy")
        cases = {
            "black": ("scripts/ugly.py", "x = [1,2]\n"),
            "flake8": ("tests/unused.py", "import os\n"),
            "mypy": ("scripts/typed.py", 'def f(x: int) -> int:\n    return x\n\n\nf("a")\n'),
        }
        for tool, (path, text) in cases.items():
            with self.subTest(tool):
                self.write(path, text)
                r = self.check("check_python.sh")
                os.remove(os.path.join(self.tree, path))
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn("check_python.sh: %s" % tool, r.stderr)
                self.assertIn(os.path.basename(path), r.stdout + r.stderr)

    def test_fix_formats_in_place(self):
        self.need("black", "flake8", "mypy")
        self.write("scripts/ugly.py", "x = [1,2]\n")
        self.assertEqual(self.check("check_python.sh", "--fix").returncode, 0)
        with open(os.path.join(self.tree, "scripts", "ugly.py")) as f:
            self.assertEqual(f.read(), "x = [1, 2]\n")

    def test_an_unformatted_cpp_file_fails_naming_it(self):
        self.need("clang-format")
        self.write("lib/bad.cpp", "int   f( ){return 1;}\n")
        r = self.check("check_format.sh")
        self.assertEqual(r.returncode, 1)
        self.assertIn("lib/bad.cpp", r.stderr)

    def test_only_the_unformatted_files_are_named(self):
        # The check runs one clang-format over every file, then names them one by one.
        self.need("clang-format")
        self.write("lib/good.cpp", "int f() { return 1; }\n")
        self.write("lib/bad.cpp", "int   f( ){return 1;}\n")
        self.write("lib/bad2.h", "int   g( );\n")
        r = self.check("check_format.sh")
        self.assertEqual(r.returncode, 1)
        self.assertIn("2 file(s) do not follow", r.stderr)
        self.assertIn("lib/bad.cpp", r.stderr)
        self.assertIn("lib/bad2.h", r.stderr)
        self.assertNotIn("lib/good.cpp", r.stderr)

    def test_a_missing_tool_is_a_note_with_if_available_and_an_error_without(self):
        # A PATH with what the scripts need besides the checked tools.
        bin_dir = os.path.join(self.tmp, "bin")
        os.mkdir(bin_dir)
        for tool in ("bash", "dirname", "git", "grep", "head", "sed", "cat"):
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        for name, tool in (
            ("check_shell.sh", "shellcheck"),
            ("check_python.sh", "black"),
            ("check_format.sh", "clang-format"),
        ):
            with self.subTest(name):
                r = self.check(name, "--if-available", path=bin_dir)
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("%s not found (apt install" % tool, r.stderr)
                self.assertIn("skipped", r.stderr)
                r = self.check(name, path=bin_dir)
                self.assertEqual(r.returncode, 1)
                self.assertIn("error: %s not found" % tool, r.stderr)

    def test_another_version_than_the_reference_is_skipped_with_a_note(self):
        bin_dir = os.path.join(self.tmp, "bin")
        os.mkdir(bin_dir)
        write_exe(os.path.join(bin_dir, "shellcheck"), "print('version: 0.10.0')\n")
        r = self.check(
            "check_shell.sh", "--if-available", path=bin_dir + os.pathsep + os.environ["PATH"]
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("shellcheck 0.10.0 is not the reference version 0.9", r.stderr)

    def test_an_unknown_option_is_a_usage_error(self):
        for name in ("check_shell.sh", "check_python.sh", "check_format.sh"):
            with self.subTest(name):
                r = self.check(name, "--fixx")
                self.assertEqual(r.returncode, 2)
                self.assertIn("unknown option '--fixx'", r.stderr)


if __name__ == "__main__":
    unittest.main()
