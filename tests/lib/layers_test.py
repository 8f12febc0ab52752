#!/usr/bin/env python3
"""The layer rule of lib/: each folder includes only the folders listed before it.

The order is the one lib/CMakeLists.txt adds the folders in (its `foreach(layer ...)` line), so the
build and this test read one list. A folder's sub-folders (model/cudnn_bn, step/graph,
distributed/detail) belong to it. data_pipeline/ sits below every folder of lib/ and includes none
of them. Each folder of lib/ (and each sub-folder with a CMakeLists.txt) builds exactly one target.

Run from the repository root: python3 tests/lib/layers_test.py (CTest: lib_layers_test).
"""

import os
import re
import sys
import tempfile
import unittest

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
INCLUDE = re.compile(r'^\s*#\s*include\s+"(lib|data_pipeline)/([^/"]+)/?[^"]*"', re.M)
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
    return found


def targets_per_folder(root):
    """{folder of lib/ with a CMakeLists.txt: the targets it adds}."""
    out = {}
    for dirpath, _, names in os.walk(os.path.join(root, "lib")):
        if "CMakeLists.txt" in names and dirpath != os.path.join(root, "lib"):
            with open(os.path.join(dirpath, "CMakeLists.txt")) as f:
                out[os.path.relpath(dirpath, root)] = re.findall(r"add_library\((\w+)", f.read())
    return out


class LayersTest(unittest.TestCase):
    def test_every_include_goes_down(self):
        found = violations(ROOT)
        self.assertEqual(found, [], "\n".join("%s -> %s: %s" % v for v in found))

    def test_every_folder_builds_one_target(self):
        for folder, targets in targets_per_folder(ROOT).items():
            self.assertEqual(len(targets), 1, "%s adds %s" % (folder, targets))

    def test_a_violation_is_found(self):
        """The checker itself, on a small tree with one include up and one sideways."""
        with tempfile.TemporaryDirectory() as tmp:

            def write(rel, text):
                os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
                with open(os.path.join(tmp, rel), "w") as f:
                    f.write(text)

            write("lib/CMakeLists.txt", "foreach(layer core run)\n")
            write("lib/core/a.h", '#include "lib/run/b.h"\n')
            write("lib/run/b.h", '#include "lib/core/a.h"\n#include "lib/core/sub/c.h"\n')
            write("lib/run/detail/d.cpp", '#include "lib/run/b.h"\n')
            write("lib/extra/e.h", "")
            # What a switch of branches leaves of a renamed folder is no folder of code.
            write("lib/renamed/__pycache__/x.pyc", "")
            os.makedirs(os.path.join(tmp, "lib", "empty"))
            write("data_pipeline/x.h", '#include "lib/core/a.h"\n')
            found = violations(tmp)
            self.assertIn(("lib/core/a.h", "lib/run", "includes a layer above core"), found)
            self.assertIn(
                ("lib/extra", "", "a folder that is no layer of lib/CMakeLists.txt"), found
            )
            self.assertIn(("data_pipeline/x.h", "lib/core", "data_pipeline includes lib/"), found)
            self.assertEqual(len(found), 3, found)


if __name__ == "__main__":
    sys.exit(unittest.main())
