"""The capture checks and the cross-check with nsys stats CSVs."""

import csv
import os
import re
from collections import OrderedDict

from .intervals import group_stats


def capture_checks(s, window, device_data):
    """The checks of one capture, from the summary's numbers (compute_summary() fills s up to
    expected_steps_source first) and its Window. Returns (checks, details): OrderedDicts by check name;
    a check is True, False, or None when the export lacks what it needs.

      step_count             torch_step ranges in the window == the expected count (>= 1 without one)
      copy_count             host-to-device copies in the window == 2 x steps (images and labels of each
                             step); with --decode gpu, none launched from the main thread and at least
                             one from the GPU decode stage's thread, which makes them all (the labels,
                             the crop list, the CPU path's images, nvJPEG's bitstream transfers)
      capture_boundary       exactly one capture_window, every torch_step range inside it
      no_sync_in_steps       no synchronizing runtime call inside a step (see compute_summary)
      no_layout_conversions  no NCHW <-> NHWC conversion kernel launched inside a step
    """
    checks, details = OrderedDict(), OrderedDict()
    exp, exp_src = s["expected_steps"], s["expected_steps_source"]
    windows, all_steps, outside, lo = window.ranges, window.all_steps, window.outside, window.lo
    if exp is not None:
        checks["step_count"] = s["steps"] == exp
        details["step_count"] = "%d torch_step ranges in the window, expected %d (%s)" % (
            s["steps"], exp, exp_src)
    else:
        checks["step_count"] = s["steps"] >= 1
        details["step_count"] = "%d torch_step ranges in the window, expected >= 1 (no expected count given)" % s["steps"]

    if not device_data:
        checks["copy_count"] = None
        details["copy_count"] = "not evaluable: the export has no CUDA tables"
    elif s.get("decode") == "gpu":
        main, stage = s.get("h2d_copies_main_thread"), s.get("h2d_copies_gpu_stage")
        checks["copy_count"] = (main or 0) == 0 and (stage or 0) >= 1
        details["copy_count"] = (
            "--decode gpu: %d host-to-device copies in the window, %s from the main thread (expected 0) "
            "and %s from the GPU decode stage's thread (expected >= 1)" % (
                s["h2d_copies"], "?" if main is None else main, "none" if stage is None else stage))
    else:
        checks["copy_count"] = s["h2d_copies"] == 2 * s["steps"]
        details["copy_count"] = "%d host-to-device copies in the window, expected 2 x %d steps = %d" % (
            s["h2d_copies"], s["steps"], 2 * s["steps"])

    problems = []
    if len(windows) != 1:
        problems.append("%d capture_window ranges (expected exactly 1)%s" % (
            len(windows), "; window taken as the span of the torch_step ranges" if not windows and all_steps else ""))
    if outside:
        problems.append("%d torch_step range(s) outside capture_window (first at %+.3f ms from the window start)"
                        % (len(outside), (outside[0].start - lo) / 1e6))
    if not all_steps:
        problems.append("no torch_step ranges")
    checks["capture_boundary"] = not problems
    details["capture_boundary"] = "; ".join(problems) if problems else \
        "1 capture_window; all %d torch_step ranges inside it" % len(all_steps)

    if s["sync_calls_in_steps"] is None:
        checks["no_sync_in_steps"] = None
        details["no_sync_in_steps"] = "not evaluable: the export has no CUDA API (runtime) table"
    else:
        checks["no_sync_in_steps"] = s["sync_calls_in_steps"] == 0
        details["no_sync_in_steps"] = "%d synchronizing call(s) inside torch_step ranges%s" % (
            s["sync_calls_in_steps"],
            "" if not s["sync_calls_in_steps_by_name"] else ": " + ", ".join(
                "%s x%d" % kv for kv in s["sync_calls_in_steps_by_name"].items()))

    if s["layout_conversion_kernels"] is None:
        checks["no_layout_conversions"] = None
        details["no_layout_conversions"] = "not evaluable: the export has no CUDA tables"
    else:
        checks["no_layout_conversions"] = s["layout_conversion_kernels"] == 0
        details["no_layout_conversions"] = "%d NCHW<->NHWC conversion kernel(s) launched inside torch_step ranges" % (
            s["layout_conversion_kernels"])
    return checks, details


def failed_checks(summary):
    """[(name, detail)] for checks that are false or not evaluable."""
    return [(k, summary["check_details"].get(k, "")) for k, v in summary["checks"].items() if v is not True]


def crosscheck_stats(ex, csv_prefix):
    """Compare per-range totals with an nsys stats nvtx_sum CSV beside the export (names with or without
    the ':' domain prefix), and kernel / memcpy counts with the kernel and memory CSVs. Returns a dict
    (None when no CSV is found)."""
    out = OrderedDict()
    nvtx_csv = csv_prefix + "_nvtx_sum.csv"
    if os.path.isfile(nvtx_csv):
        mine = group_stats((r.name, r.duration) for r in ex.ranges)
        mismatches, compared = [], 0
        for row in read_stats_csv(nvtx_csv):
            domain, name = normalize_nvtx_name(row.get("Range") or row.get("Name") or "")
            if domain is not None:
                continue
            compared += 1
            got = mine.get(name)
            want = (int(float(row["Instances"])), int(float(row["Total Time (ns)"])))
            if got is None or (got.count, got.total_ns) != want:
                mismatches.append(name)
        out["nvtx_sum"] = OrderedDict(csv=nvtx_csv, compared=compared, mismatches=mismatches)
    kern_csv = csv_prefix + "_cuda_gpu_kern_sum.csv"
    if os.path.isfile(kern_csv) and ex.kernels is not None:
        rows = read_stats_csv(kern_csv)
        csv_n = sum(int(float(r["Instances"])) for r in rows)
        out["cuda_gpu_kern_sum"] = OrderedDict(csv=kern_csv, csv_launches=csv_n,
                                               export_launches=len(ex.kernels), match=csv_n == len(ex.kernels))
    mem_csv = csv_prefix + "_cuda_gpu_mem_time_sum.csv"
    if os.path.isfile(mem_csv) and ex.memcpys is not None:
        rows = read_stats_csv(mem_csv)
        csv_h2d = sum(int(float(r["Count"])) for r in rows if "Host-to-Device" in r.get("Operation", ""))
        mine_h2d = sum(1 for c in ex.memcpys if c.is_htod)
        out["cuda_gpu_mem_time_sum"] = OrderedDict(csv=mem_csv, csv_h2d=csv_h2d, export_h2d=mine_h2d,
                                                   match=csv_h2d == mine_h2d)
    return out or None


def normalize_nvtx_name(name):
    """Split an nsys-stats range name into (domain, name): ':torch_step' and 'torch_step' are the default
    domain (None); 'data_pipeline:load_batch' is domain data_pipeline; '::' (C++ scopes) never splits."""
    if name.startswith(":") and not name.startswith("::"):
        return None, name[1:]
    m = re.match(r"^([^:]+):(?!:)(.+)$", name)
    if m:
        return m.group(1), m.group(2)
    return None, name


def read_stats_csv(path):
    """Rows of an nsys stats CSV as dicts (header names as nsys writes them)."""
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))
