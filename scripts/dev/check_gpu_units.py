#!/usr/bin/env python3
"""Compiles, on a machine without a GPU, what only a GPU build compiles.

A CPU build (Debian's LibTorch, no CUDA) leaves out the CUDA-only units (the cuDNN graph and
batch-norm code, the kernels, the GPU decoder and their tests) and the GPU branches of the units it
compiles (#if defined(WORKLOAD_TORCH_CUDA) and the WORKLOAD_HAVE_* switches). Nothing else compiles
them before a GPU machine does, so a change to a header they use could break the GPU tree unseen
(it did once: docs/testing.md). This checks them with the GPU build's switches on:

- a GPU-only .cpp unit with the CPU build's compiler and flags (those of lib/model/conv_bn_ops.cpp
  in BUILD_DIR's compile_commands.json), -fsyntax-only, plus the CUDA toolkit's headers;
- a GPU-only .cu unit with nvcc, compiled for sm_90 and thrown away;
- a unit of the CPU build whose text, or a header of the tree it includes, tests a switch: its own
  command (its target's defines), -fsyntax-only, plus the switches and the toolkit's headers.

The GPU-only units are the tracked .cpp and .cu files of app/, lib/, data_pipeline/ and tests/ that
BUILD_DIR does not compile, less those that other builds compile (NOT_GPU_ONLY below), and less
tests/ where BUILD_DIR has no tests. The switches are those a GPU build with BUILD_DIR's LibTorch
would set (CMakeLists.txt): against Debian's LibTorch 1.13 neither the memset rewrite's (2.8) nor
NCCL's (c10d's ProcessGroup::setBoundDeviceId), and the code takes its 1.x branches. LibTorch's
generated c10/cuda/impl/cuda_cmake_macros.h, which a CPU LibTorch lacks, is stood in for by an empty
header. A unit that needs a header of an optional library the machine lacks (nvJPEG, NCCL) is
skipped, saying which.

    check_gpu_units.py [--if-available] [--record FILE [--update-record]] [BUILD_DIR] [UNIT...]

BUILD_DIR: a configured CPU build (default build/). UNIT...: these units instead of the sets above
(a unit BUILD_DIR compiles is checked for its GPU branches). --if-available: exit 0 with a note
where there is nothing to check this way (no CUDA toolkit or cuDNN header, or a GPU build, which
compiles every unit with its switches itself). --record FILE: skip the units FILE records as
compiled with the very same inputs (the compiler's version, the command, and every file the unit
reads: the content of the tree's, the path of the others), as check_tidy.sh's record does;
--update-record rewrites FILE once every checked unit compiled. JOBS units run at once (default:
the cores). Exit 1 when a unit fails (its first errors printed), 2 for a usage error.
"""

import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from typing import Dict, List, Optional, Tuple

# The switches a GPU build with every optional part sets (CMakeLists.txt's WORKLOAD_HAVE_*), less
# those that depend on LibTorch's version (gpu_switches).
GPU_DEFINES = [
    "WORKLOAD_TORCH_CUDA",
    "WORKLOAD_HAVE_NVJPEG",
    "WORKLOAD_HAVE_FUSED_BN",
    "WORKLOAD_HAVE_CUDNN_GRAPH",
    "WORKLOAD_HAVE_BN_STATS_KERNELS",
    "WORKLOAD_HAVE_MAX_POOL_KERNELS",
]
# The memset rewrite needs LibTorch 2.8; the NCCL group, c10d's ProcessGroup::setBoundDeviceId.
GRAPH_REWRITE = "WORKLOAD_HAVE_GRAPH_REWRITE"
GRAPH_REWRITE_TORCH = (2, 8)
NCCL = ["WORKLOAD_HAVE_NCCL", "USE_C10D_NCCL"]
# A unit whose text, or a header of the tree it includes, tests one of these has GPU branches.
SWITCH = re.compile(r"\b(%s)\b" % "|".join(GPU_DEFINES + [GRAPH_REWRITE, NCCL[0]]))
INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"([^"]+)"', re.M)
SOURCE_DIRS = ("app", "lib", "data_pipeline", "tests")
# Units a CPU build leaves out that are not a GPU build's: no_c10d.cpp is built where LibTorch has
# no c10d, the fuzzer only in the sanitizer tree.
NOT_GPU_ONLY = {"lib/distributed/no_c10d.cpp", "tests/data_pipeline/fuzz/jpeg_fuzzer.cpp"}
# Headers of optional libraries: a unit that misses one is skipped, not failed.
OPTIONAL_HEADERS = ("nvjpeg.h", "nccl.h")
REFERENCE_UNIT = "lib/model/conv_bn_ops.cpp"
MISSING = re.compile(r"fatal error: '?([\w./]+)'?(?::| file not found)")


def tracked_units(root: str) -> List[str]:
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "--", "*.cpp", "*.cu"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return [u for u in out.split() if u.split("/")[0] in SOURCE_DIRS]


def compiled_units(root: str, db: List[dict]) -> Dict[str, dict]:
    """The build's compile_commands.json entries by unit (relative to root)."""
    return {os.path.relpath(os.path.join(e.get("directory", ""), e["file"]), root): e for e in db}


def gpu_only_units(root: str, db: List[dict]) -> List[str]:
    compiled = compiled_units(root, db)
    has_tests = any(u.startswith("tests/") for u in compiled)
    return sorted(
        u
        for u in tracked_units(root)
        if u not in compiled and u not in NOT_GPU_ONLY and (has_tests or not u.startswith("tests/"))
    )


def gpu_branch_units(root: str, db: List[dict]) -> List[str]:
    """The .cpp units the build compiles whose text, or a header of the tree they include (directly
    or not), tests a GPU switch: the build compiled them without their GPU branches."""
    out = subprocess.run(
        ["git", "-C", root, "ls-files", "-z"], capture_output=True, text=True, check=True
    ).stdout
    texts: Dict[str, str] = {}
    for rel in out.split("\0"):
        path = os.path.join(root, rel)
        if rel.endswith((".h", ".hpp", ".cuh", ".inc", ".cpp", ".cu")) and os.path.isfile(path):
            with open(path, errors="replace") as f:
                texts[rel] = f.read()

    def resolve(name: str, including: str) -> Optional[str]:
        for rel in (name, os.path.normpath(os.path.join(os.path.dirname(including), name))):
            if rel in texts:
                return rel
        return None

    includes = {
        rel: {h for h in (resolve(n, rel) for n in INCLUDE.findall(text)) if h is not None}
        for rel, text in texts.items()
    }
    # The files that test a switch, then those that include one of them, until none is added.
    gated = {rel for rel, text in texts.items() if SWITCH.search(text)}
    while True:
        more = {rel for rel, headers in includes.items() if rel not in gated and headers & gated}
        if not more:
            break
        gated |= more

    return sorted(
        u
        for u in compiled_units(root, db)
        if u.endswith(".cpp") and u.split("/")[0] in SOURCE_DIRS and u in gated
    )


def cmake_cache(build: str) -> Dict[str, str]:
    values: Dict[str, str] = {}
    try:
        with open(os.path.join(build, "CMakeCache.txt")) as f:
            for line in f:
                name, sep, value = line.rstrip("\n").partition("=")
                if sep and not line.startswith(("#", "//")):
                    values[name.split(":")[0]] = value
    except OSError:
        pass
    return values


def gpu_switches(build: str) -> List[str]:
    """The switches a GPU build with this build's LibTorch would set (CMakeLists.txt): GPU_DEFINES,
    the memset rewrite's from LibTorch 2.8, NCCL's where c10d's ProcessGroup can be bound to a
    device (setBoundDeviceId). Read from BUILD_DIR's cache; without one, all of them."""
    cache = cmake_cache(build)
    switches = list(GPU_DEFINES)
    version = re.match(r"(\d+)\.(\d+)", cache.get("WORKLOAD_TORCH_VERSION", ""))
    if version is None or (int(version.group(1)), int(version.group(2))) >= GRAPH_REWRITE_TORCH:
        switches.append(GRAPH_REWRITE)
    c10d = cache.get("WORKLOAD_C10D_INCLUDE_DIR", "")
    group = os.path.join(c10d, "torch", "csrc", "distributed", "c10d", "ProcessGroup.hpp")
    bound = False
    if c10d and os.path.isfile(group):
        with open(group, errors="replace") as f:
            bound = "setBoundDeviceId" in f.read()
    if bound or not cache:
        switches += NCCL
    return switches


def cuda_include() -> Optional[str]:
    """The CUDA toolkit's include directory (where cuda_runtime.h is), or None."""
    candidates = []
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(os.path.join(os.path.dirname(os.path.dirname(nvcc)), "include"))
    for var in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(var):
            candidates.append(os.path.join(os.environ[var], "include"))
    candidates.append("/usr/local/cuda/include")
    for d in candidates:
        if os.path.isfile(os.path.join(d, "cuda_runtime.h")):
            return d
    return None


def find_nvcc(include: str) -> Optional[str]:
    near = os.path.join(os.path.dirname(include), "bin", "nvcc")
    return near if os.access(near, os.X_OK) else shutil.which("nvcc")


def unit_flags(entry: dict) -> Tuple[str, List[str]]:
    """The compiler and flags of a compile_commands.json entry, without its output, the unit and the
    precompiled header's arguments (clang's "-Xclang -include-pch -Xclang FILE -Xclang -include
    -Xclang .../cmake_pch.hxx", gcc's "-include .../cmake_pch.hxx", -Winvalid-pch)."""
    args = shlex.split(entry["command"]) if "command" in entry else list(entry["arguments"])
    flags: List[str] = []
    i = 1
    while i < len(args):
        a = args[i]
        ahead = args[i + 1 : i + 4]
        if a in ("-o", "-MF", "-MT", "-MQ"):
            i += 2
        elif a == "-include" and ahead and "cmake_pch" in ahead[0]:
            i += 2
        elif (
            a == "-Xclang"
            and len(ahead) == 3
            and ahead[1] == "-Xclang"
            and (ahead[0] == "-include-pch" or (ahead[0] == "-include" and "cmake_pch" in ahead[2]))
        ):
            i += 4
        elif a in ("-c", "-MD", "-MMD", "-Winvalid-pch") or a.endswith(".cpp"):
            i += 1
        else:
            flags.append(a)
            i += 1
    return args[0], flags


def reference_flags(root: str, db: List[dict]) -> Tuple[str, List[str]]:
    """unit_flags of the build's REFERENCE_UNIT: those a GPU-only unit is compiled with."""
    entry = compiled_units(root, db).get(REFERENCE_UNIT)
    if entry is None:
        raise LookupError("the build does not compile %s" % REFERENCE_UNIT)
    return unit_flags(entry)


class Checker:
    """Compiles units as a GPU build would: a GPU-only unit with the reference unit's flags, a unit
    of the build (own) with its own, each with the switches and the CUDA toolkit's headers."""

    def __init__(
        self, root: str, build: str, db: List[dict], cuda_inc: str, stub: str, own: List[str]
    ):
        self.root = root
        self.build = os.path.abspath(build)
        self.stub = stub
        self.cxx, base = reference_flags(root, db)
        self.nvcc = find_nvcc(cuda_inc)
        defines = ["-D" + d for d in gpu_switches(build)]
        extra = defines + ["-isystem", cuda_inc, "-isystem", stub]
        self.cpp_args = base + extra
        entries = compiled_units(root, db)
        self.own: Dict[str, Tuple[str, List[str]]] = {}
        for unit in own:
            cxx, flags = unit_flags(entries[unit])
            self.own[unit] = (cxx, flags + extra)
        includes: List[str] = []
        i = 0
        while i < len(base):  # nvcc: the include directories and the standard only
            if base[i] in ("-I", "-isystem") and i + 1 < len(base):
                includes += [base[i], base[i + 1]]
                i += 2
                continue
            if base[i].startswith("-I") or base[i].startswith("-std="):
                includes.append(base[i])
            i += 1
        self.cu_args = includes + defines + ["-isystem", stub, "-arch=sm_90"]
        self.versions = {
            tool: self.version(tool)
            for tool in {self.cxx, self.nvcc} | {cxx for cxx, _ in self.own.values()}
            if tool
        }
        self.digests: Dict[str, str] = {}

    @staticmethod
    def version(tool: str) -> str:
        out = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
        lines = [line for line in out.splitlines() if line.strip()]
        return lines[-1] if "nvcc" in tool else (lines[0] if lines else "")

    def command(self, unit: str, deps: bool) -> List[str]:
        path = os.path.join(self.root, unit)
        if unit.endswith(".cu"):
            if deps:
                return [self.nvcc or "nvcc", "-M"] + self.cu_args + [path]
            return [self.nvcc or "nvcc", "-c", "-o", os.devnull] + self.cu_args + [path]
        cxx, args = self.own.get(unit, (self.cxx, self.cpp_args))
        return [cxx, "-M" if deps else "-fsyntax-only"] + args + [path]

    def portable(self, text: str) -> str:
        """Without the paths of this tree, its build and the stub (a clone elsewhere, or another
        run, gives the same keys)."""
        text = text.replace(self.stub, "<stub>")
        return text.replace(self.build, "<build>").replace(self.root, "<root>")

    def key(self, unit: str) -> Optional[str]:
        """A digest of what the unit's compile depends on; None where its dependencies could not be
        listed (a missing header: the check then runs and says so)."""
        r = subprocess.run(self.command(unit, deps=True), capture_output=True, text=True)
        if r.returncode != 0:
            return None
        files = sorted(set(r.stdout.replace("\\\n", " ").split()[1:]))
        h = hashlib.sha256()
        command = self.command(unit, deps=False)
        h.update(self.versions.get(command[0], "").encode())
        h.update(self.portable(shlex.join(command)).encode())
        for f in sorted((self.portable(os.path.abspath(f)), os.path.abspath(f)) for f in files):
            inside = f[0].startswith("<root>") or f[0].startswith("<build>")
            h.update(("%s %s\n" % (f[0], self.digest(f[1]) if inside else "")).encode())
        return h.hexdigest()

    def digest(self, path: str) -> str:
        if path not in self.digests:
            try:
                with open(path, "rb") as f:
                    self.digests[path] = hashlib.sha256(f.read()).hexdigest()
            except OSError:
                self.digests[path] = "missing"
        return self.digests[path]

    def check(self, unit: str) -> Tuple[str, str]:
        """("ok" | "skipped" | "failed", what to print)."""
        if unit.endswith(".cu") and not self.nvcc:
            return "skipped", "%s: skipped: no nvcc" % unit
        r = subprocess.run(self.command(unit, deps=False), capture_output=True, text=True)
        if r.returncode == 0:
            return "ok", ""
        text = r.stdout + r.stderr
        m = MISSING.search(text)
        if m and os.path.basename(m.group(1)) in OPTIONAL_HEADERS:
            return "skipped", "%s: skipped: %s is not installed" % (unit, m.group(1))
        errors = [line for line in text.splitlines() if "error" in line][:8]
        return "failed", "%s: does not compile with the GPU build's switches:\n  %s" % (
            unit,
            "\n  ".join(self.portable(e) for e in errors or text.splitlines()[-8:]),
        )


def read_record(path: str) -> Dict[str, str]:
    keys: Dict[str, str] = {}
    if os.path.isfile(path):
        with open(path) as f:
            for line in f:
                if line.strip() and not line.startswith("#"):
                    key, _, unit = line.strip().partition(" ")
                    keys[unit] = key
    return keys


def main(argv: List[str]) -> int:
    if_available = update = False
    record: Optional[str] = None
    rest: List[str] = []
    i = 0
    while i < len(argv):
        a = argv[i]
        if a in ("-h", "--help"):
            print(__doc__.strip())
            return 0
        if a == "--if-available":
            if_available = True
        elif a == "--update-record":
            update = True
        elif a == "--record":
            if i + 1 >= len(argv):
                print("check_gpu_units.py: error: --record needs a FILE", file=sys.stderr)
                return 2
            record = argv[i + 1]
            i += 1
        elif a.startswith("-"):
            print("check_gpu_units.py: error: unknown option %s" % a, file=sys.stderr)
            return 2
        else:
            rest.append(a)
        i += 1
    if update and not record:
        print("check_gpu_units.py: error: --update-record needs --record FILE", file=sys.stderr)
        return 2
    build = rest[0] if rest else "build"
    explicit = rest[1:]
    root = os.getcwd()
    db_path = os.path.join(build, "compile_commands.json")

    def unavailable(why: str) -> int:
        print("check_gpu_units.py: %s" % why, file=sys.stderr)
        return 0 if if_available else 2

    if not os.path.isfile(db_path):
        print(
            "check_gpu_units.py: error: %s not found: configure %s first" % (db_path, build),
            file=sys.stderr,
        )
        return 2
    with open(db_path) as f:
        db = json.load(f)
    for u in explicit:
        if not os.path.isfile(os.path.join(root, u)):
            print("check_gpu_units.py: error: %s: no such unit" % u, file=sys.stderr)
            return 2
    compiled = compiled_units(root, db)
    if explicit:  # a unit the build compiles is checked for its GPU branches
        own = [u for u in explicit if u in compiled and u.endswith(".cpp")]
        only = [u for u in explicit if u not in own]
    else:
        only = gpu_only_units(root, db)
        own = gpu_branch_units(root, db) if only else []
    if not only and not own:
        return unavailable("%s compiles every unit itself (a GPU build): nothing to check" % build)
    units = only + own
    inc = cuda_include()
    if inc is None:
        return unavailable("skipped: no CUDA toolkit headers (cuda_runtime.h; set CUDA_HOME)")
    if not os.path.isfile(os.path.join(inc, "cudnn.h")) and not any(
        os.path.isfile(os.path.join(d, "cudnn.h")) for d in ("/usr/include", "/usr/local/include")
    ):
        return unavailable("skipped: no cuDNN header (cudnn.h)")
    with tempfile.TemporaryDirectory() as stub:
        macros = os.path.join(stub, "c10", "cuda", "impl")
        os.makedirs(macros)
        with open(os.path.join(macros, "cuda_cmake_macros.h"), "w") as f:
            f.write("#pragma once\n")
        try:
            checker = Checker(root, build, db, inc, stub, own)
        except LookupError as e:
            print("check_gpu_units.py: error: %s" % e, file=sys.stderr)
            return 2
        jobs = int(os.environ.get("JOBS", os.cpu_count() or 2))
        recorded = read_record(record) if record else {}
        with ThreadPoolExecutor(max_workers=jobs) as pool:
            keys = dict(zip(units, pool.map(checker.key, units))) if record else {}
            todo = [u for u in units if not (keys.get(u) and recorded.get(u) == keys[u])]
            results = dict(zip(todo, pool.map(checker.check, todo)))
    failed = [u for u, (state, _) in results.items() if state == "failed"]
    skipped = [u for u, (state, _) in results.items() if state == "skipped"]
    for u in sorted(results):
        if results[u][1]:
            print(results[u][1], file=sys.stderr if results[u][0] == "failed" else sys.stdout)
    if failed:
        print(
            "check_gpu_units.py: %d of the %d units checked do not compile with the GPU build's "
            "switches" % (len(failed), len(todo)),
            file=sys.stderr,
        )
        return 1
    if update and record:
        with open(record, "w") as f:
            f.write(
                "# The units that compile with a GPU build's switches on a CPU machine: KEY UNIT "
                "(scripts/dev/check_gpu_units.py --record FILE --update-record)\n"
            )
            for u in units:
                if keys.get(u) and u not in skipped:
                    f.write("%s %s\n" % (keys[u], u))
    print(
        "check_gpu_units.py: %d GPU-only units and the GPU branches of %d others compile "
        "(%d checked, %d unchanged since the record, %d skipped)"
        % (
            len([u for u in only if u not in skipped]),
            len([u for u in own if u not in skipped]),
            len(todo),
            len(units) - len(todo),
            len(skipped),
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
