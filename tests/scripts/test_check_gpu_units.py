"""Tests for scripts/dev/check_gpu_units.py, on a scratch git tree whose "CPU build" (a
compile_commands.json naming one unit) leaves out GPU-only units: which units it checks (those the
build does not compile, less the ones other builds compile, less tests/ without a tests build); a
unit that compiles only with the GPU build's switches and the CUDA toolkit's headers passes, one
with an error fails naming it; the build's units whose text or headers test a GPU switch are
compiled again with their own command and the switches, and a break in such a branch is found; the
switches follow LibTorch's version as CMakeLists.txt's do; a missing optional header (nvJPEG, NCCL)
skips the unit and another missing header fails it; the record skips what is unchanged and checks
again a unit whose header changed; a GPU build, no build and bad options are said.

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
# A unit of the CPU build whose GPU branch compiles only with its target's own define.
GATED_UNIT = (
    "#if defined(WORKLOAD_TORCH_CUDA)\n#include <cuda_runtime.h>\n"
    "int gpu() { cudaStream_t s = nullptr; return s ? 0 : WORKLOAD_TRAIN_BIN; }\n#endif\n"
    "int cpu_side() { return 0; }\n"
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
    # Units of the CPU build: one with a GPU branch that needs its own target's define, one whose
    # header tests a switch, one that tests none (not checked again).
    "lib/cpu/gated.cpp": GATED_UNIT,
    "lib/cpu/gated.h": (
        '#pragma once\n#include "middle.h"\n'  # a cycle, as headers may have
        "#if defined(WORKLOAD_HAVE_NCCL)\n#include <cuda_runtime.h>\n#endif\n"
    ),
    "lib/cpu/middle.h": '#pragma once\n#include "lib/cpu/gated.h"\n',
    "lib/cpu/through.cpp": '#include "middle.h"\nint through() { return 0; }\n',
    "lib/cpu/plain.cpp": '#include "lib/gpu/kernels.h"\nint plain() { return kernels(); }\n',
}
# Flags of the CPU build's units: their own, beyond the compiler's defaults.
OWN_DEFINES = {"lib/cpu/gated.cpp": " -DWORKLOAD_TRAIN_BIN=3"}


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
        compiled = [
            "lib/model/conv_bn_ops.cpp",
            "lib/cpu/gated.cpp",
            "lib/cpu/through.cpp",
            "lib/cpu/plain.cpp",
        ] + (["tests/lib/cpu_test.cpp"] if tests_built else [])
        db = [
            {
                "directory": os.path.join(root, "build"),
                "file": os.path.join(root, unit),
                "command": "c++ -I%s -std=c++17 -Wall%s -o x.o -c %s"
                % (root, OWN_DEFINES.get(unit, ""), os.path.join(root, unit)),
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
            check_gpu_units.gpu_only_units(root, db[:4]),
            ["lib/gpu/gpu_only.cpp", "lib/gpu/other.cpp"],
        )
        # The build's units with GPU branches: by their own text or a header's (through another).
        self.assertEqual(
            check_gpu_units.gpu_branch_units(root, db),
            ["lib/cpu/gated.cpp", "lib/cpu/through.cpp"],
        )

    def test_a_units_gpu_branch_compiles_with_its_own_flags_and_a_break_in_it_is_found(self):
        root = self.tree()
        r = self.run_script(root, "build", "lib/cpu/gated.cpp")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 GPU-only units and the GPU branches of 1 others compile", r.stdout)
        # A break the CPU build cannot see: it is inside the branch.
        broken = GATED_UNIT.replace("#endif\n", "int broken() { return undeclared(); }\n#endif\n")
        self.write(root, "lib/cpu/gated.cpp", broken)
        cpu = subprocess.run(
            ["c++", "-fsyntax-only", "-std=c++17", os.path.join(root, "lib/cpu/gated.cpp")],
            capture_output=True,
        )
        self.assertEqual(cpu.returncode, 0, "the CPU build compiles the broken unit")
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn("lib/cpu/gated.cpp: does not compile with the GPU build's switches", r.stderr)
        self.assertIn("undeclared", r.stderr)
        self.assertIn("1 of the 5 units checked do not compile", r.stderr)

    def test_the_switches_follow_libtorchs_version_as_cmakes_do(self):
        def switches(version, bound):
            build = os.path.join(self.tmp, "b" + version)
            c10d = os.path.join(self.tmp, "c10d" + version)
            self.write(
                c10d,
                "torch/csrc/distributed/c10d/ProcessGroup.hpp",
                "void setBoundDeviceId(int);\n" if bound else "class ProcessGroup;\n",
            )
            self.write(
                build,
                "CMakeCache.txt",
                "// LibTorch version\nWORKLOAD_TORCH_VERSION:INTERNAL=%s\n"
                "WORKLOAD_C10D_INCLUDE_DIR:PATH=%s\n" % (version, c10d),
            )
            return check_gpu_units.gpu_switches(build)

        old = switches("1.13.0", bound=False)
        new = switches("2.11.0", bound=True)
        self.assertIn("WORKLOAD_TORCH_CUDA", old)
        for s in ("WORKLOAD_HAVE_GRAPH_REWRITE", "WORKLOAD_HAVE_NCCL", "USE_C10D_NCCL"):
            self.assertNotIn(s, old)
            self.assertIn(s, new)
        self.assertNotIn("WORKLOAD_HAVE_GRAPH_REWRITE", switches("2.7.1", bound=True))
        self.assertIn("WORKLOAD_HAVE_NCCL", switches("2.7.1", bound=True))
        # Without a cache: every switch.
        everything = check_gpu_units.gpu_switches(os.path.join(self.tmp, "none"))
        self.assertEqual(set(everything), set(new))

    def test_they_compile_with_the_gpu_builds_switches_and_an_error_names_its_unit(self):
        root = self.tree()
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn(
            "3 GPU-only units and the GPU branches of 2 others compile (5 checked", r.stdout
        )

        self.write(
            root, "lib/gpu/gpu_only.cpp", GPU_UNIT + "int broken() { return undeclared(); }\n"
        )
        r = self.run_script(root, "build")
        self.assertEqual(r.returncode, 1, r.stdout)
        self.assertIn(
            "lib/gpu/gpu_only.cpp: does not compile with the GPU build's switches", r.stderr
        )
        self.assertIn("undeclared", r.stderr)
        self.assertIn("1 of the 5 units checked do not compile", r.stderr)
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
            "2 GPU-only units and the GPU branches of 2 others compile "
            "(5 checked, 0 unchanged since the record, 1 skipped)",
            r.stdout,
        )

    def test_the_record_skips_what_is_unchanged_and_checks_again_what_a_header_changed(self):
        root = self.tree()
        record = os.path.join(self.tmp, "record.txt")
        r = self.run_script(root, "--record", record, "--update-record", "build")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(record) as f:
            self.assertEqual(len([line for line in f if not line.startswith("#")]), 5)
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(0 checked, 5 unchanged since the record, 0 skipped)", r.stdout)
        # The header two units read: both are checked again, and a break in it is found.
        self.write(root, "lib/gpu/kernels.h", "inline int kernels() { return missing(); }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertEqual(r.returncode, 1)
        self.assertIn("2 of the 2 units checked do not compile", r.stderr)
        self.write(root, "lib/gpu/kernels.h", "inline int kernels() { return 2; }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(2 checked, 3 unchanged since the record, 0 skipped)", r.stdout)
        # A file no unit reads changes nothing.
        self.write(root, "lib/model/conv_bn_ops.cpp", "int cpu() { return 1; }\n")
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(2 checked, 3 unchanged", r.stdout)
        # A header of a unit's GPU branch: that unit is checked again.
        self.write(
            root, "lib/cpu/gated.h", "#pragma once\n#if defined(WORKLOAD_HAVE_NCCL)\n#endif\n"
        )
        r = self.run_script(root, "--record", record, "build")
        self.assertIn("(3 checked, 2 unchanged", r.stdout)

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
