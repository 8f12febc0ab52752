"""Tests for scripts/dev/tidy_record.py, on a two-unit CMake project built with Ninja: the same
tree built in two places gives the same keys; a change to a header a unit includes, to the unit, to
.clang-tidy, to the tool's version or to the compile flags changes that unit's key only where it
reads the change; a header outside the tree counts by its path, the tool by its version line (not
the host CPU it names); a unit the build has not compiled has no key ("-"); a missing build is a
usage error. clang-tidy sees a unit without CMake's precompiled header (--plain-db): the
header's arguments, clang's or gcc's, are left out of the command, and nothing else is.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_tidy_record.py
"""

import json
import os
import shlex
import shutil
import subprocess
import sys
import unittest

from scripts.support.testutil import REPO, ScratchCase, write_file

SCRIPT = os.path.join(REPO, "scripts", "dev", "tidy_record.py")
UNITS = ["src/a.cpp", "src/b.cpp"]
# A header outside the tree, as a system header is (OUTSIDE: its folder, given to CMake).
FILES = {
    "CMakeLists.txt": "cmake_minimum_required(VERSION 3.16)\nproject(p CXX)\n"
    "set(CMAKE_EXPORT_COMPILE_COMMANDS ON)\n"
    "add_library(p STATIC src/a.cpp src/b.cpp)\n"
    "target_include_directories(p PRIVATE ${PROJECT_SOURCE_DIR} ${OUTSIDE})\n",
    ".clang-tidy": "Checks: '-*,bugprone-*'\n",
    "src/a.h": "inline int a() { return 1; }\n",
    "src/a.cpp": '#include "src/a.h"\n#include "outside.h"\nint f() { return a() + o(); }\n',
    "src/b.cpp": "int g() { return 2; }\n",
}


@unittest.skipUnless(
    shutil.which("cmake") and shutil.which("ninja") and shutil.which("c++"),
    "needs cmake, ninja and a C++ compiler",
)
class TidyRecordTest(ScratchCase):
    def project(self, name):
        root = os.path.join(self.tmp, name)
        for rel, text in FILES.items():
            self.write(root, rel, text)
        return root

    write = staticmethod(write_file)

    def outside(self):
        """The folder of outside.h: between the trees "a_tree" and "c_tree" in sort order, so that
        the files a unit reads sort differently against it in each."""
        folder = os.path.join(self.tmp, "b_outside")
        self.write(folder, "outside.h", "inline int o() { return 0; }\n")
        return folder

    def build(self, root, *cmake_args):
        for cmd in (
            [
                "cmake",
                "-S",
                ".",
                "-B",
                "build",
                "-G",
                "Ninja",
                "-DOUTSIDE=" + self.outside(),
                *cmake_args,
            ],
            ["ninja", "-C", "build"],
        ):
            subprocess.run(cmd, cwd=root, check=True, capture_output=True)

    def keys(self, root, tool="echo"):
        """{unit: key}; `tool --version` stands for clang-tidy's version (CLANG_TIDY)."""
        env = dict(os.environ, CLANG_TIDY=tool)
        out = subprocess.run(
            [sys.executable, SCRIPT, "build", *UNITS],
            cwd=root,
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        return {unit: key for key, unit in (line.split(" ", 1) for line in out.splitlines())}

    def test_keys_follow_what_each_unit_reads_and_not_where_the_tree_is(self):
        first, second = self.project("a_tree"), self.project("c_tree")
        self.build(first)
        self.build(second)
        before = self.keys(first)
        self.assertEqual(set(before), set(UNITS))
        self.assertNotIn("-", before.values())
        self.assertEqual(self.keys(second), before)

        self.write(first, "src/a.h", "inline int a() { return 3; }\n")
        self.build(first)
        after = self.keys(first)
        self.assertNotEqual(after["src/a.cpp"], before["src/a.cpp"])  # reads a.h
        self.assertEqual(after["src/b.cpp"], before["src/b.cpp"])  # does not

        self.write(first, ".clang-tidy", "Checks: '-*,performance-*'\n")
        settings = self.keys(first)
        self.assertNotEqual(settings["src/b.cpp"], after["src/b.cpp"])

        self.assertEqual(self.keys(first), settings)
        # Another version of the tool (here: another --version output) is another key.
        self.assertNotEqual(self.keys(first, tool="true")["src/b.cpp"], settings["src/b.cpp"])

        self.build(first, "-DCMAKE_CXX_FLAGS=-DSOMETHING")
        self.assertNotEqual(self.keys(first)["src/b.cpp"], settings["src/b.cpp"])

    def test_the_machine_counts_by_paths_and_the_tools_version_line(self):
        """A fresh machine differs from the record's by patch releases of its packages and by its
        CPU, which clang-tidy --version names: neither changes a key; the tool's release does."""
        root = self.project("a_tree")
        self.build(root)
        tools = {}
        for name, text in (
            ("here", "LLVM version 14.0.6\n  Host CPU: znver3\n"),
            ("there", "LLVM version 14.0.6\n  Host CPU: skylake-avx512\n"),
            ("newer", "LLVM version 15.0.7\n  Host CPU: znver3\n"),
        ):
            tools[name] = os.path.join(self.tmp, name + ".sh")
            self.write(
                self.tmp, name + ".sh", "#!/bin/sh\nprintf '%s'\n" % text.replace("\n", "\\n")
            )
            os.chmod(tools[name], 0o755)
        before = self.keys(root, tool=tools["here"])
        self.assertEqual(self.keys(root, tool=tools["there"]), before)
        self.assertNotEqual(self.keys(root, tool=tools["newer"])["src/a.cpp"], before["src/a.cpp"])

        # outside.h (a system header to the tree) patched: a.cpp reads it, its key stays.
        self.write(self.outside(), "outside.h", "inline int o() { return 0; }  // patched\n")
        self.assertEqual(self.keys(root, tool=tools["here"]), before)
        # The same change in the tree's header does change it.
        self.write(root, "src/a.h", "inline int a() { return 1; }  // patched\n")
        self.assertNotEqual(self.keys(root, tool=tools["here"])["src/a.cpp"], before["src/a.cpp"])

    def test_a_unit_not_built_yet_has_no_key(self):
        root = self.project("p")
        subprocess.run(
            ["cmake", "-S", ".", "-B", "build", "-G", "Ninja", "-DOUTSIDE=" + self.outside()],
            cwd=root,
            check=True,
            capture_output=True,
        )
        self.assertEqual(self.keys(root), {"src/a.cpp": "-", "src/b.cpp": "-"})

    def test_the_plain_db_leaves_out_the_precompiled_header_and_nothing_else(self):
        root = self.project("p")
        with open(os.path.join(root, "CMakeLists.txt"), "a") as f:
            f.write("target_precompile_headers(p PRIVATE <vector>)\n")
        self.build(root)
        with open(os.path.join(root, "build", "compile_commands.json")) as f:
            built = {os.path.basename(e["file"]): e for e in json.load(f)}
        self.assertIn("cmake_pch", built["a.cpp"]["command"])  # the compiler's own kind of header
        r = subprocess.run(
            [sys.executable, SCRIPT, "--plain-db", "build", "plain"],
            cwd=root,
            capture_output=True,
            text=True,
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(root, "plain", "compile_commands.json")) as f:
            plain = {os.path.basename(e["file"]): e for e in json.load(f)}
        self.assertIn("a.cpp", plain)
        for name in ("a.cpp", "b.cpp"):
            args = plain[name]["arguments"]
            self.assertFalse([a for a in args if "pch" in a], args)
            kept = [a for a in shlex.split(built[name]["command"]) if "pch" not in a]
            # What is left is the command, in order, less the "-include"/"-Xclang" that went with
            # the header's paths.
            self.assertEqual([a for a in kept if a not in ("-include", "-Xclang")], args)
            self.assertEqual(plain[name]["directory"], built[name]["directory"])

    def test_clangs_precompiled_header_arguments_are_left_out(self):
        sys.path.insert(0, os.path.dirname(SCRIPT))
        try:
            import tidy_record
        finally:
            sys.path.pop(0)
        clang = (
            "/usr/bin/clang++ '-DX=\"a b\"' -O3 -Winvalid-pch -Xclang -include-pch -Xclang "
            "/b/CMakeFiles/t.dir/cmake_pch.hxx.pch -Xclang -include -Xclang "
            "/b/CMakeFiles/t.dir/cmake_pch.hxx -Xclang -fno-color-diagnostics -o u.o -c /s/u.cpp"
        )
        self.assertEqual(
            tidy_record.plain_arguments(clang),
            ["/usr/bin/clang++", '-DX="a b"', "-O3", "-Xclang", "-fno-color-diagnostics",
             "-o", "u.o", "-c", "/s/u.cpp"],
        )  # fmt: skip
        plain = "/usr/bin/clang++ -O3 -include /s/own.h -o u.o -c /s/u.cpp"
        self.assertIsNone(tidy_record.plain_arguments(plain))
        self.assertEqual(tidy_record.plain_command(plain), plain)  # byte for byte: same key

    def test_a_missing_build_is_a_usage_error(self):
        root = self.project("p")
        r = subprocess.run(
            [sys.executable, SCRIPT, "build", "src/a.cpp"], cwd=root, capture_output=True, text=True
        )
        self.assertEqual(r.returncode, 2)
        self.assertIn("compile_commands.json not found", r.stderr)


if __name__ == "__main__":
    unittest.main()
