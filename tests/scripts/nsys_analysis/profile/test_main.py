"""Tests for scripts/nsys_analysis/profile/main.py: --help, and how each kind of error ends
profile.sh (its message, the pointer to --help for usage errors, the exit status). The runs end to
end: tests/scripts/test_profile_sh.py.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_main.py
(all tests: scripts/dev/python_tests.sh)
"""

import contextlib
import io
import os

from scripts.support.testutil import ScratchCase

from nsys_analysis.common.exit_status import OK, USAGE
from nsys_analysis.profile.cli import HELP
from nsys_analysis.profile.main import main


class MainTest(ScratchCase):
    tmp_prefix = "profile_main_test_"

    def main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            status = main(list(argv))
        return status, out.getvalue(), err.getvalue()

    def test_help(self):
        self.assertEqual(self.main("--prefix", "x", "-h", "--nproc", "0"), (OK, HELP, ""))

    def test_a_usage_error_points_to_help(self):
        self.assertEqual(
            self.main("--prefix"),
            (
                USAGE,
                "",
                "profile.sh: error: expected a value after --prefix\n"
                "run scripts/profile.sh --help for usage\n",
            ),
        )

    def test_other_errors_are_one_line(self):
        binary = os.path.join(self.tmp, "none")
        self.assertEqual(
            self.main("--prefix", "x", "--dry-run", "--binary", binary),
            (
                USAGE,
                "",
                "profile.sh: error: --binary %s: no such file: expected an executable "
                "train_resnet50 at %s (build it, or pass --binary PATH / TRAIN_BIN)\n"
                % (binary, binary),
            ),
        )

    def test_a_dry_run_of_a_wrapped_command(self):
        status, out, err = self.main("--prefix", "o/x", "--dry-run", "--", "python3", "w py")
        self.assertEqual((status, err), (OK, ""))
        self.assertEqual(
            out.splitlines()[1:],
            [
                "python3 w\\ py",
                "nsys export --type=sqlite --force-overwrite=true --output=o/x.sqlite "
                "o/x.nsys-rep",
                "nsys stats --report=nvtx_sum,cuda_gpu_kern_sum,cuda_gpu_mem_time_sum,"
                "cuda_api_sum --format=csv --force-overwrite=true --output=o/x o/x.sqlite",
            ],
        )
