"""Tests for scripts/nsys_analysis/common/formatting.py: the one number formatter of summary.md,
sweep.md and benchmarks.py's tables, in each of their conventions."""

import unittest

from nsys_analysis.common.formatting import fmt


class FmtTest(unittest.TestCase):
    def test_summary_md_convention(self):
        self.assertEqual(fmt(None), "n/a")
        self.assertEqual(fmt(True), "pass")
        self.assertEqual(fmt(False), "FAIL")
        self.assertEqual(fmt(357.5312345), "357.531")
        self.assertEqual(fmt(3.708488, 2), "3.71")
        self.assertEqual(fmt(16), "16")  # counts stay integers
        self.assertEqual(fmt("span of torch_step ranges"), "span of torch_step ranges")

    def test_table_convention(self):
        # sweep.md and benchmarks.py: integers written like floats, their own text for a missing
        # value.
        self.assertEqual(fmt(2864, 1, "–", ints_exact=False), "2864.0")
        self.assertEqual(fmt(2864.06, 1, "–", ints_exact=False), "2864.1")
        self.assertEqual(fmt(None, 1, "–", ints_exact=False), "–")
        self.assertEqual(fmt(None, 2, "", ints_exact=False), "")
        self.assertEqual(fmt(1.75, 2, "", ints_exact=False), "1.75")


if __name__ == "__main__":
    unittest.main()
