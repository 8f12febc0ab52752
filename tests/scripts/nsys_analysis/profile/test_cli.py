"""Tests for scripts/nsys_analysis/profile/cli.py: profile.sh's flags in both spellings and any
order, what goes to the training binary and what is a wrapped command, -h/--help, and each usage
error's message.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_cli.py
(all tests: scripts/dev/python_tests.sh)
"""

import unittest

from nsys_analysis.common.exit_status import USAGE
from nsys_analysis.profile.cli import HELP, Options, check_nsys_opts, count, parse_args
from nsys_analysis.profile.errors import UsageError


class ParseTest(unittest.TestCase):
    def usage_error(self, *argv):
        with self.assertRaises(UsageError) as cm:
            parse_args(argv)
        self.assertEqual(cm.exception.status, USAGE)
        return cm.exception.message

    def test_defaults(self):
        self.assertEqual(parse_args(["--prefix", "out/x"]), Options(prefix="out/x"))

    def test_every_flag_in_both_spellings(self):
        for argv in (
            ["--prefix", "p", "--binary", "b", "--nproc", "2", "--nsys-opt", "--a=1"],
            ["--prefix=p", "--binary=b", "--nproc=2", "--nsys-opt=--a=1"],
        ):
            o = parse_args(argv + ["--no-untraced", "--lean", "--analyze", "--dry-run"])
            self.assertEqual(
                (o.prefix, o.binary, o.nproc, o.nsys_opts), ("p", "b", 2, ["--a=1"]), argv
            )
            self.assertEqual((o.untraced, o.lean, o.analyze, o.dry_run), (False, True, True, True))
        self.assertEqual(parse_args(["--prefix", "p", "--repeat=3"]).repeat, 3)
        o = parse_args(["--prefix", "p", "--nsys-opt", "--x", "--nsys-opt=--y"])
        self.assertEqual(o.nsys_opts, ["--x", "--y"])  # repeatable, in order

    def test_other_arguments_go_to_the_binary(self):
        o = parse_args(
            ["--workers", "8", "--prefix", "p", "--pre", "x", "--lean=1", "--", "--steps", "8"]
        )
        # No abbreviations, and a flag of profile.sh's with a value it takes none of is not its.
        self.assertEqual(
            o.program_args, ["--workers", "8", "--pre", "x", "--lean=1", "--steps", "8"]
        )
        self.assertEqual((o.command, o.lean), ([], False))
        # After `--`, everything is the program's, profile.sh's flags too.
        o = parse_args(["--prefix", "p", "--", "--steps", "8", "--dry-run"])
        self.assertEqual((o.program_args, o.dry_run), (["--steps", "8", "--dry-run"], False))

    def test_a_wrapped_command(self):
        o = parse_args(["--prefix", "p", "--dry-run", "--", "python3", "w.py", "--steps", "8"])
        self.assertEqual((o.command, o.program_args), (["python3", "w.py", "--steps", "8"], []))
        self.assertTrue(o.dry_run)

    def test_help_ends_the_parse(self):
        o = parse_args(["--prefix", "p", "--help", "--nproc", "0"])
        self.assertTrue(o.help)
        self.assertTrue(parse_args(["-h"]).help)  # no --prefix needed
        # As a value, or after `--`, it is no request for help.
        self.assertEqual(parse_args(["--prefix", "--help"]).prefix, "--help")
        o = parse_args(["--prefix", "p", "--", "--help"])
        self.assertEqual((o.help, o.program_args), (False, ["--help"]))

    def test_help_text(self):
        self.assertTrue(HELP.startswith("usage: scripts/profile.sh --prefix PREFIX"))
        for flag in ("--prefix", "--binary", "--nproc", "--repeat", "--no-untraced", "--lean"):
            self.assertIn("\n  %s " % flag, HELP)
        for flag in ("--nsys-opt", "--analyze", "--dry-run", "-h, --help"):
            self.assertIn("\n  %s " % flag, HELP)
        self.assertIn("Exit status:", HELP)
        self.assertLessEqual(max(len(line) for line in HELP.splitlines()), 100)

    def test_missing_values(self):
        for flag in ("--prefix", "--binary", "--nproc", "--repeat", "--nsys-opt"):
            self.assertEqual(
                self.usage_error("--prefix", "p", flag), "expected a value after %s" % flag
            )

    def test_prefix(self):
        self.assertIn("expected --prefix PREFIX", self.usage_error("--workers", "8"))
        self.assertIn("expected --prefix PREFIX", self.usage_error("--prefix="))
        self.assertEqual(
            self.usage_error("--prefix", "out/"),
            "expected --prefix to name a file prefix, got directory 'out/'",
        )

    def test_counts(self):
        self.assertEqual(count("--nproc", "007", "ranks"), 7)  # base 10, leading zeros
        self.assertEqual(count("--nproc", "999999", "ranks"), 999999)
        for text in ("0", "000", "-1", "+2", " 2", "1.5", "two", "", "1_0", "1234567", "２"):
            with self.subTest(text=text):
                message = self.usage_error("--prefix", "p", "--nproc", text)
                self.assertEqual(
                    message,
                    "expected --nproc to be a positive integer (ranks on this machine), got '%s'"
                    % text,
                )
        self.assertEqual(
            self.usage_error("--prefix", "p", "--repeat=x"),
            "expected --repeat to be a positive integer (captures, each with its untraced run), "
            "got 'x'",
        )

    def test_conflicts(self):
        self.assertTrue(
            self.usage_error("--prefix", "p", "--repeat", "2", "--nproc", "02").startswith(
                "--repeat 2 conflicts with --nproc 2: repeated captures of several ranks are not "
                "supported"
            )
        )
        o = parse_args(["--prefix", "p", "--repeat", "1", "--nproc", "2"])  # one capture: fine
        self.assertEqual((o.repeat, o.nproc), (1, 2))
        self.assertEqual(
            self.usage_error("--prefix", "p", "--workers", "8", "--", "python3", "x.py"),
            "arguments before -- (--workers 8) apply only to the training binary, got a command "
            "after --: python3 x.py",
        )
        self.assertEqual(
            self.usage_error("--prefix", "p", "--binary", "b", "--", "python3", "x.py"),
            "--binary conflicts with the command after --: python3 x.py",
        )

    def test_nsys_opts(self):
        check_nsys_opts(["--osrt-threshold=10", "-t", "--cuda-flush-interval=10000"])
        with self.assertRaises(UsageError) as cm:
            check_nsys_opts(["--ok", "trace"])
        self.assertEqual(
            cm.exception.message,
            "expected --nsys-opt to be an nsys profile option (starting with -), got 'trace'",
        )
        with self.assertRaises(UsageError):
            check_nsys_opts([""])


if __name__ == "__main__":
    unittest.main()
