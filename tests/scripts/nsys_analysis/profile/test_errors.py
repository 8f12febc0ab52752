"""Tests for scripts/nsys_analysis/profile/errors.py: the exit statuses profile.sh's two errors
carry.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/profile/test_errors.py
(all tests: scripts/dev/python_tests.sh)
"""

import unittest

from nsys_analysis.common.exit_status import FAILURE, USAGE
from nsys_analysis.profile.errors import ProfileError, UsageError


class ErrorsTest(unittest.TestCase):
    def test_statuses(self):
        self.assertEqual(ProfileError("x").status, FAILURE)
        e = ProfileError("the profiled program failed (exit 3)", 3)
        self.assertEqual((e.message, e.status, str(e)), (e.message, 3, e.message))
        u = UsageError("expected a value after --prefix")
        self.assertIsInstance(u, ProfileError)
        self.assertEqual((u.status, u.message), (USAGE, "expected a value after --prefix"))


if __name__ == "__main__":
    unittest.main()
