"""Tests for scripts/dev/check_gpu_units.py, on a scratch git tree whose "CPU build" (a
compile_commands.json naming one unit) leaves out GPU-only units: which units it checks (those the
build does not compile, less the ones other builds compile, less tests/ without a tests build); a
unit that compiles only with the GPU build's switches and the CUDA toolkit's headers passes, one
with an error fails naming it; a missing optional header (nvJPEG, NCCL) skips the unit and another
missing header fails it; the record skips what is unchanged and checks again a unit whose header
changed; a GPU build, no build and bad options are said.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_check_gpu_units.py
"""

import json
import os
import shutil
import subprocess
import sys
import unittest

from scripts.support.testutil import REPO, ScratchCase, write_file

SCRIPT = os.path.join(REPO, "scripts", "dev", "check_gpu_units.py")
sys.path.insert(0, os.path.dirname(SCRIPT))
import check_gpu_units  # noqa: E402

# A unit that compiles only as the GPU build compiles it: its switch, the runtime's header and
# LibTorch's generated macros header (a stub on a CPU machine).
GPU_UNIT = (
    "#ifndef WORKLOAD_TORCH_CUDA\n#error only a GPU build compiles this unit\n#endif\n"
    "#include <cuda_runtime.h>\n#include <c10/cuda/impl/cuda_cmake_macros.h>\n"
    '#include "lib/gpu/kernels.h"\n'
    "int devices() { int n = 0; cudaGetDeviceCount(&n); return n + kernels(); }\n"
)
FILES = {
    "lib/model/conv_bn_ops.cpp": "int cpu() { return 0; }\n",  # the build's reference unit
    "lib/gpu/kernels.h": "inline int kernels() { return 1; }\n",
    "lib/gpu/gpu_only.cpp": GPU_UNIT,
    "lib/gpu/other.cpp": "#ifndef WORKLOAD_HAVE_CUDNN_GRAPH\n#error\n#endif\nint other();\n",
    "lib/distributed/no_c10d.cpp": "#error not a GPU build's unit\n",
    "tests/lib/gpu/gpu_only_test.cpp": (
        '#include "lib/gpu/kernels.h"\nint t() { return kernels(); }\n'
    ),
    "tests/lib/cpu_test.cpp": "int c() { return 0; }\n",
    "docs/notes.cpp": "#error not a source folder\n",
}


@unittest.skipUnless(
    shutil.which("git") and shutil.which("c++") and check_gpu_units.cuda_include(),
    "needs git, a C++ compiler and the CUDA toolkit's headers",
)
class CheckGpuUnitsTest(ScratchCase):
    def tree(self, tests_built=True):
        root = os.path.join(self.tmp, "tree")
        for rel, text in FILES.items():
            self.write(root, rel, text)
        subprocess.run(["git", "init", "-q", root], check=True)
        subprocess.run(["git", "-C", root, "add", "."], check=True)
        compiled = ["lib/model/conv_bn_ops.cpp"] + (
            ["tests/lib/cpu_test.cpp"] if tests_built else []
        )
        db = [
            {
                "directory": os.path.join(root, "build"),
                "file": os.path.join(root, unit),
                "command": "c++ -I%s -std=c++17 -Wall -o x.o -c %s"
                % (root, os.path.join(root, unit)),
            }
            for unit in compiled
        ]
        self.write(root, "build/compile_commands.json", json.dumps(db))
        return root

    write = staticmethod(write_file)

    @staticmethod
    def run_script(root, *args):
        env = dict(os.environ, JOBS="2")
        return subprocess.run(
            [sys.executable, SCRIPT, *args], cwd=root, env=env, capture_output=True, text=True
        )

    def test_the_units_are_those_only_a_gpu_build_compiles(self):
        root = self.tree()
        with open(os.path.join(root, "build", "compile_commands.json")) as f:
            db = json.load(f)
        self.assertEqual(
            check_gpu_units.gpu_only_units(root, db),
            ["lib/gpu/gpu_only.cpp", "lib/gpu/other.cpp", "tests/lib/gpu/gpu_only_test.cpp"],
        )
        # A build without tests leaves all of tests/ out: those are not GPU-only.
        self.assertEqual(
            check_gpu_units.gpu_only_units(root, db[:1]),
            ["lib/gpu/gpu_only.cpp", "lib/gpu/other.cpp"],
        )

    def test_they_compile_with_the_gpu_builds_switches_and_an_error_names_its_unit(self):
        root = self.tree()
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("3 GPU-only units compile (3 checked", r.stdout)

        self.write(
            root, "lib/gpu/gpu_only.cpp", GPU_UNIT + "int broken() { return undeclared(); }\n"
        )
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(
            "lib/gpu/gpu_only.cpp: does not compile with the GPU build's switches", r.stderr
        )
        self.assertIn("undeclared", r.stderr)
        self.assertIn("1 of the 3 GPU-only units checked do not compile", r.stderr)
        self.assertNotIn(root, r.stderr)  # the tree's path is left out: <root>

    def test_a_missing_optional_header_skips_the_unit_and_another_fails_it(self):
        root = self.tree()
        self.write(root, "lib/gpu/other.cpp", "#include <nccl_stand_in_missing.h>\n")
        r = self.run_script(root, "build", "lib/gpu/other.cpp")
        self.assertEqual(r.returncode, 1)
        self.assertIn("nccl_stand_in_missing.h", r.stderr)
        for gcc, clang in [
            ("x.cpp:7:10: fatal error: nvjpeg.h: No such file or directory", "nvjpeg.h"),
            ("x.cpp:7:10: fatal error: 'nccl.h' file not found", "nccl.h"),
        ]:
            m = check_gpu_units.MISSING.search(gcc)
            self.assertIsNotNone(m)
            self.assertEqual(m.group(1), clang)
        include = check_gpu_units.cuda_include()
        if os.path.isfile(os.path.join(include, "nvjpeg.h")):
            self.skipTest("nvjpeg.h is installed: a unit needing it compiles here")
        self.write(root, "lib/gpu/other.cpp", "#include <nvjpeg.h>\nint other();\n")
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("lib/gpu/other.cpp: skipped: nvjpeg.h is not installed", r.stdout)
        self.assertIn(
            "2 GPU-only units compile (3 checked, 0 unchanged since the record, 1 skipped)",
            r.stdout,
        )

    def test_the_record_skips_what_is_unchanged_and_checks_again_what_a_header_changed(self):
        root = self.tree()
        record = os.path.join(self.tmp, "record.txt")
        r = self.run_script(root, "--record", record, "--update-record", "build")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(record) as f:
            self.assertEqual(len([line for line in f if not line.startswith("#")]), 3)
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(0 checked, 3 unchanged since the record, 0 skipped)", r.stdout)
        # The header two units read: both are checked again, and a break in it is found.
        self.write(root, "lib/gpu/kernels.h", "inline int kernels() { return missing(); }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertEqual(r.returncode, 1)
        self.assertIn("2 of the 2 GPU-only units checked do not compile", r.stderr)
        self.write(root, "lib/gpu/kernels.h", "inline int kernels() { return 2; }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(2 checked, 1 unchanged since the record, 0 skipped)", r.stdout)
        # A file no unit reads changes nothing.
        self.write(root, "lib/model/conv_bn_ops.cpp", "int cpu() { return 1; }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(2 checked, 1 unchanged", r.stdout)

    def test_a_gpu_build_no_build_and_bad_options_are_said(self):
        root = self.tree()
        db = [
            {"directory": root, "file": os.path.join(root, u), "command": "c++ -c %s" % u}
            for u in check_gpu_units.tracked_units(root)
        ]
        self.write(root, "gpu/compile_commands.json", json.dumps(db))
        r = self.run_script(root, "--if-available", "gpu")
        self.assertEqual(r.returncode, 0)
        self.assertIn("gpu compiles every unit itself (a GPU build): nothing to check", r.stderr)
        self.assertEqual(self.run_script(root, "gpu").returncode, 2)

        r = self.run_script(root, "nowhere")
        self.assertEqual(r.returncode, 2)
        self.assertIn("nowhere/compile_commands.json not found", r.stderr)
        r = self.run_script(root, "--update-record", "build")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--update-record needs --record FILE", r.stderr)
        self.assertEqual(self.run_script(root, "--record").returncode, 2)
        self.assertIn("unknown option --fast", self.run_script(root, "--fast").stderr)
        r = self.run_script(root, "build", "lib/gpu/none.cpp")
        self.assertEqual(r.returncode, 2)
        self.assertIn("lib/gpu/none.cpp: no such unit", r.stderr)


if __name__ == "__main__":
    unittest.main()
