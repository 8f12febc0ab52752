"""Tests for scripts/nsys_analysis/profile/program.py: which program is captured (--binary,
$TRAIN_BIN, the default, a wrapped command), the binary's checks and their messages, and the
configuration train_resnet50 --print-config answers (a stand-in binary).

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_program.py
(all tests: scripts/dev/python_tests.sh)
"""

import json
import os
import unittest
from unittest import mock

from scripts.support.testutil import ANSWER_PRINT_CONFIG, REPO, ScratchCase

from nsys_analysis.common.exit_status import USAGE
from nsys_analysis.profile.cli import parse_args
from nsys_analysis.profile.errors import ProfileError
from nsys_analysis.profile.program import (
    ConfigError,
    Program,
    TrainConfig,
    check_binary,
    is_train,
    parse_config,
    program_of,
    read_config,
)


class ProgramOfTest(unittest.TestCase):
    def program(self, *argv, env=None):
        with mock.patch.dict(os.environ, env or {}, clear=False):
            if env is None:
                os.environ.pop("TRAIN_BIN", None)
            return program_of(parse_args(["--prefix", "p"] + list(argv)))

    def test_sources(self):
        self.assertEqual(
            self.program("--binary", "b/train_resnet50", "--steps", "2"),
            Program(["b/train_resnet50", "--steps", "2"], True, "--binary"),
        )
        self.assertEqual(
            self.program("--steps", "2", env={"TRAIN_BIN": "/x/trainer"}),
            Program(["/x/trainer", "--steps", "2"], False, "TRAIN_BIN"),
        )
        default = os.path.join(REPO, "build", "bin", "train_resnet50")
        self.assertEqual(self.program(), Program([default], True, "the default binary"))
        self.assertEqual(
            self.program(env={"TRAIN_BIN": ""}), Program([default], True, "the default binary")
        )

    def test_a_wrapped_command(self):
        self.assertEqual(
            self.program("--", "python3", "w.py"), Program(["python3", "w.py"], False, None)
        )
        self.assertTrue(self.program("--", "build/bin/train_resnet50").is_train)

    def test_is_train(self):
        self.assertTrue(is_train("train_resnet50"))
        self.assertTrue(is_train("/opt/bin/train_resnet50_asan"))
        self.assertFalse(is_train("/opt/train_resnet50.d/python3"))
        self.assertFalse(is_train("my_train_resnet50"))


class CheckBinaryTest(ScratchCase):
    tmp_prefix = "profile_program_test_"

    def message(self, binary, source="--binary"):
        with self.assertRaises(ProfileError) as cm:
            check_binary(Program([binary], True, source))
        self.assertEqual(cm.exception.status, USAGE)
        return cm.exception.message

    def test_messages(self):
        missing = os.path.join(self.tmp, "nowhere", "train_resnet50")
        self.assertEqual(
            self.message(missing),
            "--binary %s: no such file: expected an executable train_resnet50 at %s (build it, or "
            "pass --binary PATH / TRAIN_BIN)" % (missing, missing),
        )
        self.assertEqual(
            self.message(self.tmp, "TRAIN_BIN"),
            "TRAIN_BIN %s: is a directory, expected the train_resnet50 executable" % self.tmp,
        )
        plain = os.path.join(self.tmp, "plain")
        with open(plain, "w") as f:
            f.write("x")
        self.assertEqual(self.message(plain), "--binary %s: is not an executable file" % plain)
        self.assertEqual(
            self.message("no_such_trainer_here", "the default binary"),
            "the default binary no_such_trainer_here: expected no_such_trainer_here on PATH, found "
            "none (pass --binary PATH / TRAIN_BIN)",
        )

    def test_what_runs_passes(self):
        check_binary(Program([self.fake("train_resnet50", "pass")], True, "--binary"))
        check_binary(Program(["sh"], False, "--binary"))  # a bare name on PATH
        check_binary(Program(["/nowhere/cmd"], False, None))  # a wrapped command: not checked


class ConfigTest(ScratchCase):
    tmp_prefix = "profile_program_test_"

    def test_parse(self):
        self.assertEqual(
            parse_config('{"cuda_graph": true, "report": "r.json", "steps": 8}'),
            TrainConfig(cuda_graph=True, report="r.json"),
        )
        self.assertEqual(
            parse_config(
                json.dumps(
                    {"cuda_graph": False, "report": "", "checkpoint_dir": "ck", "resume": True}
                )
            ),
            TrainConfig(checkpoint_dir="ck", resume=True),
        )
        for text, why in (
            ("loading...", "not JSON ("),
            ("[1, 2]", "not an object"),
            ('{"cuda_graph": "yes", "report": ""}', "no boolean cuda_graph and string report"),
            ('{"cuda_graph": true}', "no boolean cuda_graph and string report"),
        ):
            with self.assertRaises(ConfigError) as cm:
                parse_config(text)
            self.assertTrue(str(cm.exception).startswith(why), (text, str(cm.exception)))

    def test_read_from_the_binary(self):
        train = self.fake("train_resnet50", ANSWER_PRINT_CONFIG + "raise SystemExit(9)\n")
        config = read_config(Program([train, "--cuda-graph", "--report=r.json"], True, "--binary"))
        self.assertEqual(config, TrainConfig(cuda_graph=True, report="r.json"))
        with self.assertRaises(ProfileError) as cm:
            read_config(Program([train, "--cuda-graph=maybe"], True, "--binary"))
        self.assertEqual(cm.exception.status, USAGE)
        self.assertEqual(
            cm.exception.message,
            "%s --print-config --cuda-graph=maybe failed (exit 2): the training flags are refused "
            "(its message above), or the binary predates --print-config" % train,
        )
        with mock.patch.dict(os.environ, {"FAKE_PRINT_CONFIG": "x" * 300}):
            with self.assertRaises(ProfileError) as cm:
                read_config(Program([train], True, "--binary"))
        self.assertTrue(
            cm.exception.message.startswith(
                "expected %s --print-config to print the run's configuration as one JSON object, "
                "got not JSON (" % train
            )
        )
        self.assertTrue(cm.exception.message.endswith(": " + "x" * 200))  # its first 200
        with self.assertRaises(ProfileError) as cm:
            read_config(Program(["/nowhere/train_resnet50"], True))
        self.assertIn(
            "expected an executable train_resnet50 at /nowhere/train_resnet50", str(cm.exception)
        )


if __name__ == "__main__":
    unittest.main()
