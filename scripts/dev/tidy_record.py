#!/usr/bin/env python3
"""The keys of clang-tidy's record of clean units (scripts/dev/check_tidy.sh --record).

A unit's key is a SHA-256 over what clang-tidy's verdict on it depends on: the tool's version,
.clang-tidy, the unit's compile command, and every file the compiler read for it (the build's
dependency list, `ninja -t deps`): the content of the tree's files (the unit, the project's headers,
what the build generated), the path of the others (LibTorch's, the system's). The repository's and
the build directory's absolute paths are left out, so that a clone elsewhere gives the same keys.
So does the machine: the version is `clang-tidy --version`'s first line (the others name the host's
CPU), and a system header's content is left out, because a fresh machine's packages differ from the
record's by patch releases that leave a verdict on the project's code as it was (every unit was
checked again on each new machine when contents counted, 10 minutes of CI's two cores). A unit whose
key is in the record was found clean with these inputs; a change to one of them (a project file, a
header read or no longer read, another LibTorch's paths, the tool, its settings, the flags) gives
another key, and check_tidy.sh checks that unit again. check_tidy.sh without --record checks them
all.

A unit compiled with LibTorch's precompiled header (WORKLOAD_PCH,
cmake/TorchPrecompiledHeader.cmake) is checked without it, as it is written: its command's
precompiled-header arguments are left out, of the key and of what clang-tidy runs.

    tidy_record.py BUILD_DIR UNIT...

prints "KEY UNIT" for each unit (UNIT relative to the repository root, as compile_commands.json
names it from there), with "-" for KEY where the build has no dependency list for the unit (not
built yet). The tool's version is read from `clang-tidy --version` (CLANG_TIDY: another binary).

    tidy_record.py --plain-db BUILD_DIR OUT_DIR

writes OUT_DIR/compile_commands.json: BUILD_DIR's, without the precompiled-header arguments, for
clang-tidy -p OUT_DIR. Run from the repository root.
"""

import hashlib
import json
import os
import shlex
import subprocess
import sys
from typing import Dict, List, Optional


def file_digest(path: str, cache: Dict[str, str]) -> str:
    """The SHA-256 of a file's content ("missing" for a file that is gone)."""
    if path not in cache:
        try:
            with open(path, "rb") as f:
                cache[path] = hashlib.sha256(f.read()).hexdigest()
        except OSError:
            cache[path] = "missing"
    return cache[path]


def dependency_lists(build: str) -> Dict[str, List[str]]:
    """{object file, relative to the build directory: the files the compiler read for it}; empty
    where the build is not Ninja's or ninja is missing (then every unit has no key)."""
    try:
        out = subprocess.run(
            ["ninja", "-C", build, "-t", "deps"], capture_output=True, text=True, check=True
        ).stdout
    except (OSError, subprocess.CalledProcessError):
        return {}
    deps: Dict[str, List[str]] = {}
    current: Optional[List[str]] = None
    for line in out.splitlines():
        if line.startswith("    "):
            if current is not None:
                current.append(line.strip())
        elif ": #deps" in line:
            name, _, status = line.partition(": #deps")
            current = [] if "(VALID)" in status else None
            if current is not None:
                deps[name] = current
        else:
            current = None
    return deps


def plain_arguments(command: str) -> Optional[List[str]]:
    """The command's arguments without those of CMake's precompiled header (-Winvalid-pch, and
    clang's "-Xclang -include-pch -Xclang FILE.pch -Xclang -include -Xclang .../cmake_pch.hxx" or
    gcc's "-include .../cmake_pch.hxx"); None when it has none."""
    args = shlex.split(command)
    out: List[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "-Winvalid-pch":
            i += 1
            continue
        if arg == "-Xclang" and i + 3 < len(args) and args[i + 2] == "-Xclang":
            option, value = args[i + 1], args[i + 3]
            if option == "-include-pch" or (option == "-include" and is_pch_header(value)):
                i += 4
                continue
        if arg == "-include" and i + 1 < len(args) and is_pch_header(args[i + 1]):
            i += 2
            continue
        out.append(arg)
        i += 1
    return out if len(out) < len(args) else None


def is_pch_header(path: str) -> bool:
    return os.path.basename(path).startswith("cmake_pch.")


def plain_command(command: str) -> str:
    """The command as clang-tidy runs it: unchanged, or without the precompiled header."""
    args = plain_arguments(command)
    return command if args is None else shlex.join(args)


def write_plain_db(build: str, out_dir: str) -> None:
    with open(os.path.join(build, "compile_commands.json")) as db:
        entries = json.load(db)
    plain = []
    for e in entries:
        args = plain_arguments(e["command"])
        if args is None:
            plain.append(e)
        else:
            plain.append({k: v for k, v in e.items() if k != "command"} | {"arguments": args})
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "compile_commands.json"), "w") as f:
        json.dump(plain, f, indent=1)


def unit_keys(build: str, units: List[str]) -> Dict[str, Optional[str]]:
    root = os.getcwd()
    build_abs = os.path.abspath(build)

    def portable(text: str) -> str:
        return text.replace(build_abs, "<build>").replace(root, "<root>")

    tool = os.environ.get("CLANG_TIDY", "clang-tidy")
    version_lines = subprocess.run([tool, "--version"], capture_output=True, text=True).stdout
    version = next((line for line in version_lines.splitlines() if line.strip()), "")
    with open(".clang-tidy", "rb") as config_file:
        config = config_file.read()
    with open(os.path.join(build, "compile_commands.json")) as db:
        commands = {os.path.relpath(e["file"], root): e for e in json.load(db)}
    deps = dependency_lists(build)
    cache: Dict[str, str] = {}
    keys: Dict[str, Optional[str]] = {}
    for unit in units:
        entry = commands.get(unit)
        args = shlex.split(entry["command"]) if entry else []
        obj = args[args.index("-o") + 1] if "-o" in args[:-1] else None
        files = deps.get(obj) if obj else None
        if entry is None or files is None:
            keys[unit] = None
            continue
        h = hashlib.sha256()
        command = plain_command(entry["command"])
        for part in (version.encode(), config, portable(command).encode()):
            h.update(hashlib.sha256(part).digest())
        # Sorted by the portable name: sorting by the absolute one would order the tree's files
        # against the system's (/tmp/... before /usr/..., /work/... after) by where the tree is.
        read = sorted(
            (portable(full), full)
            for full in (p if os.path.isabs(p) else os.path.join(build_abs, p) for p in files)
        )
        for name, full in read:
            inside = name.startswith("<root>") or name.startswith("<build>")
            h.update(("%s %s\n" % (name, file_digest(full, cache) if inside else "")).encode())
        keys[unit] = h.hexdigest()
    return keys


def main(argv: List[str]) -> int:
    if len(argv) < 2 or argv[0] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    if argv[0] == "--plain-db":
        if len(argv) != 3:
            print("tidy_record.py: error: --plain-db needs BUILD_DIR OUT_DIR", file=sys.stderr)
            return 2
        if not os.path.isfile(os.path.join(argv[1], "compile_commands.json")):
            print(
                "tidy_record.py: error: %s/compile_commands.json not found" % argv[1],
                file=sys.stderr,
            )
            return 2
        write_plain_db(argv[1], argv[2])
        return 0
    build, units = argv[0], argv[1:]
    if not os.path.isfile(os.path.join(build, "compile_commands.json")):
        print("tidy_record.py: error: %s/compile_commands.json not found" % build, file=sys.stderr)
        return 2
    for unit, key in unit_keys(build, units).items():
        print("%s %s" % (key or "-", unit))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
