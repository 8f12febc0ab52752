"""Tests for scripts/nsys_analysis/capture/idle_gaps.py: the device's idle gaps by cause, length and
host range, and the host stalls (host-caused gaps >= 1 ms in the step's work, attributed to a step
and phase) of simulated runs with known stalls and of the real export with a stall written into it.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_idle_gaps.py
"""

import unittest

import os
import shutil

from scripts.support.nsys_exports import (
    ExportBuilder,
    RealFixtureCase,
    TempDirCase,
    basic_export,
    first_phase,
    inject_stall,
    simulated_run,
)
from nsys_analysis.capture.export import load_export
from nsys_analysis.capture.markdown import render_markdown
from nsys_analysis.capture.summary import compute_summary


class IdleGapTest(TempDirCase):
    def test_basic_export_gaps_add_up_and_have_causes(self):
        s = self.summarize(basic_export())
        g = s["idle_gaps"]
        # Gaps: [1.5, 2.6] and [4.2, 6.2] end at uncorrelated copies; [6.45, 6.6] ends at a kernel
        # launched at 6.55 (inside h2d_submit); [8.0, 8.1] at a D2D copy; [8.2, 10.5] at a kernel
        # the autograd thread launched at 8.5 (that thread has no ranges: backward, from any
        # thread).
        self.assertEqual(g["count"], 5)
        self.assertAlmostEqual(g["total_ms"], 10.0 - s["device_busy_ms"], places=6)
        self.assertEqual(
            {c: (d["count"], d["total_ms"]) for c, d in g["causes"].items()},
            {"host": (2, 2.45), "device": (0, 0.0), "unattributed": (3, 3.2), "tail": (0, 0.0)},
        )
        self.assertEqual(
            {k: (d["count"], d["total_ms"]) for k, d in g["host_by_range"].items()},
            {"backward": (1, 2.3), "h2d_submit": (1, 0.15)},
        )
        self.assertEqual(
            [(x["at_ms"], x["gap_ms"], x["cause"]) for x in g["largest"][:2]],
            [(7.2, 2.3, "host"), (3.2, 2.0, "unattributed")],
        )

    def test_queued_work_is_device_side_and_late_work_is_the_host(self):
        b = ExportBuilder()
        b.range("capture_window", 0.0, 10.0)
        b.range("torch_step", 0.0, 9.0)
        b.range("data_load", 1.0, 4.5)
        b.range("batch_wait", 1.5, 4.0)
        b.kernel(0.5, 1.0, launch_ms=0.1)  # host gap [0, 0.5]: launched after the window began
        b.kernel(1.004, 2.0, launch_ms=0.2)  # 4 us, queued long before: device
        b.kernel(5.0, 6.0, launch_ms=4.9)  # [2.0, 5.0]: enqueued after batch_wait: host
        b.memset(6.0005, 6.5, launch_ms=5.5)  # 0.5 us, queued: device
        b.memcpy(6.5, 7.0, launch_ms=6.8)  # no gap: starts as the memset ends
        s = self.summarize(b)
        g = s["idle_gaps"]
        self.assertEqual(
            {c: (d["count"], round(d["total_ms"], 4)) for c, d in g["causes"].items()},
            {"host": (2, 3.5), "device": (2, 0.0045), "unattributed": (0, 0.0), "tail": (1, 3.0)},
        )
        self.assertEqual(
            {k: d["count"] for k, d in g["host_by_range"].items()},
            {"batch_wait": 1, "torch_step": 1},
        )
        self.assertEqual(
            [(h["bucket"], h["count"]) for h in g["histogram"]],
            [
                ("< 2 us", 1),
                ("2-10 us", 1),
                ("10-100 us", 0),
                ("100-1000 us", 1),
                (">= 1000 us", 2),
            ],
        )
        # Equal lengths: the earlier gap first.
        self.assertEqual(
            [(x["at_ms"], x["gap_ms"], x["cause"], x["host_range"]) for x in g["largest"][:3]],
            [
                (2.0, 3.0, "host", "batch_wait"),
                (7.0, 3.0, "tail", None),
                (0.0, 0.5, "host", "torch_step"),
            ],
        )
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


def stall_rows(s):
    """host_stalls as (start, gap, quiet, usual, stall, held, step, phase, host range)."""
    return [
        (
            x["start_ms"],
            x["gap_ms"],
            x["quiet_ms"],
            x["usual_quiet_ms"],
            x["stall_ms"],
            x["held_ms"],
            x["step"],
            x["phase"],
            x["host_range"],
        )
        for x in s["host_stalls"]
    ]


class HostStallTest(TempDirCase):
    def test_no_stall(self):
        # The device catches up with the host (host gaps, the window's first 0.56 ms), by less than
        # 1 ms.
        s = self.summarize(simulated_run())
        self.assertEqual(s["host_stalls"], [])
        self.assertEqual(s["idle_gaps"]["largest"][1]["gap_ms"], 0.56)
        self.assertLess(
            max(g["gap_ms"] for g in s["idle_gaps"]["largest"] if g["cause"] == "host"), 1.0
        )
        self.assertIn("None.", render_markdown(s))

    def test_stall_in_backward(self):
        # simulated_run()'s known answers for 20 ms at the start of backward in step 2: the device
        # drains 0.4 ms of forward first (gap 19.6 ms); the host's threads make no call for
        # 20.449 ms, 0.449 ms of which they spend without calls at that place in every step.
        s = self.summarize(simulated_run(stalls={("backward", 2): 20.0}))
        self.assertEqual(
            stall_rows(s), [(22.86, 19.6, 20.449, 0.449, 20.0, 20.459, 2, "backward", "backward")]
        )
        self.assertEqual(s["host_stalls"][0]["quiet_start_ms"], 22.001)
        self.assertEqual(s["host_stalls"][0]["next"], "elementwise")
        md = render_markdown(s)
        self.assertIn("## Host stalls", md)
        self.assertIn(
            "| 22.860 | 19.600 | 20.449 | 0.449 | 20.000 | 20.459 | 2 | backward | backward | "
            "elementwise |",
            md,
        )

    def test_decode_stage_work_does_not_split_a_stall(self):
        # The GPU decode stage's kernels run during the stall: the device is not idle for 19.6 ms at
        # once (idle_gaps sees 1.8 ms pieces), but the step's work still waited 19.6 ms for the
        # host.
        s = self.summarize(simulated_run(stalls={("backward", 2): 20.0}, decode_stage=True))
        self.assertEqual(
            stall_rows(s), [(22.86, 19.6, 20.449, 0.449, 20.0, 20.459, 2, "backward", "backward")]
        )
        self.assertLess(s["idle_gaps"]["largest"][0]["gap_ms"], 2.0)
        self.assertGreater(s["gpu_time_by_phase_ms"]["(input pipeline)"], 0)

    def test_several_stalls_and_their_phases(self):
        s = self.summarize(
            simulated_run(
                stalls={
                    ("data_load", 0): 20.0,
                    ("optimizer_step", 1): 10.0,
                    ("forward", 2): 20.0,
                    ("zero_grad", 3): 3.0,
                }
            )
        )
        rows = stall_rows(s)
        # Step 0: the window's first gap; its quiet interval starts with the window (no call before
        # it), so no usual length is subtracted: 0.2 ms before the step and 0.35 ms to the first
        # copy count.
        self.assertEqual(rows[0], (0.0, 20.56, 20.55, None, 20.55, 20.56, 0, "data_load", None))
        self.assertEqual(rows[1][6:8], (1, "optimizer_step"))
        self.assertAlmostEqual(rows[1][4], 10.0, places=6)
        # The device had drained before forward began: the gap starts in h2d_submit, the host's
        # stall (and so the phase) is forward's.
        self.assertEqual(rows[2][6:], (2, "forward", "h2d_submit"))
        self.assertAlmostEqual(rows[2][4], 20.0, places=6)
        self.assertEqual(rows[3][6:8], (3, "zero_grad"))
        self.assertAlmostEqual(rows[3][4], 3.0, places=6)
        self.assertEqual(len(rows), 4)

    def test_stall_absorbed_by_the_queue(self):
        # 0.3 ms at the start of forward: the device still had data_load's copies and more queued.
        s = self.summarize(simulated_run(stalls={("forward", 1): 0.3}))
        self.assertEqual(s["host_stalls"], [])

    def test_without_runtime_table(self):
        # No launch records: no gap has a host cause, so no stall is listed.
        b = simulated_run(stalls={("backward", 2): 20.0})
        b.omit.add("CUPTI_ACTIVITY_KIND_RUNTIME")
        s = self.summarize(b)
        self.assertEqual(s["host_stalls"], [])


class RealFixtureIdleGapTest(RealFixtureCase):
    def test_idle_gaps(self):
        # Eight steps fed from a full prefetch queue: apart from the first copy (enqueued after the
        # window opened) and the drain at the end, every gap is launch latency between queued work.
        g = self.s["idle_gaps"]
        self.assertAlmostEqual(
            g["total_ms"], self.s["capture_window_ms"] - self.s["device_busy_ms"], places=3
        )
        self.assertEqual(
            {c: d["count"] for c, d in g["causes"].items()},
            {"host": 1, "device": 5751, "unattributed": 0, "tail": 1},
        )
        self.assertAlmostEqual(g["causes"]["host"]["total_ms"], 1.178, places=3)
        self.assertAlmostEqual(g["causes"]["device"]["total_ms"], 9.586, places=3)
        self.assertEqual(g["largest"][1]["next"], "[memcpy Host-to-Device]")
        self.assertLess(max(x["gap_ms"] for x in g["largest"] if x["cause"] == "device"), 0.02)


class RealFixtureStallTest(RealFixtureCase):
    def test_host_stalls_of_the_capture(self):
        # The Python reference's only host gap of 1 ms or more is the window's first: its first copy
        # is enqueued 1.18 ms after the window opens, in data_load of step 0.
        self.assertEqual(
            [
                (x["gap_ms"], x["quiet_ms"], x["usual_quiet_ms"], x["step"], x["phase"])
                for x in self.s["host_stalls"]
            ],
            [(1.177591, 1.121831, None, 0, "data_load")],
        )

    def test_a_stall_written_into_the_real_export(self):
        # 20 ms of host sleep 1 us into backward of step 5 (autograd's thread launches backward):
        # the device first drains ~12 ms of queued work, the host's quiet interval holds the sleep
        # plus the ~0.9 ms it usually spends there without runtime calls (zero_grad, the hand-off to
        # autograd).
        path = os.path.join(self.tmp, "stalled.sqlite")
        shutil.copy(self.export, path)
        inject_stall(path, first_phase(self.ex, "backward", 5).start + 1000, 20 * 1000000)
        s = compute_summary(load_export(path))
        stalls = [x for x in s["host_stalls"] if x["step"] != 0]
        self.assertEqual(len(stalls), 1, s["host_stalls"])
        x = stalls[0]
        self.assertEqual((x["step"], x["phase"]), (5, "backward"))
        self.assertLess(x["gap_ms"], 10.0)  # the queue absorbed part of it
        self.assertAlmostEqual(x["quiet_ms"], 21.08, delta=0.05)
        self.assertAlmostEqual(x["stall_ms"], 20.0, delta=0.2)
        self.assertGreater(
            x["held_ms"] - x["gap_ms"], 10.0
        )  # the work queued when the host went quiet


if __name__ == "__main__":
    unittest.main()
