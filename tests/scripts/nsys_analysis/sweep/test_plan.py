"""Tests for scripts/nsys_analysis/sweep/plan.py: the article's configurations, configuration files,
one run's train_resnet50 arguments and the shuffled plan.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/sweep/test_plan.py
(all tests: scripts/dev/python_tests.sh)
"""

import json
import re
import os
import unittest

from scripts.support.testutil import ScratchCase

from nsys_analysis.sweep.plan import (
    DEFAULT_CONFIGS,
    ConfigError,
    changes_from_baseline,
    expected_steps,
    load_configs,
    make_plan,
    run_args,
    select_configs,
)


class PlanTest(unittest.TestCase):
    def test_default_configs_are_the_articles(self):
        c = DEFAULT_CONFIGS
        self.assertEqual(
            list(c),
            [
                "reset_8",
                "reuse_8",
                "reuse_64",
                "workers_4",
                "workers_12",
                "prefetch_1",
                "prefetch_4",
                "no_pin",
            ],
        )
        self.assertEqual(
            dict(c["reuse_64"]),
            {
                "steps": 64,
                "warmup": 3,
                "batch_size": 128,
                "workers": 8,
                "prefetch_factor": 2,
                "pin_memory": True,
                "reuse_iterator": True,
            },
        )
        self.assertEqual(changes_from_baseline(c["reset_8"]), "steps=8, reuse_iterator=false")
        self.assertEqual(changes_from_baseline(c["no_pin"]), "pin_memory=false")
        self.assertEqual(changes_from_baseline(c["reuse_64"]), "baseline")

    def test_shuffled_plan_is_reproducible(self):
        plan = make_plan(DEFAULT_CONFIGS, [2026, 2027], 1)
        self.assertEqual(
            sorted(plan), sorted((n, s) for n in DEFAULT_CONFIGS for s in (2026, 2027))
        )
        self.assertEqual(plan, make_plan(DEFAULT_CONFIGS, [2026, 2027], 1))
        self.assertNotEqual(plan, [(n, s) for n in DEFAULT_CONFIGS for s in (2026, 2027)])
        self.assertNotEqual(plan, make_plan(DEFAULT_CONFIGS, [2026, 2027], 2))
        self.assertEqual((plan[0].config, plan[0].seed), tuple(plan[0]))

    def test_run_args(self):
        cfg = DEFAULT_CONFIGS["no_pin"]
        args = run_args(
            cfg, 2027, "/data/food", ["--device", "cpu", "--batch-size", "4", "--steps=2"]
        )
        self.assertEqual(
            args,
            [
                "--data",
                "/data/food",
                "--warmup",
                "3",
                "--workers",
                "8",
                "--prefetch-factor",
                "2",
                "--pin-memory=false",
                "--reuse-iterator=true",
                "--seed",
                "2027",
                "--device",
                "cpu",
                "--batch-size",
                "4",
                "--steps=2",
            ],
        )
        self.assertEqual(expected_steps(cfg, ["--steps=2"]), 2)
        self.assertEqual(expected_steps(cfg, ["--synthetic"]), 64)
        with self.assertRaisesRegex(ConfigError, "expected an integer after --steps, got 'x'"):
            expected_steps(cfg, ["--steps", "x"])
        for extra in (["--steps", "0"], ["--steps=-3"]):
            with self.assertRaisesRegex(ConfigError, "expected --steps >= 1 after --, got"):
                expected_steps(cfg, extra)
        for extra in (["--steps"], ["--steps", "--synthetic"], ["--steps="]):
            with self.assertRaisesRegex(
                ConfigError, "expected an integer after --steps, got (nothing|'')"
            ):
                expected_steps(cfg, extra)


class ConfigFileTest(ScratchCase):
    tmp_prefix = "sweep_plan_test_"

    def write(self, doc):
        path = os.path.join(self.tmp, "configs.json")
        with open(path, "w") as f:
            json.dump(doc, f)
        return path

    def test_object_and_list_forms_complete_the_baseline(self):
        a = load_configs(self.write({"b": {"workers": 2}, "a": {"steps": 4}}))
        b = load_configs(self.write([{"name": "b", "workers": 2}, {"name": "a", "steps": 4}]))
        self.assertEqual(a, b)
        self.assertEqual(list(a), ["b", "a"])
        self.assertEqual((a["b"]["workers"], a["b"]["steps"], a["a"]["steps"]), (2, 64, 4))

    def test_unusable_files(self):
        for doc, message in (
            ({"x": {"steps": 0}}, "expected x.steps to be a positive integer"),
            ({"x y": {}}, "expected configuration names of letters"),
            ({"x": {"workers": [1]}}, "expected a string, number or boolean for x.workers"),
            ([{"workers": 1}], 'expected objects with a "name"'),
            ({}, "no configurations in"),
        ):
            with self.assertRaisesRegex(ConfigError, message):
                load_configs(self.write(doc))
        with self.assertRaisesRegex(ConfigError, "cannot read --configs"):
            load_configs(os.path.join(self.tmp, "nope.json"))
        path = os.path.join(self.tmp, "raw.json")
        for text, message in (
            # json keeps the last of a repeated key: one configuration or flag would be lost.
            ('{"a": {"workers": 2}, "a": {"workers": 6}}', "'a' is given twice in one object"),
            ('{"a": {"workers": 2, "workers": 6}}', "'workers' is given twice in one object"),
            ('[{"name": "a"}, {"name": "a", "workers": 6}]', "the configuration a is given twice"),
            ('{"a": {"seed": 5}}', "a.seed: the seeds are the sweep's"),
            ("[" * 100000 + "]" * 100000, "nested too deeply"),
        ):
            with self.subTest(text=text[:40]):
                with open(path, "w") as f:
                    f.write(text)
                with self.assertRaisesRegex(ConfigError, re.escape(message)):
                    load_configs(path)

    def test_select_keeps_the_configurations_order(self):
        self.assertIs(select_configs(DEFAULT_CONFIGS, None), DEFAULT_CONFIGS)
        self.assertEqual(
            list(select_configs(DEFAULT_CONFIGS, ["no_pin", "reset_8"])), ["reset_8", "no_pin"]
        )
        with self.assertRaisesRegex(
            ConfigError, "expected --only names among reset_8, .*, got nope"
        ):
            select_configs(DEFAULT_CONFIGS, ["reuse_8", "nope"])


if __name__ == "__main__":
    unittest.main()
