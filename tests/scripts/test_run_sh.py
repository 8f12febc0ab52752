"""Tests for scripts/run.sh, the README's main command, on a copy of the script with stand-ins for
cmake, nvidia-smi, train_resnet50 and food101_synth (no build, no apt): the synthetic set it makes
once, SYNTH_PER_CLASS checked and said to apply to a new set only, and the CPU run's line.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_run_sh.py
"""

import os
import shutil
import stat
import subprocess
import unittest

from scripts.support.nsys_exports import TempDirCase

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

# train_resnet50's stand-in: --version says there is no CUDA device; a run records its arguments.
FAKE_TRAIN = """#!/bin/sh
if [ "$1" = --version ]; then echo "train_resnet50 0 (LibTorch 1.13.0, CUDA device: no)"; exit 0; fi
printf '%s\\n' "$@" > "$FAKE_LOG/train_args"
"""
# food101_synth's stand-in: the list train_resnet50 reads, and a count of its calls.
FAKE_SYNTH = """#!/bin/sh
while [ $# -gt 0 ]; do case "$1" in --out) out=$2; shift ;; --per-class) n=$2; shift ;; esac; shift
done
mkdir -p "$out/food-101/meta" && echo "a/1" > "$out/food-101/meta/train.txt"
echo "$n" >> "$FAKE_LOG/synth_calls"
"""


class RunShTest(TempDirCase):
    def setUp(self):
        super().setUp()
        self.repo = os.path.join(self.tmp, "repo")
        os.makedirs(os.path.join(self.repo, "scripts"))
        shutil.copy(os.path.join(REPO, "scripts", "run.sh"), os.path.join(self.repo, "scripts"))
        shutil.copytree(
            os.path.join(REPO, "scripts", "lib"), os.path.join(self.repo, "scripts", "lib")
        )
        build = os.path.join(self.repo, "build")
        os.makedirs(os.path.join(build, "bin"))
        with open(os.path.join(build, "CMakeCache.txt"), "w") as f:
            f.write("WORKLOAD_TORCH_VERSION:INTERNAL=1.13.0\nWORKLOAD_TORCH_CUDA:INTERNAL=OFF\n")
        self.fakes = os.path.join(self.tmp, "fakes")
        os.makedirs(self.fakes)
        self.log = os.path.join(self.tmp, "log")
        os.makedirs(self.log)
        for path, text in (
            (os.path.join(build, "bin", "train_resnet50"), FAKE_TRAIN),
            (os.path.join(build, "bin", "food101_synth"), FAKE_SYNTH),
            (os.path.join(self.fakes, "cmake"), "#!/bin/sh\nexit 0\n"),
            (os.path.join(self.fakes, "nvidia-smi"), "#!/bin/sh\nexit 1\n"),  # no GPU
        ):
            with open(path, "w") as f:
                f.write(text)
            os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR)

    def run_sh(self, *args, **env):
        full = dict(
            os.environ,
            PATH=self.fakes + os.pathsep + os.environ["PATH"],
            SKIP_APT="1",
            Torch_DIR="/nowhere",  # no probe of an installed PyTorch
            FAKE_LOG=self.log,
            **env,
        )
        if "SYNTH_PER_CLASS" not in env:
            full.pop("SYNTH_PER_CLASS", None)
        return subprocess.run(
            ["bash", os.path.join(self.repo, "scripts", "run.sh")] + list(args),
            capture_output=True,
            text=True,
            timeout=120,
            env=full,
        )

    def read(self, name):
        with open(os.path.join(self.log, name)) as f:
            return f.read().split()

    def test_the_synthetic_set_is_made_once_and_the_cpu_run_says_flags_win(self):
        r = self.run_sh("--steps", "5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.read("synth_calls"), ["12"])  # the CPU default
        self.assertIn("a short CPU run (batch 8, 112 px, 1 + 3 steps, unless your flags", r.stdout)
        args = self.read("train_args")
        self.assertEqual(args[:2], ["--device", "cpu"])
        self.assertEqual(args[-4:], ["--data", "data/synthetic", "--steps", "5"])  # later wins
        # Another SYNTH_PER_CLASS over the set already there: used as it is, and said so.
        r = self.run_sh(SYNTH_PER_CLASS="5")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.read("synth_calls"), ["12"])
        self.assertIn(
            "data/synthetic/food-101 exists and is used as it is; SYNTH_PER_CLASS applies to a "
            "new set only",
            r.stderr,
        )

    def test_a_synth_per_class_that_is_no_count_is_named(self):
        for value in ("abc", "0", "-3", "1e3", "", "12345678"):
            with self.subTest(value=value):
                r = self.run_sh(SYNTH_PER_CLASS=value)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn(
                    "run.sh: error: SYNTH_PER_CLASS=%s: expected images per class, 1 to 999999"
                    % value,
                    r.stderr,
                )
                self.assertFalse(os.path.exists(os.path.join(self.log, "synth_calls")))
        r = self.run_sh(DATA_DIR=os.path.join(self.tmp, "d"), SYNTH_PER_CLASS="7")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.read("synth_calls"), ["7"])


if __name__ == "__main__":
    unittest.main()
