#!/usr/bin/env python3
"""The layer rule of lib/: each folder includes only the folders listed before it.

The order is the one lib/CMakeLists.txt adds the folders in (its `foreach(layer ...)` line), so the
build and this test read one list. A folder's sub-folders (model/cudnn_bn, step/graph,
distributed/detail) belong to it. data_pipeline/ sits below every folder of lib/ and includes none
of them; common/ sits below data_pipeline/ and includes nothing of the project's but itself. Each
folder of lib/ (and each sub-folder with a CMakeLists.txt) builds exactly one target. The targets'
links follow the same rule (a target links only targets of its layer or of layers before it) and
form no cycle, which includes alone cannot show. No folder of the sources has the name of a
build-output folder (dist/, build/, out/, ...), which tools and .gitignore files skip.

Run from the repository root: python3 tests/lib/layers_test.py (CTest: lib_layers_test).
"""

import os
import re
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"(lib|data_pipeline|common)/([^/"]+)/?[^"]*"', re.M)
SOURCES = (".h", ".cpp", ".cu", ".cuh", ".in")


def layer_order(root):
    """The layers in the order lib/CMakeLists.txt adds them."""
    with open(os.path.join(root, "lib", "CMakeLists.txt")) as f:
        m = re.search(r"foreach\(layer ([^)]*)\)", f.read())
    if not m:
        raise ValueError("lib/CMakeLists.txt has no foreach(layer ...) line")
    return m.group(1).split()


def sources(folder):
    for dirpath, _, names in os.walk(folder):
        for name in sorted(names):
            if name.endswith(SOURCES):
                yield os.path.join(dirpath, name)


def violations(root):
    """Every include that reaches up or sideways: (file, included path, why)."""
    order = layer_order(root)
    rank = {layer: i for i, layer in enumerate(order)}
    found = []
    lib = os.path.join(root, "lib")
    for entry in sorted(os.listdir(lib)):
        folder = os.path.join(lib, entry)
        # A folder with no source and no CMakeLists.txt is no code (what a switch of branches leaves
        # of a renamed folder: empty, or build and cache files git ignores).
        holds_code = any(sources(folder)) or any(
            "CMakeLists.txt" in names for _, _, names in os.walk(folder)
        )
        if os.path.isdir(folder) and entry not in rank and holds_code:
            found.append(("lib/" + entry, "", "a folder that is no layer of lib/CMakeLists.txt"))
    for layer in order:
        for path in sources(os.path.join(lib, layer)):
            with open(path, errors="replace") as f:
                text = f.read()
            for top, folder in INCLUDE.findall(text):
                if top != "lib" or folder == layer:
                    continue
                rel = os.path.relpath(path, root)
                if folder not in rank:
                    found.append((rel, "lib/" + folder, "includes a folder that is no layer"))
                elif rank[folder] > rank[layer]:
                    found.append((rel, "lib/" + folder, "includes a layer above %s" % layer))
    for path in sources(os.path.join(root, "data_pipeline")):
        with open(path, errors="replace") as f:
            for top, folder in INCLUDE.findall(f.read()):
                if top == "lib":
                    found.append(
                        (
                            os.path.relpath(path, root),
                            "lib/" + folder,
                            "data_pipeline includes lib/",
                        )
                    )
    for path in sources(os.path.join(root, "common")):
        with open(path, errors="replace") as f:
            for top, folder in INCLUDE.findall(f.read()):
                if top != "common":
                    found.append(
                        (os.path.relpath(path, root), top + "/" + folder, "common includes " + top)
                    )
    return found


def targets_per_folder(root):
    """{folder of lib/ with a CMakeLists.txt: the targets it adds}. A target added once per kind of
    tree (lib/distributed's, smaller in the sanitizer trees) is one target."""
    out = {}
    for dirpath, _, names in os.walk(os.path.join(root, "lib")):
        if "CMakeLists.txt" in names and dirpath != os.path.join(root, "lib"):
            with open(os.path.join(dirpath, "CMakeLists.txt")) as f:
                added = re.findall(r"add_library\((\w+)", f.read())
            out[os.path.relpath(dirpath, root)] = sorted(set(added))
    return out


LINK = re.compile(r"target_link_libraries\(\s*(\w+)([^)]*)\)", re.S)
# Folder names that tools, linters and common .gitignore files take for build output and skip.
BUILD_OUTPUT_NAMES = {"dist", "build", "out", "target", "bin", "obj", "_build", "node_modules"}
SOURCE_ROOTS = ("app", "lib", "data_pipeline", "common", "scripts", "tests", "docs", "cmake")


def cmake_files(folder):
    for dirpath, _, names in os.walk(folder):
        if "CMakeLists.txt" in names:
            yield dirpath, os.path.join(dirpath, "CMakeLists.txt")


FULL_INCLUDE = re.compile(r'^\s*#\s*include\s+"(lib/[^"]+)"', re.M)


def lib_targets(root):
    """({target added under lib/: its folder, relative to lib/}, [CMakeLists.txt texts])."""
    lib = os.path.join(root, "lib")
    folder_of, texts = {}, []
    for dirpath, path in cmake_files(lib):
        with open(path) as f:
            text = f.read()
        texts.append(text)
        rel = os.path.relpath(dirpath, lib)
        if rel != ".":
            for name in re.findall(r"add_library\((\w+)", text):
                folder_of[name] = rel
    return folder_of, texts


def dependencies(root):
    """{target of lib/: {target it depends on: why}}: what it links, and the targets whose headers
    its sources include (a header belongs to the target of the nearest folder with one)."""
    folder_of, texts = lib_targets(root)
    target_in = {folder: name for name, folder in folder_of.items()}
    deps = {name: {} for name in folder_of}
    for text in texts:
        for name, rest in LINK.findall(text):
            if name in deps:
                for other in re.findall(r"[\w:]+", rest):
                    if other in folder_of:
                        deps[name][other] = "links it"

    def owner(rel_path):
        folder = os.path.dirname(rel_path)
        while folder and folder not in target_in:
            folder = os.path.dirname(folder)
        return target_in.get(folder)

    for folder, name in sorted(target_in.items()):
        for path in sources(os.path.join(root, "lib", folder)):
            rel = os.path.relpath(path, os.path.join(root, "lib"))
            if owner(rel) != name:
                continue  # a sub-folder's file: its own target's
            with open(path, errors="replace") as f:
                for included in FULL_INCLUDE.findall(f.read()):
                    other = owner(os.path.relpath(included, "lib"))
                    if other is not None and other != name and other not in deps[name]:
                        deps[name][other] = "includes " + included
    return folder_of, deps


def link_violations(root):
    """Every dependency that reaches up a layer, and every cycle: (target, what, why)."""
    rank = {layer: i for i, layer in enumerate(layer_order(root))}
    folder_of, deps = dependencies(root)

    def layer(name):
        return rank.get(folder_of[name].split(os.sep)[0], -1)

    found = []
    for name, needed in sorted(deps.items()):
        for other, why in sorted(needed.items()):
            if layer(other) > layer(name):
                found.append((name, other, "%s, a layer above %s" % (why, folder_of[name])))
    # Depth-first search; a target met again while it is on the path closes a cycle.
    state, path = {}, []

    def visit(name):
        state[name] = "open"
        path.append(name)
        for other in sorted(deps[name]):
            if state.get(other) == "open":
                cycle = path[path.index(other) :] + [other]
                whys = ["%s %s" % (a, deps[a][b]) for a, b in zip(cycle, cycle[1:])]
                found.append((name, " -> ".join(cycle), "a cycle: " + "; ".join(whys)))
            elif other not in state:
                visit(other)
        path.pop()
        state[name] = "done"

    for name in sorted(deps):
        if name not in state:
            visit(name)
    return found


def holds_files(folder):
    """Whether any file is under folder, Python's caches aside (git keeps no empty folder, but a
    copy of a tree or a switch of branches may leave the empty folders of a rename)."""
    for dirpath, dirnames, names in os.walk(folder):
        dirnames[:] = [d for d in dirnames if d != "__pycache__"]
        if names:
            return True
    return False


def build_output_folders(root):
    """Folders under the source roots named like build output (empty ones aside)."""
    found = []
    for top in SOURCE_ROOTS:
        for dirpath, dirnames, _ in os.walk(os.path.join(root, top)):
            dirnames[:] = [d for d in dirnames if d != "__pycache__"]
            for d in dirnames:
                if d in BUILD_OUTPUT_NAMES and holds_files(os.path.join(dirpath, d)):
                    found.append(os.path.relpath(os.path.join(dirpath, d), root))
    return found


def write_file(root, rel, text):
    """Writes text to root/rel, making its folders: the self-tests' small trees."""
    os.makedirs(os.path.dirname(os.path.join(root, rel)), exist_ok=True)
    with open(os.path.join(root, rel), "w") as f:
        f.write(text)


class LayersTest(unittest.TestCase):
    def test_every_include_goes_down(self):
        found = violations(ROOT)
        self.assertEqual(found, [], "\n".join("%s -> %s: %s" % v for v in found))

    def test_every_folder_builds_one_target(self):
        for folder, targets in targets_per_folder(ROOT).items():
            self.assertEqual(len(targets), 1, "%s adds %s" % (folder, targets))

    def test_every_dependency_goes_down_and_none_closes_a_cycle(self):
        found = link_violations(ROOT)
        self.assertEqual(found, [], "\n".join("%s -> %s: %s" % v for v in found))

    def test_no_source_folder_is_named_like_build_output(self):
        self.assertEqual(build_output_folders(ROOT), [])

    def test_a_link_up_and_a_cycle_are_found(self):
        """The dependency checker itself, on a small tree: a cycle through a link and an include,
        then a link up a layer."""
        with tempfile.TemporaryDirectory() as tmp:

            def write(rel, text):
                write_file(tmp, rel, text)

            write("lib/CMakeLists.txt", "foreach(layer core model run)\n")
            write("lib/core/CMakeLists.txt", "add_library(w_core STATIC a.cpp)\n")
            write(
                "lib/model/CMakeLists.txt",
                "add_library(w_model STATIC m.cpp)\ntarget_link_libraries(w_model PUBLIC w_core\n"
                "  PRIVATE w_fused)\n",
            )
            write("lib/model/m.h", "")
            write("lib/model/fused/CMakeLists.txt", "add_library(w_fused STATIC f.cpp)\n")
            write("lib/model/fused/f.cpp", '#include "lib/model/m.h"\n#include "lib/core/a.h"\n')
            write(
                "lib/run/CMakeLists.txt",
                "add_library(w_run STATIC r.cpp)\ntarget_link_libraries(w_run PRIVATE w_model)\n",
            )
            self.assertEqual(
                link_violations(tmp),
                [
                    (
                        "w_model",
                        "w_fused -> w_model -> w_fused",
                        "a cycle: w_fused includes lib/model/m.h; w_model links it",
                    )
                ],
            )
            write("lib/model/fused/f.cpp", '#include "lib/core/a.h"\n')
            self.assertEqual(link_violations(tmp), [])
            write(
                "lib/core/CMakeLists.txt",
                "add_library(w_core STATIC a.cpp)\ntarget_link_libraries(w_core PRIVATE w_run)\n",
            )
            self.assertIn(("w_core", "w_run", "links it, a layer above core"), link_violations(tmp))
            os.makedirs(os.path.join(tmp, "lib", "model", "dist", "detail"))
            os.makedirs(os.path.join(tmp, "lib", "out", "__pycache__"))
            self.assertEqual(build_output_folders(tmp), [])  # empty: a rename's leftovers
            write("lib/model/dist/detail/x.h", "")
            self.assertEqual(build_output_folders(tmp), [os.path.join("lib", "model", "dist")])

    def test_a_violation_is_found(self):
        """The checker itself, on a small tree with one include up and one sideways."""
        with tempfile.TemporaryDirectory() as tmp:

            def write(rel, text):
                write_file(tmp, rel, text)

            write("lib/CMakeLists.txt", "foreach(layer core run)\n")
            write("lib/core/a.h", '#include "lib/run/b.h"\n')
            write("lib/run/b.h", '#include "lib/core/a.h"\n#include "lib/core/sub/c.h"\n')
            write("lib/run/detail/d.cpp", '#include "lib/run/b.h"\n')
            write("lib/extra/e.h", "")
            # What a switch of branches leaves of a renamed folder is no folder of code.
            write("lib/renamed/__pycache__/x.pyc", "")
            os.makedirs(os.path.join(tmp, "lib", "empty"))
            write("data_pipeline/x.h", '#include "lib/core/a.h"\n#include "common/h.h"\n')
            write("common/h.h", '#include "common/g.h"\n#include "data_pipeline/x.h"\n')
            found = violations(tmp)
            self.assertIn(("lib/core/a.h", "lib/run", "includes a layer above core"), found)
            self.assertIn(
                ("lib/extra", "", "a folder that is no layer of lib/CMakeLists.txt"), found
            )
            self.assertIn(("data_pipeline/x.h", "lib/core", "data_pipeline includes lib/"), found)
            self.assertIn(
                ("common/h.h", "data_pipeline/x.h", "common includes data_pipeline"), found
            )
            self.assertEqual(len(found), 4, found)


if __name__ == "__main__":
    sys.exit(unittest.main())
