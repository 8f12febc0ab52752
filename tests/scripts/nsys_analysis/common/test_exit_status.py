"""Tests for scripts/nsys_analysis/common/exit_status.py against the project's one table of exit
statuses: "Exit statuses" in docs/failures.md (which tests/lib/core/exit_status_test.cpp checks
against lib/core/exit_status.cpp, row for row). Each constant the scripts return is a status of
that table, for the scripts that return it."""

import contextlib
import io
import os
import re
import signal
import unittest

from nsys_analysis.common import exit_status

REPO = os.path.join(os.path.dirname(__file__), "..", "..", "..", "..")
PAGE = os.path.join(REPO, "docs", "failures.md")


def page_rows():
    """{status: [who, ...]} of the page's table."""
    with open(PAGE) as f:
        text = f.read()
    section = text.split("\n## Exit statuses\n", 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0] not in ("status", "---"):
            rows.setdefault(cells[0], []).append(cells[1])
    return rows


class ExitStatusTest(unittest.TestCase):
    def test_every_constant_is_a_status_of_the_table(self):
        rows = page_rows()
        for name, value in exit_status.ALL.items():
            status = str(value) if value < 128 else "128 + N"  # a signal's: the one row of them all
            self.assertIn(status, rows, "%s = %d is not in the page's table" % (name, value))

    def test_the_scripts_own_statuses_are_theirs_in_the_table(self):
        rows = page_rows()
        self.assertTrue(any("analyze.py" in who for who in rows[str(exit_status.CHECKS_FAILED)]))
        self.assertTrue(any("sweep.py" in who for who in rows[str(exit_status.DEADLINE)]))
        for common in (exit_status.OK, exit_status.FAILURE, exit_status.USAGE):
            self.assertIn("every program and script", rows[str(common)])
        self.assertEqual(exit_status.INTERRUPTED, 128 + signal.SIGINT)
        self.assertTrue(any("Python scripts (130 on Ctrl-C)" in who for who in rows["128 + N"]))

    def test_the_scripts_return_names_not_numbers(self):
        scripts = os.path.join(REPO, "scripts")
        for path in (
            "analyze.py",
            "sweep.py",
            "kernel_families.py",
            "experiments/benchmarks.py",
            "experiments/bench_batchnorm.py",
        ):
            with open(os.path.join(scripts, path)) as f:
                text = f.read()
            self.assertEqual(re.findall(r"^\s*return [0-9]+\s*$", text, re.M), [], path)
            # Ctrl-C ends it with one line and INTERRUPTED
            self.assertIn('exit_with(main, "%s")' % os.path.basename(path), text, path)

    def test_ctrl_c_is_one_line_and_130(self):
        def interrupted():
            raise KeyboardInterrupt

        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            exit_status.exit_with(interrupted, "x.py")
        self.assertEqual(e.exception.code, exit_status.INTERRUPTED)
        self.assertEqual(err.getvalue(), "\nx.py: interrupted\n")
        with self.assertRaises(SystemExit) as e:
            exit_status.exit_with(lambda: exit_status.USAGE, "x.py")
        self.assertEqual(e.exception.code, exit_status.USAGE)

    def test_sigterm_unwinds_as_ctrl_c_does_and_is_143(self):
        cleaned = []

        def terminated():
            try:
                os.kill(os.getpid(), signal.SIGTERM)
                for _ in range(1000):  # the handler runs between bytecodes
                    pass
            finally:
                cleaned.append(True)
            return exit_status.OK

        previous = signal.getsignal(signal.SIGTERM)
        self.addCleanup(signal.signal, signal.SIGTERM, previous)
        err = io.StringIO()
        with contextlib.redirect_stderr(err), self.assertRaises(SystemExit) as e:
            exit_status.exit_with(terminated, "x.py")
        self.assertEqual(e.exception.code, exit_status.TERMINATED)
        self.assertEqual(e.exception.code, 128 + signal.SIGTERM)
        self.assertEqual(err.getvalue(), "\nx.py: terminated\n")
        self.assertEqual(cleaned, [True])


if __name__ == "__main__":
    unittest.main()
