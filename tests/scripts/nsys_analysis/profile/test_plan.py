"""Tests for scripts/nsys_analysis/profile/plan.py: the commands profile.sh runs (nsys profile and
its options, the untraced run, export, stats, the --nproc launchers, analyze.py), their order in a
dry run, the report and rank names, and each command's shell line (bash's printf %q quoting).

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_plan.py
(all tests: scripts/dev/python_tests.sh)
"""

import os
import shutil
import subprocess
import unittest

from scripts.support.testutil import SCRIPTS_DIR

from nsys_analysis.profile.errors import UsageError
from nsys_analysis.profile.plan import (
    ANALYZE_PY,
    GRAPH_NODES,
    LAUNCH_LOCAL,
    NSYS_PROFILE_OPTS,
    Commands,
    capture_prefixes,
    choose_launcher,
    export_command,
    launcher_command,
    nsys_options,
    rank_path,
    ranks_analysis,
    ranks_dry_run,
    ranks_untraced_reports,
    shell_word,
    show_command,
    single_analysis,
    single_dry_run,
    stats_command,
)

BASH = shutil.which("bash")
# Words and how bash's printf %q writes them (bash 5, a UTF-8 locale).
QUOTED = {
    "plain/path-1.2_x,y:z@w%q+=": "plain/path-1.2_x,y:z@w%q+=",
    "--output=out/x.rank%q{RANK}": "--output=out/x.rank%q{RANK}",
    "": "''",
    "a b": "a\\ b",
    "it's": "it\\'s",
    "$HOME": "\\$HOME",
    "a,b c": "a\\,b\\ c",
    "{a,b}": "\\{a\\,b\\}",
    "~x": "\\~x",
    "a=~b": "a=\\~b",
    "a:~b": "a:\\~b",
    "b~": "b~",
    "#x": "\\#x",
    "x#": "x#",
    "é": "é",
    "a\\b": "a\\\\b",
    '!*?[]^`|;<>()&"': '\\!\\*\\?\\[\\]\\^\\`\\|\\;\\<\\>\\(\\)\\&\\"',
    "a\tb": "$'a\\tb'",
    "a b\nc'd": "$'a b\\nc\\'d'",
    "\x1b[1m": "$'\\E[1m'",
    "\x01\x7f": "$'\\001\\177'",
}


def train(**kw):
    """Commands of a train_resnet50 run with --steps 8."""
    return Commands(["bin/train_resnet50", "--steps", "8"], True, ["--opt"], **kw)


class QuotingTest(unittest.TestCase):
    def test_words(self):
        for word, quoted in QUOTED.items():
            self.assertEqual(shell_word(word), quoted, repr(word))
        self.assertEqual(show_command(["nsys", "a b", "", "x"]), "nsys a\\ b '' x")

    @unittest.skipUnless(BASH, "no bash")
    def test_as_bash_quotes(self):
        words = list(QUOTED)
        r = subprocess.run(
            [BASH, "-c", 'printf "%q\\n" "$@"', "bash"] + words,
            capture_output=True,
            text=True,
            env=dict(os.environ, LC_ALL="C.UTF-8"),
        )
        # printf %q writes each word on one line. The words shown as they are stay out of the
        # check: bash would quote a comma or braces, which the shell lines need not.
        got = r.stdout.split("\n")[: len(words)]
        for word, line in zip(words, got):
            if QUOTED[word] != word:
                self.assertEqual(shell_word(word), line, repr(word))

    def test_a_line_reads_back_as_the_argv(self):
        if not BASH:
            self.skipTest("no bash")
        argv = list(QUOTED)
        r = subprocess.run(
            [BASH, "-c", "for w in %s; do printf '[%%s]' \"$w\"; done" % show_command(argv)],
            capture_output=True,
            text=True,
            env=dict(os.environ, LC_ALL="C.UTF-8"),
        )
        self.assertEqual(r.stdout, "".join("[%s]" % w for w in argv))


class NamesTest(unittest.TestCase):
    def test_capture_prefixes(self):
        self.assertEqual(capture_prefixes("out/x", 1), ["out/x"])
        self.assertEqual(capture_prefixes("out/x", 3), ["out/x.1", "out/x.2", "out/x.3"])

    def test_rank_path(self):
        for path, ranked in (
            ("out/run.json", "out/run.rank1.json"),
            ("out/run", "out/run.rank1"),
            ("run.json", "run.rank1.json"),
            ("a.b/run", "a.b/run.rank1"),
            ("out/.hidden", "out/.hidden.rank1"),
            ("out/x.tar.gz", "out/x.tar.rank1.gz"),
        ):
            self.assertEqual(rank_path(path, 1), ranked, path)
        self.assertEqual(
            ranks_untraced_reports("out/x", 2),
            ["out/x.untraced.rank0.json", "out/x.untraced.rank1.json"],
        )


class NsysOptionsTest(unittest.TestCase):
    def test_article_lean_and_extra(self):
        self.assertEqual(nsys_options(False, [], False), list(NSYS_PROFILE_OPTS))
        lean = nsys_options(True, ["--osrt-threshold=1"], False)
        self.assertEqual(lean, ["--trace=cuda,nvtx"] + list(NSYS_PROFILE_OPTS[1:]) + lean[-1:])
        self.assertEqual(lean[-1], "--osrt-threshold=1")

    def test_graph_nodes(self):
        self.assertEqual(nsys_options(False, ["--x"], True)[-2:], ["--x", GRAPH_NODES])
        for own in ("--cuda-graph-trace=graph", "--cuda-graph-trace=node"):
            opts = nsys_options(False, [own], True)
            self.assertEqual([o for o in opts if o.startswith("--cuda-graph-trace")], [own])
        self.assertNotIn(GRAPH_NODES, nsys_options(False, [], False))


class CommandsTest(unittest.TestCase):
    def test_the_capture_gets_a_report_unless_the_configuration_has_one(self):
        self.assertEqual(
            train().nsys_profile("out/x", "out/x.json"),
            ["nsys", "profile", "--opt", "--force-overwrite=true", "--output=out/x"]
            + ["bin/train_resnet50", "--steps", "8", "--report", "out/x.json"],
        )
        self.assertEqual(
            train(given_report="mine.json").traced("out/x.json"),
            ["bin/train_resnet50", "--steps", "8"],
        )
        wrapped = Commands(["python3", "w.py", "--report", "r"], False, [])
        self.assertEqual(wrapped.traced("out/x.json"), ["python3", "w.py", "--report", "r"])
        self.assertEqual(wrapped.untraced("out/x.untraced.json"), wrapped.program)

    def test_the_untraced_run_has_its_own_report_and_checkpoints(self):
        c = Commands(
            ["t/train_resnet50", "--report", "a.json", "--steps", "2", "--report=b.json"]
            + ["--checkpoint-dir", "ck", "--checkpoint-dir=ck2", "--resume", "--resume=true"]
            + ["--start-over", "--start-over=false", "--reports-extra"],
            True,
            [],
            given_report="b.json",
        )
        self.assertEqual(
            c.untraced("u.json"),
            ["t/train_resnet50", "--steps", "2", "--reports-extra", "--report", "u.json"],
        )
        c.untraced_checkpoints, c.resume = "/tmp/private", True
        self.assertEqual(
            c.untraced("u.json")[-5:],
            ["--report", "u.json", "--checkpoint-dir", "/tmp/private", "--resume"],
        )
        c.resume = False
        self.assertEqual(c.untraced("u.json")[-2:], ["--checkpoint-dir", "/tmp/private"])
        # A trailing --report without its value is dropped too.
        c = Commands(["train_resnet50", "--steps", "2", "--report"], True, [])
        self.assertEqual(c.untraced("u"), ["train_resnet50", "--steps", "2", "--report", "u"])

    def test_launchers(self):
        self.assertEqual(choose_launcher(None, True), "torchrun")
        self.assertEqual(choose_launcher("", False), "local")
        self.assertEqual(choose_launcher("auto", False), "local")
        self.assertEqual(choose_launcher("local", True), "local")
        self.assertEqual(choose_launcher("torchrun", False), "torchrun")  # checked when it runs
        with self.assertRaises(UsageError) as cm:
            choose_launcher("mpirun", True)
        self.assertEqual(
            cm.exception.message,
            "expected PROFILE_LAUNCHER to be torchrun, local or auto, got 'mpirun'",
        )
        self.assertEqual(
            launcher_command("torchrun", 2, ["nsys", "x"]),
            ["torchrun", "--standalone", "--nproc-per-node", "2", "--no-python", "nsys", "x"],
        )
        self.assertEqual(launcher_command("local", 3, ["a"]), [LAUNCH_LOCAL, "3", "--", "a"])
        self.assertEqual(LAUNCH_LOCAL, os.path.join(SCRIPTS_DIR, "launch_local.sh"))

    def test_export_and_stats(self):
        self.assertEqual(
            show_command(export_command("out/x.1")),
            "nsys export --type=sqlite --force-overwrite=true --output=out/x.1.sqlite "
            "out/x.1.nsys-rep",
        )
        self.assertEqual(
            show_command(stats_command("out/x")),
            "nsys stats --report=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,cuda_api_sum "
            "--format=csv --force-overwrite=true --output=out/x out/x.sqlite",
        )


class AnalysisTest(unittest.TestCase):
    def test_one_capture(self):
        self.assertEqual(
            single_analysis("py", "out/x", ["out/x"], ["out/x.json"], []),
            ["py", ANALYZE_PY, "out/x.sqlite", "--report", "out/x.json", "--out", "out/x_analysis"],
        )

    def test_several_captures(self):
        pfxs = ["o.1", "o.2"]
        self.assertEqual(
            show_command(single_analysis("py", "o", pfxs, ["o.1.json"], ["o.2.untraced.json"])),
            "py %s o.1.sqlite o.2.sqlite --repeats --report o.1.json --untraced "
            "o.2.untraced.json --repeat-out o.1_analysis --repeat-out o.2_analysis --out "
            "o_analysis --repeats-json o_repeats.json --repeats-md o_repeats.md" % ANALYZE_PY,
        )

    def test_ranks(self):
        self.assertEqual(
            show_command(ranks_analysis("py", "o", 2, ["o.rank0.json", "o.rank1.json"], [])),
            "py %s o.rank0.sqlite o.rank1.sqlite --report o.rank0.json --report o.rank1.json "
            "--rank-out o.rank0_analysis --rank-out o.rank1_analysis --out o_ranks_analysis"
            % ANALYZE_PY,
        )


class DryRunTest(unittest.TestCase):
    def test_one_process_in_order(self):
        lines = [show_command(c) for c in single_dry_run(train(), "o", 2, True, "py")]
        self.assertEqual(len(lines), 9)
        self.assertTrue(
            lines[0].startswith("nsys profile --opt --force-overwrite=true --output=o.1 ")
        )
        self.assertTrue(lines[0].endswith("--report o.1.json"))
        self.assertEqual(lines[1], "bin/train_resnet50 --steps 8 --report o.1.untraced.json")
        self.assertTrue(
            lines[2].endswith("--output=o.2 bin/train_resnet50 --steps 8 --report o.2.json")
        )
        self.assertEqual(lines[3], "bin/train_resnet50 --steps 8 --report o.2.untraced.json")
        self.assertEqual(
            [line.split()[1] for line in lines[4:8]], ["export", "stats", "export", "stats"]
        )
        self.assertIn("--report o.1.json --report o.2.json --untraced o.1.untraced.json", lines[8])
        # No untraced run, no analysis.
        lines = [show_command(c) for c in single_dry_run(train(), "o", 1, False, None)]
        self.assertEqual([line.split()[1] for line in lines], ["profile", "export", "stats"])

    def test_ranks_in_order(self):
        cmds = ranks_dry_run(["T"], ["U"], "o", 2, "py")
        self.assertEqual(cmds[:2], [["T"], ["U"]])
        self.assertEqual(
            [c[1] + " " + c[-1] for c in cmds[2:6]],
            [
                "export o.rank0.nsys-rep",
                "stats o.rank0.sqlite",
                "export o.rank1.nsys-rep",
                "stats o.rank1.sqlite",
            ],
        )
        self.assertIn("--untraced o.untraced.rank1.json", show_command(cmds[6]))
        cmds = ranks_dry_run(["T"], None, "o", 1, "py")
        self.assertEqual(cmds[0], ["T"])
        self.assertNotIn("--untraced", cmds[-1])


if __name__ == "__main__":
    unittest.main()
