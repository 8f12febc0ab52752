"""Tests of scripts/nsys_analysis/'s layout: each sub-package imports only from those below it
(common, then capture, then sweep, bench and profile, which never import each other), no two
modules import each other in a circle, every package says in its docstring what it holds, the
package docstring lists every module, and the imports of nsys_analysis that the scripts make
resolve (the *.sh and *.py of scripts/, scripts/experiments/ and scripts/dev/; profile.sh's entry
point among them).

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_layout.py
(all tests: scripts/dev/python_tests.sh)
"""

import ast
import glob
import importlib
import os
import re
import unittest

from scripts.support.testutil import SCRIPTS_DIR

PACKAGE_DIR = os.path.join(SCRIPTS_DIR, "nsys_analysis")
# The folders of command lines: the users' (scripts/), the experiments' and the maintainers'.
SCRIPT_FOLDERS = (
    SCRIPTS_DIR,
    os.path.join(SCRIPTS_DIR, "experiments"),
    os.path.join(SCRIPTS_DIR, "dev"),
)
# What each sub-package may import from (itself always).
ALLOWED = {
    "common": set(),
    "capture": {"common"},
    "sweep": {"common", "capture"},
    "bench": {"common", "capture"},
    "profile": {"common", "capture"},
}


def modules():
    """{dotted name under nsys_analysis: path} of every module of the package."""
    out = {}
    for path in glob.glob(os.path.join(PACKAGE_DIR, "**", "*.py"), recursive=True):
        rel = os.path.relpath(path, PACKAGE_DIR)[:-3].split(os.sep)
        if rel[-1] == "__init__":
            rel = rel[:-1]
        out[".".join(rel)] = path
    return out


def imported(name, path):
    """The modules of the package (dotted, under nsys_analysis) that module `name` imports."""
    package = name.split(".") if os.path.basename(path) == "__init__.py" else name.split(".")[:-1]
    found = set()
    for node in ast.walk(ast.parse(open(path).read(), path)):
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1] + (
                    node.module.split(".") if node.module else []
                )
            elif (node.module or "").startswith("nsys_analysis."):
                base = node.module.split(".")[1:]
            else:
                continue
            found.add(".".join(base))
            found.update(".".join(base + [a.name]) for a in node.names)
        elif isinstance(node, ast.Import):
            found.update(
                a.name[len("nsys_analysis.") :]
                for a in node.names
                if a.name.startswith("nsys_analysis.")
            )
    return found


class LayoutTest(unittest.TestCase):
    def setUp(self):
        self.modules = modules()
        self.graph = {
            n: {m for m in imported(n, p) if m in self.modules and m != n}
            for n, p in self.modules.items()
        }

    def test_sub_packages_import_only_below_them(self):
        self.assertEqual({n.split(".")[0] for n in self.modules if n}, set(ALLOWED))
        for name, targets in self.graph.items():
            if not name:
                continue
            own = name.split(".")[0]
            for target in targets:
                with self.subTest(module=name, imports=target):
                    self.assertIn(target.split(".")[0], ALLOWED[own] | {own})

    def test_no_import_circles(self):
        state = {}

        def visit(n, stack):
            state[n] = "open"
            for m in sorted(self.graph[n]):
                if state.get(m) == "open":
                    self.fail("import circle: %s" % " -> ".join(stack[stack.index(m) :] + [m]))
                if m not in state:
                    visit(m, stack + [m])
            state[n] = "done"

        for n in sorted(self.graph):
            if n not in state:
                visit(n, [n])

    def test_every_package_has_a_docstring_and_the_top_one_lists_every_module(self):
        for name, path in self.modules.items():
            if os.path.basename(path) == "__init__.py":
                with self.subTest(package=name or "nsys_analysis"):
                    self.assertTrue(ast.get_docstring(ast.parse(open(path).read())))
        listed = ast.get_docstring(ast.parse(open(os.path.join(PACKAGE_DIR, "__init__.py")).read()))
        for name in self.modules:
            if "." in name:
                package, module = name.split(".")
                with self.subTest(module=name):
                    section = listed[listed.index("  %s/" % package) :]
                    section = section[: section.find("\n\n")]
                    self.assertRegex(section, r"\n    %s\s" % module)

    def test_the_scripts_imports_of_the_package_resolve(self):
        pattern = re.compile(r"from (nsys_analysis[\w.]*) import \(?([\w, ]+)")
        uses = []
        for folder in SCRIPT_FOLDERS:
            for path in glob.glob(os.path.join(folder, "*.sh")) + glob.glob(
                os.path.join(folder, "*.py")
            ):
                text = open(path).read()
                uses += [(path, m.group(1), m.group(2)) for m in pattern.finditer(text)]
        for script in (
            "analyze.py",
            "experiments/benchmarks.py",
            "experiments/nsys_signal_check.sh",
            "profile.sh",
        ):
            self.assertTrue(any(p.endswith(os.sep + script) for p, _, _ in uses), script)
        for path, module, names in uses:
            with self.subTest(script=os.path.relpath(path, SCRIPTS_DIR), module=module):
                mod = importlib.import_module(module)
                for attr in filter(None, (n.strip() for n in names.split(","))):
                    self.assertTrue(hasattr(mod, attr), "%s.%s" % (module, attr))


if __name__ == "__main__":
    unittest.main()
