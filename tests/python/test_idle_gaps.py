"""Tests for scripts/nsys_analysis/idle_gaps.py: the device's idle gaps by cause, length and host range.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import unittest

# nsys_exports first: it puts scripts/ on sys.path.
from nsys_exports import ExportBuilder, RealFixtureCase, TempDirCase, basic_export
from nsys_analysis.markdown import render_markdown


class IdleGapTest(TempDirCase):
    def test_basic_export_gaps_add_up_and_have_causes(self):
        s = self.summarize(basic_export())
        g = s["idle_gaps"]
        # Gaps: [1.5, 2.6] and [4.2, 6.2] end at uncorrelated copies; [6.45, 6.6] ends at a kernel
        # launched at 6.55 (inside h2d_submit); [8.0, 8.1] at a D2D copy; [8.2, 10.5] at a kernel the
        # autograd thread launched at 8.5 (that thread has no ranges: backward, from any thread).
        self.assertEqual(g["count"], 5)
        self.assertAlmostEqual(g["total_ms"], 10.0 - s["device_busy_ms"], places=6)
        self.assertEqual({c: (d["count"], d["total_ms"]) for c, d in g["causes"].items()},
                         {"host": (2, 2.45), "device": (0, 0.0), "unattributed": (3, 3.2), "tail": (0, 0.0)})
        self.assertEqual({k: (d["count"], d["total_ms"]) for k, d in g["host_by_range"].items()},
                         {"backward": (1, 2.3), "h2d_submit": (1, 0.15)})
        self.assertEqual([(x["at_ms"], x["gap_ms"], x["cause"]) for x in g["largest"][:2]],
                         [(7.2, 2.3, "host"), (3.2, 2.0, "unattributed")])

    def test_queued_work_is_device_side_and_late_work_is_the_host(self):
        b = ExportBuilder()
        b.range("capture_window", 0.0, 10.0)
        b.range("torch_step", 0.0, 9.0)
        b.range("data_load", 1.0, 4.5)
        b.range("batch_wait", 1.5, 4.0)
        b.kernel(0.5, 1.0, launch_ms=0.1)        # host gap [0, 0.5]: launched after the window began
        b.kernel(1.004, 2.0, launch_ms=0.2)      # 4 us, queued long before: device
        b.kernel(5.0, 6.0, launch_ms=4.9)        # [2.0, 5.0]: enqueued after batch_wait: host
        b.memset(6.0005, 6.5, launch_ms=5.5)     # 0.5 us, queued: device
        b.memcpy(6.5, 7.0, launch_ms=6.8)        # no gap: starts as the memset ends
        s = self.summarize(b)
        g = s["idle_gaps"]
        self.assertEqual({c: (d["count"], round(d["total_ms"], 4)) for c, d in g["causes"].items()},
                         {"host": (2, 3.5), "device": (2, 0.0045), "unattributed": (0, 0.0),
                          "tail": (1, 3.0)})
        self.assertEqual({k: d["count"] for k, d in g["host_by_range"].items()},
                         {"batch_wait": 1, "torch_step": 1})
        self.assertEqual([(h["bucket"], h["count"]) for h in g["histogram"]],
                         [("< 2 us", 1), ("2-10 us", 1), ("10-100 us", 0), ("100-1000 us", 1), (">= 1000 us", 2)])
        # Equal lengths: the earlier gap first.
        self.assertEqual([(x["at_ms"], x["gap_ms"], x["cause"], x["host_range"]) for x in g["largest"][:3]],
                         [(2.0, 3.0, "host", "batch_wait"), (7.0, 3.0, "tail", None),
                          (0.0, 0.5, "host", "torch_step")])
        self.assertAlmostEqual(g["total_ms"], 10.0 - s["device_busy_ms"], places=6)
        md = render_markdown(s)
        self.assertIn("## Where the device sat idle", md)
        self.assertIn("| batch_wait | 1 | 3.000 |", md)

    def test_no_device_activity_in_window(self):
        b = ExportBuilder()
        b.range("capture_window", 0.0, 2.0)
        b.range("torch_step", 0.5, 1.5)
        b.kernel(3.0, 4.0, launch_ms=1.0)
        g = self.summarize(b)["idle_gaps"]
        self.assertEqual((g["count"], g["total_ms"], g["causes"]["tail"]["count"]), (1, 2.0, 1))


class RealFixtureIdleGapTest(RealFixtureCase):
    def test_idle_gaps(self):
        # Eight steps fed from a full prefetch queue: apart from the first copy (enqueued after the
        # window opened) and the drain at the end, every gap is launch latency between queued work.
        g = self.s["idle_gaps"]
        self.assertAlmostEqual(g["total_ms"], self.s["capture_window_ms"] - self.s["device_busy_ms"], places=3)
        self.assertEqual({c: d["count"] for c, d in g["causes"].items()},
                         {"host": 1, "device": 5751, "unattributed": 0, "tail": 1})
        self.assertAlmostEqual(g["causes"]["host"]["total_ms"], 1.178, places=3)
        self.assertAlmostEqual(g["causes"]["device"]["total_ms"], 9.586, places=3)
        self.assertEqual(g["largest"][1]["next"], "[memcpy Host-to-Device]")
        self.assertLess(max(x["gap_ms"] for x in g["largest"] if x["cause"] == "device"), 0.02)


if __name__ == "__main__":
    unittest.main()
