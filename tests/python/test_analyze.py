"""Tests for scripts/analyze.py and its nsys_analysis package: tiny SQLite exports built here with known
intervals (every summary.json number known exactly), and the real nsys 2025.3 export of the Python reference in tests/fixtures/nsys/.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import importlib.util
import json
import lzma
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
SCRIPT = os.path.join(REPO, "scripts", "analyze.py")
FIXTURE_DIR = os.path.join(REPO, "tests", "fixtures", "nsys")
sys.path.insert(0, os.path.join(REPO, "scripts"))
from nsys_analysis.checks import crosscheck_stats, failed_checks, normalize_nvtx_name  # noqa: E402
from nsys_analysis.export import AnalysisError, load_export  # noqa: E402
from nsys_analysis.figures import plot_sweep, plot_sweep_batch_wait  # noqa: E402
from nsys_analysis.kernels import is_layout_conversion, kernel_labels  # noqa: E402
from nsys_analysis.markdown import render_markdown  # noqa: E402
from nsys_analysis.pipeline import write_outputs  # noqa: E402
from nsys_analysis.report import load_report, report_metrics  # noqa: E402
from nsys_analysis.summary import compute_summary  # noqa: E402

HAVE_MPL = importlib.util.find_spec("matplotlib") is not None

# Column sets of the nsys 2025.3 export (tests/fixtures/nsys/py_reuse8.sqlite); test_builder_schema_matches
# keeps them honest against the fixture.
SCHEMA = {
    "StringIds": ["id", "value"],
    "ENUM_NSYS_EVENT_TYPE": ["id", "name", "label"],
    "ENUM_CUDA_MEMCPY_OPER": ["id", "name", "label"],
    "NVTX_EVENTS": ["start", "end", "eventType", "rangeId", "category", "color", "text", "globalTid",
                    "endGlobalTid", "textId", "domainId", "uint64Value", "int64Value", "doubleValue",
                    "uint32Value", "int32Value", "floatValue", "jsonTextId", "jsonText", "binaryData"],
    "CUPTI_ACTIVITY_KIND_KERNEL": ["start", "end", "deviceId", "contextId", "greenContextId", "streamId",
                                   "correlationId", "globalPid", "demangledName", "shortName", "mangledName",
                                   "launchType", "cacheConfig", "registersPerThread", "gridX", "gridY", "gridZ",
                                   "blockX", "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory",
                                   "localMemoryPerThread", "localMemoryTotal", "gridId", "sharedMemoryExecuted",
                                   "graphNodeId", "sharedMemoryLimitConfig"],
    "CUPTI_ACTIVITY_KIND_MEMCPY": ["start", "end", "deviceId", "contextId", "greenContextId", "streamId",
                                   "correlationId", "globalPid", "bytes", "copyKind", "deprecatedSrcId", "srcKind",
                                   "dstKind", "srcDeviceId", "srcContextId", "dstDeviceId", "dstContextId",
                                   "migrationCause", "graphNodeId", "virtualAddress", "copyCount"],
    "CUPTI_ACTIVITY_KIND_MEMSET": ["start", "end", "deviceId", "contextId", "greenContextId", "streamId",
                                   "correlationId", "globalPid", "value", "bytes", "graphNodeId", "memKind"],
    "CUPTI_ACTIVITY_KIND_RUNTIME": ["start", "end", "eventClass", "globalTid", "correlationId", "nameId",
                                    "returnValue", "callchainId"],
}
# NOT NULL columns get 0 unless a row gives them.
NOT_NULL = {"deviceId", "contextId", "streamId", "registersPerThread", "gridX", "gridY", "gridZ", "blockX",
            "blockY", "blockZ", "staticSharedMemory", "dynamicSharedMemory", "localMemoryPerThread",
            "localMemoryTotal", "gridId", "bytes", "copyKind", "value", "eventClass", "returnValue",
            "shortName", "demangledName", "nameId"}

MEMCPY_ENUM = [(0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"), (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
               (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"), (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device")]
EVENT_ENUM = [(59, "NvtxPushPopRange", "NvtxPushPopRange"), (60, "NvtxStartEndRange", "NvtxStartEndRange"),
              (75, "NvtxDomainCreate", "NvtxDomainCreate")]

PID = 7
MAIN = (PID << 24) | 100      # training thread
LOADER = (PID << 24) | 200    # a data_pipeline worker
AUTOGRAD = (PID << 24) | 300  # the autograd engine's device thread
MS = 1_000_000                # ns per ms


class ExportBuilder:
    """Builds a minimal nsys-like SQLite export with the real table and column names."""

    def __init__(self, enums=True, event_ids=None, htod_id=1):
        self.tables = {name: [] for name in SCHEMA}
        self.strings = {}
        self.enums = enums
        self.event_ids = event_ids or {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
        self.htod_id = htod_id
        self.corr = 1000
        self.omit = set()

    def sid(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
        return self.strings[text]

    def range(self, name, start_ms, end_ms, tid=MAIN, domain=0, registered=False, kind="NvtxPushPopRange"):
        row = {"start": round(start_ms * MS), "end": None if end_ms is None else round(end_ms * MS),
               "eventType": self.event_ids[kind], "globalTid": tid, "domainId": domain}
        if registered:
            row["textId"] = self.sid(name)
        else:
            row["text"] = name
        self.tables["NVTX_EVENTS"].append(row)

    def domain(self, domain_id, name, tid=LOADER):
        self.tables["NVTX_EVENTS"].append({"start": 0, "eventType": self.event_ids["NvtxDomainCreate"],
                                           "globalTid": tid, "domainId": domain_id, "text": name})

    def api(self, name, start_ms, end_ms, tid=MAIN, corr=None):
        self.tables["CUPTI_ACTIVITY_KIND_RUNTIME"].append({
            "start": round(start_ms * MS), "end": round(end_ms * MS), "globalTid": tid,
            "correlationId": corr, "nameId": self.sid(name)})

    def kernel(self, start_ms, end_ms, name="void at::native::vectorized_elementwise_kernel<4>()",
               launch_ms=None, tid=MAIN, stream=7):
        self.corr += 1
        if launch_ms is not None:
            self.api("cudaLaunchKernel_v7000", launch_ms, launch_ms + 0.001, tid, self.corr)
        self.tables["CUPTI_ACTIVITY_KIND_KERNEL"].append({
            "start": round(start_ms * MS), "end": round(end_ms * MS), "correlationId": self.corr,
            "globalPid": PID << 24, "demangledName": self.sid(name), "shortName": self.sid(name.split("(")[0]),
            "streamId": stream})

    def _launched(self, call, launch_ms, tid):
        """A correlation id for a device activity, with its runtime call when launch_ms is given."""
        if launch_ms is None:
            return None
        self.corr += 1
        self.api(call, launch_ms, launch_ms + 0.001, tid, self.corr)
        return self.corr

    def memcpy(self, start_ms, end_ms, kind=None, nbytes=1024, launch_ms=None, tid=MAIN):
        self.tables["CUPTI_ACTIVITY_KIND_MEMCPY"].append({
            "start": round(start_ms * MS), "end": round(end_ms * MS),
            "copyKind": self.htod_id if kind is None else kind, "bytes": nbytes, "globalPid": PID << 24,
            "correlationId": self._launched("cudaMemcpyAsync_v3020", launch_ms, tid)})

    def memset(self, start_ms, end_ms, launch_ms=None, tid=MAIN):
        self.tables["CUPTI_ACTIVITY_KIND_MEMSET"].append({
            "start": round(start_ms * MS), "end": round(end_ms * MS), "bytes": 64, "globalPid": PID << 24,
            "correlationId": self._launched("cudaMemsetAsync_v3020", launch_ms, tid)})

    def write(self, path):
        conn = sqlite3.connect(path)
        for name, cols in SCHEMA.items():
            if name in self.omit or (name.startswith("ENUM_") and not self.enums):
                continue
            conn.execute('CREATE TABLE "%s" (%s)' % (name, ", ".join('"%s"' % c for c in cols)))
            rows = list(self.tables[name])
            if name == "StringIds":
                rows = [{"id": i, "value": v} for v, i in self.strings.items()]
            elif name == "ENUM_NSYS_EVENT_TYPE":
                rows = [{"id": i, "name": n, "label": n} for n, i in self.event_ids.items()]
            elif name == "ENUM_CUDA_MEMCPY_OPER":
                rows = [{"id": self.htod_id if n == "CUDA_MEMCPY_KIND_HTOD" else i, "name": n, "label": l}
                        for i, n, l in MEMCPY_ENUM]
            for row in rows:
                vals = [row.get(c, 0 if c in NOT_NULL else None) for c in cols]
                conn.execute('INSERT INTO "%s" VALUES (%s)' % (name, ",".join("?" * len(cols))), vals)
        conn.commit()
        conn.close()
        return path


def basic_export(**kw):
    """Two steps in a 10 ms window, with every interval case the summary must get right.

    window [1, 11] ms. Device intervals (ms) and their union inside the window:
      kernel [0.5, 1.5] crosses the left edge -> [1.0, 1.5]                            0.50
      H2D [2.6, 3.0] + H2D [2.9, 3.1] (overlap) + kernel [3.0, 4.0] with a nested kernel
        [3.2, 3.5] on another stream + memset [3.9, 4.2] (overlap) -> [2.6, 4.2]       1.60
      H2D [6.2, 6.4] + H2D [6.3, 6.45] -> [6.2, 6.45]                                   0.25
      kernel [6.6, 8.0]                                                                 1.40
      D2D copy [8.1, 8.2]                                                               0.10
      kernel [10.5, 11.5] crosses the right edge -> [10.5, 11.0]                        0.50
      kernel [12, 13] and H2D [0.2, 0.4] lie outside the window                         0
    busy 4.35 ms of 10 -> no activity 56.5 %; 4 H2D copies start inside the window.
    """
    b = ExportBuilder(**kw)
    b.domain(1, "data_pipeline")
    b.range("capture_window", 1.0, 11.0)
    b.range("torch_step", 2.0, 5.0)
    b.range("data_load", 2.0, 3.0)
    b.range("batch_wait", 2.0, 2.5)
    b.range("h2d_submit", 2.5, 3.0)
    b.range("forward", 3.0, 4.0, registered=True)
    b.range("backward", 4.0, 5.0, registered=True)
    b.range("torch_step", 5.0, 9.0)
    b.range("data_load", 5.0, 6.5)
    b.range("batch_wait", 5.0, 6.0)
    b.range("h2d_submit", 6.0, 6.5)
    b.range("forward", 6.5, 7.5, registered=True)
    b.range("backward", 7.5, 9.0, registered=True)
    b.range("capture_drain", 9.0, 10.9)
    # The loader's domain: never steps or phases, even when a range is named torch_step.
    b.range("load_batch", 1.5, 4.5, tid=LOADER, domain=1, registered=True)
    b.range("torch_step", 2.0, 2.2, tid=LOADER, domain=1)
    b.range("reuse_fence", 3.6, 3.8, tid=LOADER, domain=1)
    b.kernel(0.5, 1.5, launch_ms=0.4)
    b.memcpy(0.2, 0.4)
    b.memcpy(2.6, 3.0)
    b.memcpy(2.9, 3.1)
    b.kernel(3.0, 4.0, "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>()", launch_ms=3.05)
    b.kernel(3.2, 3.5, "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>()", launch_ms=3.1, stream=9)
    b.memset(3.9, 4.2)
    b.memcpy(6.2, 6.4)
    b.memcpy(6.3, 6.45)
    b.kernel(6.6, 8.0, "void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)2>()",
             launch_ms=6.55)
    b.memcpy(8.1, 8.2, kind=8)
    b.kernel(10.5, 11.5, launch_ms=8.5, tid=AUTOGRAD)
    b.kernel(12.0, 13.0, launch_ms=10.0)
    # A loader-side fence inside a step: blocks only the loader, so it is not a step sync.
    b.api("cudaEventSynchronize_v3020", 3.65, 3.75, tid=LOADER)
    # The final drain, after the last step.
    b.api("cudaDeviceSynchronize_v3020", 9.1, 10.8)
    return b


class TempDirCase(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="analyze_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def build(self, builder, name="export.sqlite"):
        return builder.write(os.path.join(self.tmp, name))

    def summarize(self, builder, report=None, expected_steps=None, name="export.sqlite"):
        return compute_summary(load_export(self.build(builder, name)), report, expected_steps)

    def run_cli(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), capture_output=True, text=True, timeout=120)


class BasicExportTest(TempDirCase):
    def test_every_number(self):
        s = self.summarize(basic_export(), expected_steps=2)
        self.assertEqual(s["capture_window_ms"], 10.0)
        self.assertEqual(s["capture_window_source"], "nvtx capture_window")
        self.assertEqual(s["capture_window_count"], 1)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["torch_step_ranges"], 2)
        self.assertEqual(s["steps_outside_window"], 0)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["device_busy_ms"], 4.35)
        self.assertEqual(s["no_activity_pct"], 56.5)
        self.assertEqual(s["step_ms"], [3.0, 4.0])
        self.assertEqual(s["data_load_ms"], [1.0, 1.5])
        self.assertEqual(s["batch_wait_ms"], [0.5, 1.0])
        self.assertEqual(s["h2d_submit_ms"], [0.5, 0.5])
        self.assertEqual(s["batch_wait_total_ms"], 1.5)
        self.assertEqual(s["batch_wait_max_ms"], 1.0)
        self.assertEqual(s["batch_wait_max_step"], 1)
        self.assertEqual(s["h2d_submit_total_ms"], 1.0)
        self.assertEqual(dict(s["phase_totals_ms"]), {
            "capture_window": 10.0, "torch_step": 7.0, "backward": 2.5, "data_load": 2.5, "forward": 2.0,
            "capture_drain": 1.9, "batch_wait": 1.5, "h2d_submit": 1.0})
        self.assertEqual(dict(s["phase_counts"]), {
            "capture_window": 1, "torch_step": 2, "backward": 2, "data_load": 2, "forward": 2,
            "capture_drain": 1, "batch_wait": 2, "h2d_submit": 2})
        self.assertEqual(list(s["phase_totals_ms"])[:2], ["capture_window", "torch_step"])
        self.assertEqual([(r["domain"], r["name"], r["count"], r["total_ms"]) for r in s["other_domain_ranges"]],
                         [("data_pipeline", "load_batch", 1, 3.0), ("data_pipeline", "reuse_fence", 1, 0.2),
                          ("data_pipeline", "torch_step", 1, 0.2)])
        self.assertEqual(s["sync_calls_in_steps"], 0)
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)
        self.assertEqual(s["layout_conversion_kernels"], 0)
        self.assertEqual(s["kernel_launches"], 6)
        self.assertEqual(s["last_device_end_after_last_step_ms"], 4.0)
        self.assertEqual(s["expected_steps"], 2)
        self.assertEqual(s["expected_steps_source"], "--expected-steps")
        self.assertEqual(dict(s["checks"]), {"step_count": True, "copy_count": True, "capture_boundary": True,
                                             "no_sync_in_steps": True, "no_layout_conversions": True})
        self.assertTrue(s["all_checks_pass"])
        self.assertNotIn("images_per_s", s)

    def test_tables(self):
        s = self.summarize(basic_export())
        top = s["top_kernels"]
        self.assertEqual([(k["label"], k["launches"], k["total_ms"]) for k in top],
                         [("elementwise", 3, 3.0), ("cuDNN convert", 1, 1.4), ("BN fwd", 2, 1.3)])
        self.assertEqual(top[0]["pct"], round(100 * 3.0 / 5.7, 2))
        mem = {m["operation"]: (m["count"], m["total_ms"], m["bytes"]) for m in s["memory_operations"]}
        self.assertEqual(mem, {"[memcpy Host-to-Device]": (5, 1.15, 5120), "[memcpy Device-to-Device]": (1, 0.1, 1024),
                               "[memset]": (1, 0.3, 64)})
        api = {a["name"]: a["calls"] for a in s["api_calls"]}
        self.assertEqual(api, {"cudaLaunchKernel": 6, "cudaEventSynchronize": 1, "cudaDeviceSynchronize": 1})

    def test_fallback_without_enum_tables_and_start_end_ranges(self):
        b = basic_export(enums=False)
        b.range("h2d_submit", 8.0, 8.25, kind="NvtxStartEndRange")  # a start/end range (eventType 60)
        s = self.summarize(b)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["h2d_submit_ms"], [0.5, 0.75])
        self.assertEqual(s["phase_counts"]["h2d_submit"], 3)

    def test_enum_ids_are_read_not_assumed(self):
        # Unusual ids: push/pop ranges are 159 and host-to-device copies are kind 5 in this export.
        ids = {"NvtxPushPopRange": 159, "NvtxStartEndRange": 160, "NvtxDomainCreate": 175}
        b = basic_export(event_ids=ids, htod_id=5)
        b.memcpy(7.0, 7.1, kind=1)  # kind 1 is not host-to-device in this export
        s = self.summarize(b)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["h2d_copies"], 4)
        self.assertEqual(s["other_domain_ranges"][0]["domain"], "data_pipeline")

    def test_unterminated_range_is_skipped(self):
        b = basic_export()
        b.range("torch_step", 10.0, None)
        s = self.summarize(b)
        self.assertEqual(s["unterminated_ranges"], 1)
        self.assertEqual(s["steps"], 2)

    def test_no_memset_table(self):
        b = basic_export()
        b.omit.add("CUPTI_ACTIVITY_KIND_MEMSET")
        s = self.summarize(b)
        # Without the memset [3.9, 4.2], the union ends at 4.0: busy 4.15 ms.
        self.assertEqual(s["device_busy_ms"], 4.15)
        self.assertEqual(s["no_activity_pct"], 58.5)


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


class FailingChecksTest(TempDirCase):
    def test_step_count_from_expected_steps(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertIs(s["checks"]["step_count"], False)
        self.assertIn("expected 3", s["check_details"]["step_count"])

    def test_step_count_from_report(self):
        report = {"capture": {"steps": 5, "images_per_s": 2864.1}, "steps": [], "interrupted": False}
        s = self.summarize(basic_export(), report=report)
        self.assertEqual(s["expected_steps"], 5)
        self.assertEqual(s["expected_steps_source"], "run report capture.steps")
        self.assertIs(s["checks"]["step_count"], False)
        self.assertEqual(s["images_per_s"], 2864.1)

    def test_step_count_without_expectation(self):
        s = self.summarize(basic_export())
        self.assertIsNone(s["expected_steps"])
        self.assertIs(s["checks"]["step_count"], True)
        b = ExportBuilder()
        b.range("capture_window", 1.0, 2.0)
        s = self.summarize(b, name="empty.sqlite")
        self.assertEqual(s["steps"], 0)
        self.assertIs(s["checks"]["step_count"], False)
        self.assertIs(s["checks"]["capture_boundary"], False)

    def test_copy_count(self):
        b = basic_export()
        b.tables["CUPTI_ACTIVITY_KIND_MEMCPY"].pop(1)  # drop the H2D at 2.6 ms
        s = self.summarize(b)
        self.assertEqual(s["h2d_copies"], 3)
        self.assertIs(s["checks"]["copy_count"], False)
        self.assertIn("expected 2 x 2 steps = 4", s["check_details"]["copy_count"])

    def test_capture_boundary_step_outside_window(self):
        b = basic_export()
        b.range("torch_step", 0.1, 0.9)       # a warm-up step that leaked into the capture
        b.range("torch_step", 10.0, 11.5)     # a step crossing the window's end
        s = self.summarize(b, expected_steps=2)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["torch_step_ranges"], 4)
        self.assertEqual(s["steps_outside_window"], 2)
        self.assertIs(s["checks"]["step_count"], True)
        self.assertIs(s["checks"]["capture_boundary"], False)
        self.assertIn("2 torch_step range(s) outside capture_window", s["check_details"]["capture_boundary"])

    def test_capture_boundary_two_windows(self):
        b = basic_export()
        b.range("capture_window", 12.0, 14.0)
        s = self.summarize(b)
        self.assertEqual(s["capture_window_count"], 2)
        self.assertEqual(s["capture_window_ms"], 13.0)
        self.assertIs(s["checks"]["capture_boundary"], False)

    def test_capture_boundary_missing_window_falls_back_to_steps(self):
        b = basic_export()
        b.tables["NVTX_EVENTS"] = [r for r in b.tables["NVTX_EVENTS"] if r.get("text") != "capture_window"]
        s = self.summarize(b)
        self.assertEqual(s["capture_window_source"], "span of torch_step ranges")
        self.assertEqual(s["capture_window_ms"], 7.0)  # [2, 9] ms
        # Busy inside [2, 9]: [2.6, 4.2] + [6.2, 6.45] + [6.6, 8.0] + [8.1, 8.2] = 3.35 ms.
        self.assertEqual(s["device_busy_ms"], 3.35)
        self.assertEqual(s["no_activity_pct"], round(100 * 3.65 / 7.0, 6))
        self.assertEqual(s["steps"], 2)
        self.assertIs(s["checks"]["capture_boundary"], False)
        self.assertIn("0 capture_window ranges", s["check_details"]["capture_boundary"])

    def test_sync_in_steps(self):
        b = basic_export()
        b.api("cudaStreamSynchronize_v3020", 7.0, 7.1)               # training thread, in step 1
        b.api("cudaEventSynchronize_v3020", 4.5, 4.6, tid=AUTOGRAD)  # autograd thread, in step 0
        b.api("cudaStreamSynchronize_v3020", 1.2, 1.3)               # before the first step
        s = self.summarize(b)
        self.assertEqual(s["sync_calls_in_steps"], 2)
        self.assertEqual(dict(s["sync_calls_in_steps_by_name"]), {"cudaEventSynchronize": 1, "cudaStreamSynchronize": 1})
        self.assertEqual(s["sync_calls_in_loader_ranges"], 1)
        self.assertIs(s["checks"]["no_sync_in_steps"], False)

    def test_layout_conversion(self):
        b = basic_export()
        name = "void cudnn::ops::nchwToNhwcKernel<float, float, float, (bool)1, (bool)0, (cudnnKernelDataType_t)0>(cudnn::ops::nchw2nhwc_params_t<T3>, const T1 *, T2 *)"
        b.kernel(4.3, 4.4, name, launch_ms=4.2)     # launched in step 0
        b.kernel(9.5, 9.6, name, launch_ms=9.4)     # launched during the drain: not per step
        b.kernel(8.5, 8.6, "void transpose_nhwc_to_nchw_kernel()", launch_ms=None)  # no launch record: by start
        s = self.summarize(b)
        self.assertEqual(s["layout_conversion_kernels"], 2)
        self.assertEqual(dict(s["layout_conversion_names"]), {name: 2, "void transpose_nhwc_to_nchw_kernel()": 1})
        self.assertIs(s["checks"]["no_layout_conversions"], False)

    def test_failed_checks_helper(self):
        s = self.summarize(basic_export(), expected_steps=3)
        self.assertEqual([n for n, _ in failed_checks(s)], ["step_count"])


class LayoutPatternTest(unittest.TestCase):
    def test_patterns(self):
        yes = ["void cudnn::ops::nchwToNhwcKernel<float>()", "void cudnn::ops::nhwcToNchwKernel<__half>()",
               "nchw2nhwc_kernel", "NHWC2NCHW", "genericReformat::NCHWToNHWC", "nhwc_to_nchw_f16",
               "void transpose_nchw_nhwc<float>()"]
        no = ["void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)2>()",
              "void nhwcAddPaddingKernel<float, float, float, (bool)1, (cudnnKernelDataType_t)2>()",
              "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
              "void cudnn::batchnorm_fwtr_nhwc_semiPersist<float>()", "void transpose_readWrite_alignment_kernel<float>()"]
        for name in yes:
            self.assertTrue(is_layout_conversion(name), name)
        for name in no:
            self.assertFalse(is_layout_conversion(name), name)

    def test_labels(self):
        names = ["void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)0>()",
                 "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>>()",
                 "void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)1>()",
                 "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
                 "void at::native::<unnamed>::multi_tensor_apply_kernel<TensorListMetadata<3>>()",
                 "void foo::my_custom_kernel<int>(int)"]
        self.assertEqual(kernel_labels(names),
                         ["BN bwd #1", "elementwise add", "BN bwd #2", "conv dgrad", "SGD", "my_custom_kernel"])

    def test_csv_names(self):
        self.assertEqual(normalize_nvtx_name(":torch_step"), (None, "torch_step"))
        self.assertEqual(normalize_nvtx_name("torch_step"), (None, "torch_step"))
        self.assertEqual(normalize_nvtx_name("data_pipeline:load_batch"), ("data_pipeline", "load_batch"))
        self.assertEqual(normalize_nvtx_name("aten::conv2d"), (None, "aten::conv2d"))


class ReportTest(TempDirCase):
    def test_cpp_report(self):
        path = os.path.join(self.tmp, "run.json")
        with open(path, "w") as f:
            json.dump({"config": {"steps": 2}, "capture": {"warmup_steps": 3, "steps": 2, "images_per_s": 100.5,
                                                           "elapsed_s": 2.5},
                       "steps": [{"index": 0, "batch_wait_ms": 1.0, "h2d_submit_ms": 0.25},
                                 {"index": 1, "batch_wait_ms": 3.0, "h2d_submit_ms": 0.5}],
                       "interrupted": False}, f)
        m = report_metrics(load_report(path))
        self.assertEqual((m["format"], m["images_per_s"], m["steps"], m["step_records"]), ("train_resnet50", 100.5, 2, 2))
        self.assertEqual((m["batch_wait_total_ms"], m["batch_wait_max_ms"], m["batch_wait_max_step"],
                          m["h2d_submit_total_ms"]), (4.0, 3.0, 1, 0.75))

    def test_python_report_line_in_a_log(self):
        path = os.path.join(self.tmp, "py.log")
        with open(path, "w") as f:
            f.write("Collecting data...\n{not json}\n")
            f.write('{"workers": 8, "steps": 8, "images_per_s": 4236.5, "batch_wait_s": 0.0394, '
                    '"max_wait_ms": 3.7, "h2d_submit_s": 0.0303}\n')
            f.write("Generating '/tmp/nsys-report.qdstrm'\n")
        m = report_metrics(load_report(path))
        self.assertEqual((m["format"], m["images_per_s"], m["steps"], m["batch_wait_max_ms"]),
                         ("seed_workload", 4236.5, 8, 3.7))
        self.assertAlmostEqual(m["batch_wait_total_ms"], 39.4, places=9)
        s = self.summarize(basic_export(), report=load_report(path))
        self.assertEqual(s["images_per_s"], 4236.5)
        self.assertEqual(s["expected_steps"], 8)

    def test_bad_report(self):
        path = os.path.join(self.tmp, "bad.json")
        with open(path, "w") as f:
            f.write("no json here\n")
        with self.assertRaises(AnalysisError):
            load_report(path)


class CliTest(TempDirCase):
    def test_missing_file(self):
        r = self.run_cli(os.path.join(self.tmp, "nope.sqlite"), "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no such file", r.stderr)
        self.assertEqual(len(r.stderr.strip().splitlines()), 1)

    def test_not_sqlite(self):
        path = os.path.join(self.tmp, "capture.sqlite")
        with open(path, "w") as f:
            f.write("this is a text file, not a database\n" * 10)
        r = self.run_cli(path, "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("not an SQLite database", r.stderr)
        xz = os.path.join(FIXTURE_DIR, "py_reuse8.sqlite.xz")
        r = self.run_cli(xz, "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("decompress it first", r.stderr)

    def test_no_nvtx_table(self):
        b = basic_export()
        b.omit.add("NVTX_EVENTS")
        r = self.run_cli(self.build(b), "--out", self.tmp, "--no-figures")
        self.assertEqual(r.returncode, 2)
        self.assertIn("no NVTX_EVENTS", r.stderr)

    def test_no_cuda_tables_nvtx_only(self):
        b = basic_export()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        out = os.path.join(self.tmp, "out")
        r = self.run_cli(self.build(b), "--out", out, "--no-figures", "--expected-steps", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertFalse(s["device_data"])
        for key in ("no_activity_pct", "h2d_copies", "sync_calls_in_steps", "layout_conversion_kernels",
                    "top_kernels", "api_calls"):
            self.assertIsNone(s[key], key)
        self.assertEqual(s["steps"], 2)
        self.assertEqual(s["checks"], {"step_count": True, "copy_count": None, "capture_boundary": True,
                                       "no_sync_in_steps": None, "no_layout_conversions": None})
        self.assertIn("not evaluable", s["check_details"]["copy_count"])
        r = self.run_cli(self.build(b, "again.sqlite"), "--out", out, "--no-figures", "--check")
        self.assertEqual(r.returncode, 3)
        self.assertIn("copy_count", r.stderr)

    def test_check_mode(self):
        path = self.build(basic_export())
        out = os.path.join(self.tmp, "out")
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "2", "--check")
        self.assertEqual(r.returncode, 0, r.stderr)
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "3", "--strict")
        self.assertEqual(r.returncode, 3)
        self.assertIn("step_count", r.stderr)
        r = self.run_cli(path, "--out", out, "--no-figures", "--expected-steps", "3")
        self.assertEqual(r.returncode, 0)  # without --check a failing check is reported, not fatal
        with open(os.path.join(out, "summary.md")) as f:
            md = f.read()
        self.assertIn("| step_count | FAIL |", md)
        self.assertIn("## Ranges of other NVTX domains", md)


class RealFixtureTest(unittest.TestCase):
    """The Python reference captured by nsys 2025.3 on an H200 (tests/fixtures/nsys/README.md)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="analyze_fixture_")
        cls.export = os.path.join(cls.tmp, "py_reuse8.sqlite")
        with lzma.open(os.path.join(FIXTURE_DIR, "py_reuse8.sqlite.xz")) as src, open(cls.export, "wb") as dst:
            shutil.copyfileobj(src, dst)
        for name in os.listdir(FIXTURE_DIR):
            if name.endswith(".csv"):
                shutil.copy(os.path.join(FIXTURE_DIR, name), cls.tmp)
        cls.ex = load_export(cls.export)
        cls.s = compute_summary(cls.ex, expected_steps=8)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)

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

    def test_known_values(self):
        s = self.s
        self.assertEqual(s["steps"], 8)
        self.assertAlmostEqual(s["capture_window_ms"], 357.5, delta=0.1)
        self.assertEqual(s["h2d_copies"], 16)
        self.assertAlmostEqual(s["no_activity_pct"], 3.7, delta=0.1)
        self.assertEqual(s["checks"], {"step_count": True, "copy_count": True, "capture_boundary": True,
                                       "no_sync_in_steps": True, "no_layout_conversions": True})
        self.assertEqual(s["nsys_version"], "2025.3.2.0")

    def test_agrees_with_nsys_stats(self):
        s = self.s
        # nvtx_sum.csv: ':torch_step' 339948398 ns over 8 instances, ':batch_wait' 1372762 ns.
        self.assertEqual(s["phase_totals_ms"]["torch_step"], 339.948398)
        self.assertEqual(s["phase_totals_ms"]["batch_wait"], 1.372762)
        self.assertEqual(s["batch_wait_total_ms"], 1.372762)
        self.assertEqual(s["h2d_submit_total_ms"], 5.794361)
        # cuda_gpu_kern_sum.csv's first row; cuda_api_sum.csv's one cudaDeviceSynchronize (the drain).
        self.assertEqual((s["top_kernels"][0]["launches"], s["top_kernels"][0]["total_ms"]), (200, 44.112756))
        self.assertEqual(s["top_kernels"][0]["label"], "BN bwd #1")
        api = {a["name"]: a for a in s["api_calls"]}
        self.assertEqual(api["cudaDeviceSynchronize"]["calls"], 1)
        self.assertEqual(s["sync_calls_in_steps"], 0)
        check = crosscheck_stats(self.ex, os.path.join(self.tmp, "py_reuse8"))
        self.assertEqual(check["nvtx_sum"]["compared"], 10)
        self.assertEqual(check["nvtx_sum"]["mismatches"], [])
        self.assertTrue(check["cuda_gpu_kern_sum"]["match"])
        self.assertEqual(check["cuda_gpu_mem_time_sum"]["csv_h2d"], 16)

    def test_channels_last_cudnn_conversions_are_not_layout_mismatches(self):
        names = {k.name for k in self.ex.kernels}
        self.assertTrue(any("convertTensor_kernel" in n for n in names))
        self.assertEqual(self.s["layout_conversion_kernels"], 0)
        self.assertEqual(self.s["layout_conversion_names"], {})

    def test_cli_with_python_report(self):
        report = os.path.join(self.tmp, "py_reuse8.json")
        with open(report, "w") as f:
            f.write('{"workers": 8, "prefetch": 2, "pin": true, "steps": 8, "reuse": true, "seed": 2026, '
                    '"images_per_s": 2864.1, "batch_wait_s": 0.0014, "max_wait_ms": 0.35, "h2d_submit_s": 0.0058}\n')
        out = os.path.join(self.tmp, "cli")
        args = [sys.executable, SCRIPT, self.export, "--report", report, "--out", out, "--check"]
        if not HAVE_MPL:
            args.append("--no-figures")
        r = subprocess.run(args, capture_output=True, text=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "summary.json")) as f:
            s = json.load(f)
        self.assertEqual(s["images_per_s"], 2864.1)
        self.assertEqual(s["expected_steps_source"], "run report steps")
        self.assertEqual(s["stats_crosscheck"]["nvtx_sum"]["mismatches"], [])
        if HAVE_MPL:
            for name in ("fig1_phases.png", "fig2_top_kernels.png", "fig3_timeline.png", "fig5_batch_wait.png"):
                path = os.path.join(out, name)
                with open(path, "rb") as f:
                    self.assertEqual(f.read(8), b"\x89PNG\r\n\x1a\n", name)
                self.assertGreater(os.path.getsize(path), 20000, name)

    def test_builder_schema_matches(self):
        conn = sqlite3.connect(self.export)
        try:
            for table, cols in SCHEMA.items():
                have = [r[1] for r in conn.execute('PRAGMA table_info("%s")' % table)]
                self.assertEqual(have, cols, table)
        finally:
            conn.close()


@unittest.skipUnless(HAVE_MPL, "matplotlib not installed for %s" % sys.executable)
class FigureTest(TempDirCase):
    def test_sweep_figures_and_empty_inputs(self):
        rows = [{"config": "reuse_8", "runs": [{"seed": 2026, "images_per_s": 4236.0, "no_activity_pct": 3.1},
                                               {"seed": 2027, "images_per_s": 4210.0, "no_activity_pct": 2.9}]},
                {"config": "no_pin", "runs": [{"seed": 2026, "images_per_s": 2000.0, "no_activity_pct": None}]}]
        p4 = plot_sweep(rows, os.path.join(self.tmp, "fig4.png"))
        p5 = plot_sweep_batch_wait([("reset_8 seed 2026", [671.0, 1.0, 0.5]),
                                            ("reuse_8 seed 2026", [3.7, 0.4, 0.3])],
                                           [], os.path.join(self.tmp, "fig5.png"))
        for p in (p4, p5):
            self.assertGreater(os.path.getsize(p), 10000)
        # A capture without CUDA data still gets its figures.
        b = basic_export()
        b.omit.update(n for n in SCHEMA if n.startswith("CUPTI_"))
        ex = load_export(b.write(os.path.join(self.tmp, "nvtx.sqlite")))
        paths = write_outputs(compute_summary(ex), ex, os.path.join(self.tmp, "out"))
        self.assertEqual(len(paths), 4)


if __name__ == "__main__":
    unittest.main()
