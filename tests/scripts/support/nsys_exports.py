"""Test helpers for the nsys_analysis tests: tiny SQLite exports with the real nsys table and column
names (ExportBuilder, basic_export, rank_export for the ranks of a data-parallel run, epoch_export
for a window across an epoch's end), and the real nsys
2025.3 export of the Python reference in tests/fixtures/nsys/ (RealFixtureCase)."""

import glob
import json
import lzma
import os
import re
import shutil
import sqlite3
import tempfile
import unittest

from nsys_analysis.capture.export import load_export
from nsys_analysis.capture.summary import compute_summary, find_window

from .testutil import FIXTURE_DIR, ScratchCase


# A real data-parallel capture, one export per rank, as scripts/profile.sh --nproc N names it:
# tests/fixtures/nsys/<RANKS_FIXTURE>.rank<r>.sqlite.xz, with <RANKS_FIXTURE>.rank<r>.json (the
# rank's run report) and <RANKS_FIXTURE>.rank<r>_<report>.csv (nsys stats) beside it.
# RealRanksFixtureCase skips its tests until these are committed.
RANKS_FIXTURE = "ddp2"

# Column sets of the nsys 2025.3 export (tests/fixtures/nsys/py_reuse8.sqlite);
# test_builder_schema_matches keeps them honest against the fixture.
SCHEMA = {
    "StringIds": ["id", "value"],
    "ENUM_NSYS_EVENT_TYPE": ["id", "name", "label"],
    "ENUM_CUDA_MEMCPY_OPER": ["id", "name", "label"],
    "NVTX_EVENTS": [
        "start",
        "end",
        "eventType",
        "rangeId",
        "category",
        "color",
        "text",
        "globalTid",
        "endGlobalTid",
        "textId",
        "domainId",
        "uint64Value",
        "int64Value",
        "doubleValue",
        "uint32Value",
        "int32Value",
        "floatValue",
        "jsonTextId",
        "jsonText",
        "binaryData",
    ],
    "CUPTI_ACTIVITY_KIND_KERNEL": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "demangledName",
        "shortName",
        "mangledName",
        "launchType",
        "cacheConfig",
        "registersPerThread",
        "gridX",
        "gridY",
        "gridZ",
        "blockX",
        "blockY",
        "blockZ",
        "staticSharedMemory",
        "dynamicSharedMemory",
        "localMemoryPerThread",
        "localMemoryTotal",
        "gridId",
        "sharedMemoryExecuted",
        "graphNodeId",
        "sharedMemoryLimitConfig",
    ],
    "CUPTI_ACTIVITY_KIND_MEMCPY": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "bytes",
        "copyKind",
        "deprecatedSrcId",
        "srcKind",
        "dstKind",
        "srcDeviceId",
        "srcContextId",
        "dstDeviceId",
        "dstContextId",
        "migrationCause",
        "graphNodeId",
        "virtualAddress",
        "copyCount",
    ],
    "CUPTI_ACTIVITY_KIND_MEMSET": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "value",
        "bytes",
        "graphNodeId",
        "memKind",
    ],
    "CUPTI_ACTIVITY_KIND_RUNTIME": [
        "start",
        "end",
        "eventClass",
        "globalTid",
        "correlationId",
        "nameId",
        "returnValue",
        "callchainId",
    ],
    "ThreadNames": ["nameId", "priority", "globalTid"],
    "PROFILER_OVERHEAD": ["start", "end", "globalTid", "nameId", "returnValue"],
}
# Tables the fixture lacks, as nsys 2025.3 writes them. CUPTI_ACTIVITY_KIND_GRAPH_TRACE: one row per
# graph execution recorded whole (without --cuda-graph-trace=node), from a real nsys 2025.3.2 export
# of a CUDA graph replayed on the H200 (its correlationId is the cudaGraphLaunch call's; the export
# then has no kernel row for the graph's nodes). Like nsys, ExportBuilder creates them only when
# they have rows.
LAZY_SCHEMA = {
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": [
        "start",
        "end",
        "deviceId",
        "contextId",
        "greenContextId",
        "streamId",
        "correlationId",
        "globalPid",
        "graphId",
        "graphExecId",
    ],
}
# NOT NULL columns get 0 unless a row gives them.
NOT_NULL = {
    "deviceId",
    "contextId",
    "streamId",
    "registersPerThread",
    "gridX",
    "gridY",
    "gridZ",
    "blockX",
    "blockY",
    "blockZ",
    "staticSharedMemory",
    "dynamicSharedMemory",
    "localMemoryPerThread",
    "localMemoryTotal",
    "gridId",
    "bytes",
    "copyKind",
    "value",
    "eventClass",
    "returnValue",
    "shortName",
    "demangledName",
    "nameId",
    "graphId",
    "graphExecId",
}

MEMCPY_ENUM = [
    (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
    (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
    (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
    (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
]
EVENT_ENUM = [
    (59, "NvtxPushPopRange", "NvtxPushPopRange"),
    (60, "NvtxStartEndRange", "NvtxStartEndRange"),
    (75, "NvtxDomainCreate", "NvtxDomainCreate"),
]

PID = 7
MAIN = (PID << 24) | 100  # training thread
LOADER = (PID << 24) | 200  # a data_pipeline worker
AUTOGRAD = (PID << 24) | 300  # the autograd engine's device thread
STAGE = (PID << 24) | 400  # the GPU decode stage (--decode gpu), loader/gpu
CUPTI = (PID << 24) | 500  # CUPTI's worker thread (nsys's own)
MS = 1_000_000  # ns per ms


class ExportBuilder:
    """Builds a minimal nsys-like SQLite export with the real table and column names."""

    def __init__(self, enums=True, event_ids=None, htod_id=1):
        self.tables = {name: [] for name in list(SCHEMA) + list(LAZY_SCHEMA)}
        self.strings = {}
        self.enums = enums
        self.event_ids = event_ids or {
            "NvtxPushPopRange": 59,
            "NvtxStartEndRange": 60,
            "NvtxDomainCreate": 75,
        }
        self.htod_id = htod_id
        self.corr = 1000
        self.omit = set()

    def sid(self, text):
        if text not in self.strings:
            self.strings[text] = len(self.strings) + 1
        return self.strings[text]

    def range(
        self, name, start_ms, end_ms, tid=MAIN, domain=0, registered=False, kind="NvtxPushPopRange"
    ):
        row = {
            "start": round(start_ms * MS),
            "end": None if end_ms is None else round(end_ms * MS),
            "eventType": self.event_ids[kind],
            "globalTid": tid,
            "domainId": domain,
        }
        if registered:
            row["textId"] = self.sid(name)
        else:
            row["text"] = name
        self.tables["NVTX_EVENTS"].append(row)

    def domain(self, domain_id, name, tid=LOADER):
        self.tables["NVTX_EVENTS"].append(
            {
                "start": 0,
                "eventType": self.event_ids["NvtxDomainCreate"],
                "globalTid": tid,
                "domainId": domain_id,
                "text": name,
            }
        )

    def api(self, name, start_ms, end_ms, tid=MAIN, corr=None):
        self.tables["CUPTI_ACTIVITY_KIND_RUNTIME"].append(
            {
                "start": round(start_ms * MS),
                "end": round(end_ms * MS),
                "globalTid": tid,
                "correlationId": corr,
                "nameId": self.sid(name),
            }
        )

    def thread_name(self, tid, name, priority=20):
        """A ThreadNames row: nsys's name of thread tid (a registered string)."""
        self.tables["ThreadNames"].append(
            {"nameId": self.sid(name), "priority": priority, "globalTid": tid}
        )

    def overhead(self, name, start_ms, end_ms, tid):
        """A PROFILER_OVERHEAD row: time nsys itself took on thread tid
        ("CUPTI Buffer flush", ...)."""
        self.tables["PROFILER_OVERHEAD"].append(
            {
                "start": round(start_ms * MS),
                "end": round(end_ms * MS),
                "globalTid": tid,
                "nameId": self.sid(name),
                "returnValue": 0,
            }
        )

    def kernel(
        self,
        start_ms,
        end_ms,
        name="void at::native::vectorized_elementwise_kernel<4>()",
        launch_ms=None,
        tid=MAIN,
        stream=7,
        call="cudaLaunchKernel_v7000",
    ):
        self.corr += 1
        if launch_ms is not None:
            self.api(call, launch_ms, launch_ms + 0.001, tid, self.corr)
        self.tables["CUPTI_ACTIVITY_KIND_KERNEL"].append(
            {
                "start": round(start_ms * MS),
                "end": round(end_ms * MS),
                "correlationId": self.corr,
                "globalPid": PID << 24,
                "demangledName": self.sid(name),
                "shortName": self.sid(name.split("(")[0]),
                "streamId": stream,
            }
        )

    def graph_launch(self, launch_ms, nodes, tid=MAIN, stream=7, node_trace=True, graph_id=1):
        """One cudaGraphLaunch at launch_ms and its graph's kernels, nodes
        [(start_ms, end_ms[, name[, stream]])], as nsys --cuda-graph-trace=node records them: each
        node a kernel row with the launch's correlation id (default name a batch-norm kernel,
        default stream `stream`). node_trace False: as nsys's default --cuda-graph-trace=graph
        records them, one graph-trace row from the first node's start to the last node's end, with
        the launch's correlation id."""
        self.corr += 1
        self.api("cudaGraphLaunch_v10000", launch_ms, launch_ms + 0.005, tid, self.corr)
        if not node_trace:
            if nodes:
                self.tables["CUPTI_ACTIVITY_KIND_GRAPH_TRACE"].append(
                    {
                        "start": round(min(n[0] for n in nodes) * MS),
                        "end": round(max(n[1] for n in nodes) * MS),
                        "correlationId": self.corr,
                        "globalPid": PID << 24,
                        "streamId": stream,
                        "graphId": graph_id,
                        "graphExecId": graph_id + 1,
                    }
                )
            return
        for i, node in enumerate(nodes):
            start_ms, end_ms = node[0], node[1]
            name = node[2] if len(node) > 2 else "void cudnn::bn_fw_tr_1C11_kernel_NCHW<float>()"
            self.tables["CUPTI_ACTIVITY_KIND_KERNEL"].append(
                {
                    "start": round(start_ms * MS),
                    "end": round(end_ms * MS),
                    "correlationId": self.corr,
                    "globalPid": PID << 24,
                    "demangledName": self.sid(name),
                    "shortName": self.sid(name.split("(")[0]),
                    "streamId": node[3] if len(node) > 3 else stream,
                    "graphNodeId": 100 + i,
                }
            )

    def _launched(self, call, launch_ms, tid):
        """A correlation id for a device activity, with its runtime call when launch_ms is given."""
        if launch_ms is None:
            return None
        self.corr += 1
        self.api(call, launch_ms, launch_ms + 0.001, tid, self.corr)
        return self.corr

    def memcpy(self, start_ms, end_ms, kind=None, nbytes=1024, launch_ms=None, tid=MAIN):
        self.tables["CUPTI_ACTIVITY_KIND_MEMCPY"].append(
            {
                "start": round(start_ms * MS),
                "end": round(end_ms * MS),
                "copyKind": self.htod_id if kind is None else kind,
                "bytes": nbytes,
                "globalPid": PID << 24,
                "correlationId": self._launched("cudaMemcpyAsync_v3020", launch_ms, tid),
            }
        )

    def memset(self, start_ms, end_ms, launch_ms=None, tid=MAIN):
        self.tables["CUPTI_ACTIVITY_KIND_MEMSET"].append(
            {
                "start": round(start_ms * MS),
                "end": round(end_ms * MS),
                "bytes": 64,
                "globalPid": PID << 24,
                "correlationId": self._launched("cudaMemsetAsync_v3020", launch_ms, tid),
            }
        )

    def write(self, path):
        conn = sqlite3.connect(path)
        for name, cols in list(SCHEMA.items()) + list(LAZY_SCHEMA.items()):
            if name in self.omit or (name.startswith("ENUM_") and not self.enums):
                continue
            if name in LAZY_SCHEMA and not self.tables[name]:
                continue
            conn.execute('CREATE TABLE "%s" (%s)' % (name, ", ".join('"%s"' % c for c in cols)))
            rows = list(self.tables[name])
            if name == "StringIds":
                rows = [{"id": i, "value": v} for v, i in self.strings.items()]
            elif name == "ENUM_NSYS_EVENT_TYPE":
                rows = [{"id": i, "name": n, "label": n} for n, i in self.event_ids.items()]
            elif name == "ENUM_CUDA_MEMCPY_OPER":
                rows = [
                    {
                        "id": self.htod_id if n == "CUDA_MEMCPY_KIND_HTOD" else i,
                        "name": n,
                        "label": l,
                    }
                    for i, n, l in MEMCPY_ENUM
                ]
            for row in rows:
                vals = [row.get(c, 0 if c in NOT_NULL else None) for c in cols]
                conn.execute(
                    'INSERT INTO "%s" VALUES (%s)' % (name, ",".join("?" * len(cols))), vals
                )
        conn.commit()
        conn.close()
        return path


def graph_run(steps=3, launches=None, node_trace=True):
    """A --cuda-graph capture: each step [3k + 1, 3k + 3.5] ms holds data_load [+0, +0.5] with its
    two H2D copies and a device-to-device copy into the graph's inputs, then graph_replay
    [+0.5, +0.6] launching the graph, whose three nodes run back to back. launches: {step: n}
    cudaGraphLaunch calls in that step's graph_replay (default 1). node_trace False records each
    replay whole instead of its nodes, [+0.6, +2.4], as nsys's default --cuda-graph-trace=graph
    does."""
    b = ExportBuilder()
    b.range("capture_window", 0.5, 3.0 * steps + 1.5)
    for k in range(steps):
        t = 3.0 * k + 1.0
        b.range("torch_step", t, t + 2.5)
        b.range("data_load", t, t + 0.5)
        b.range("h2d_submit", t + 0.1, t + 0.5)
        b.memcpy(t + 0.2, t + 0.25, launch_ms=t + 0.15)
        b.memcpy(t + 0.26, t + 0.27, launch_ms=t + 0.16)
        b.memcpy(t + 0.3, t + 0.35, kind=8, launch_ms=t + 0.2)
        b.range("graph_replay", t + 0.5, t + 0.6)
        for i in range((launches or {}).get(k, 1)):
            nodes = [(t + 0.6 + 0.6 * j, t + 1.2 + 0.6 * j) for j in range(3)]
            b.graph_launch(t + 0.52 + 0.02 * i, nodes, node_trace=node_trace)
    return b


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
    b.kernel(
        6.6,
        8.0,
        "void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, "
        "(cudnnKernelDataType_t)2>()",
        launch_ms=6.55,
    )
    b.memcpy(8.1, 8.2, kind=8)
    b.kernel(10.5, 11.5, launch_ms=8.5, tid=AUTOGRAD)
    b.kernel(12.0, 13.0, launch_ms=10.0)
    # A loader-side fence inside a step: blocks only the loader, so it is not a step sync.
    b.api("cudaEventSynchronize_v3020", 3.65, 3.75, tid=LOADER)
    # The final drain, after the last step.
    b.api("cudaDeviceSynchronize_v3020", 9.1, 10.8)
    return b


def phase_export():
    """Two captured steps whose device work is launched from the main thread, autograd's thread and
    the GPU decode stage, for gpu_time_by_phase(). Window [0, 20] ms; step 0 [1, 10], step 1
    [10, 18.5].

      step 0  data_load [1, 3] (batch_wait [1, 2], h2d_submit [2, 3]), forward [3, 5] (a layer range
              conv1 [3.05, 3.5] inside), zero_grad [5, 5.2], backward [5.2, 8], optimizer_step
              [8, 9.5]; nothing from 9.5 to 10
      step 1  data_load [10, 11], forward [11, 13], backward [13, 16], optimizer_step [16, 18]: no
              zero_grad (a step may lack a phase), nothing from 18 to 18.5
      capture_drain [18.5, 19.9]

    Device activity (device ms) and where it goes:
      data_load       H2D [2.6, 2.9] (MAIN at 2.5, in h2d_submit)                                0.3
                      H2D [10.6, 10.7] (MAIN at 10.5)                                            0.1
      forward         kernel [3.2, 4.0] (MAIN at 3.1, inside conv1)                              0.8
                      kernel [11.2, 12.0] (MAIN at 11.1)                                         0.8
      backward        kernel [5.6, 7.0] (AUTOGRAD at 5.5) + memset [7.0, 7.1] (AUTOGRAD at 6.0)  1.5
                      kernel [7.1, 7.2] (MAIN at 5.3: loss gradient seed)                        0.1
                      kernel [13.5, 15.5] (AUTOGRAD at 13.4)                                     2.0
      optimizer_step  kernel [8.2, 9.0] (MAIN at 8.1)                                            0.8
                      kernel [16.2, 17.0] (MAIN at 16.1)                                         0.8
      outside phases  kernel [9.8, 9.9] (MAIN at 9.7, in step 0 after optimizer_step)            0.1
                      kernel [19.5, 20.5] (MAIN at 18.7, capture_drain) clipped to [19.5, 20]    0.5
                      kernel [0.5, 1.5] (MAIN at 0.2, before step 0)                             1.0
      input pipeline  kernel [3.3, 3.6] (STAGE at 3.2, during forward)
                      + H2D [12.0, 12.5] (STAGE)                                                 0.8
      unattributed    memset [4.5, 4.6] (no runtime call)                                        0.1
      not counted     kernel [21, 22] (after the window)
    Per phase: data_load 0.4, forward 1.6, zero_grad 0, backward 3.6, optimizer_step 1.6, outside
    1.6, input pipeline 0.8, unattributed 0.1: total 9.7 ms; main-thread share: backward 0.1, the
    rest all.
    """
    b = ExportBuilder()
    b.domain(1, "data_pipeline", tid=STAGE)
    b.range("capture_window", 0.0, 20.0)
    b.range("torch_step", 1.0, 10.0)
    b.range("data_load", 1.0, 3.0)
    b.range("batch_wait", 1.0, 2.0)
    b.range("h2d_submit", 2.0, 3.0)
    b.range("forward", 3.0, 5.0)
    b.range("conv1", 3.05, 3.5)
    b.range("zero_grad", 5.0, 5.2)
    b.range("backward", 5.2, 8.0)
    b.range("optimizer_step", 8.0, 9.5)
    b.range("torch_step", 10.0, 18.5)
    b.range("data_load", 10.0, 11.0)
    b.range("forward", 11.0, 13.0)
    b.range("backward", 13.0, 16.0)
    b.range("optimizer_step", 16.0, 18.0)
    b.range("capture_drain", 18.5, 19.9)
    b.range("gpu_decode", 3.0, 3.7, tid=STAGE, domain=1)
    b.memcpy(2.6, 2.9, launch_ms=2.5)
    b.memcpy(10.6, 10.7, launch_ms=10.5)
    b.kernel(3.2, 4.0, launch_ms=3.1)
    b.kernel(11.2, 12.0, launch_ms=11.1)
    b.kernel(5.6, 7.0, launch_ms=5.5, tid=AUTOGRAD)
    b.memset(7.0, 7.1, launch_ms=6.0, tid=AUTOGRAD)
    b.kernel(7.1, 7.2, launch_ms=5.3)
    b.kernel(13.5, 15.5, launch_ms=13.4, tid=AUTOGRAD)
    b.kernel(8.2, 9.0, launch_ms=8.1)
    b.kernel(16.2, 17.0, launch_ms=16.1)
    b.kernel(9.8, 9.9, launch_ms=9.7)
    b.kernel(19.5, 20.5, launch_ms=18.7)
    b.kernel(0.5, 1.5, launch_ms=0.2)
    b.kernel(3.3, 3.6, launch_ms=3.2, tid=STAGE, stream=9)
    b.memcpy(12.0, 12.5, launch_ms=11.9, tid=STAGE)
    b.memset(4.5, 4.6)
    b.kernel(21.0, 22.0, launch_ms=19.0)
    return b


# simulated_run(): each step's phases: (name, host ms, launching thread, launch times in ms from the
# phase's start, device ms of each launch). data_load's are two H2D copies in h2d_submit [0.3, 1.0].
SIM_PHASES = (
    ("data_load", 1.0, MAIN, (0.35, 0.6), 0.1),
    ("forward", 3.0, MAIN, tuple(0.05 + 0.25 * i for i in range(12)), 0.3),
    ("zero_grad", 0.2, MAIN, (), 0.0),
    ("backward", 3.8, AUTOGRAD, tuple(0.05 + 0.25 * i for i in range(15)), 0.3),
    ("optimizer_step", 0.8, MAIN, (0.05, 0.3, 0.55), 0.2),
)
SIM_LATENCY_MS = 0.01  # a launch reaches an idle device this much later


def simulated_run(steps=4, stalls=None, decode_stage=False):
    """A capture of `steps` training steps whose device work queues behind the host as on a real
    stream: every activity starts at max(its launch + SIM_LATENCY_MS, the end of the one before), so
    the device lags the host by the work still queued. stalls: {(phase, step): ms}, a host sleep of
    that length at the start of that phase (or of batch_wait or h2d_submit, nested in data_load) of
    that captured step (the range, those around it and the window last that much longer, everything
    after starts that much later), as train_resnet50 --inject-stall does. Returns the builder.

    Step 0 starts 0.2 ms into the window, each next one 0.2 ms after the previous ends; a step
    (SIM_PHASES) is data_load 1 ms (batch_wait [0, 0.3], h2d_submit [0.3, 1.0] with two 0.1 ms H2D
    copies launched 0.35 and 0.6 ms in), forward 3 ms (12 kernels of 0.3 ms from MAIN, one every
    0.25 ms from 0.05 ms in: the device falls behind), zero_grad 0.2 ms (nothing), backward 3.8 ms
    (15 such kernels from AUTOGRAD), optimizer_step 0.8 ms (3 kernels of 0.2 ms from MAIN). The host
    needs 9.0 ms a step, the device 8.9: without stalls the device catches up in each data_load, and
    the host gaps there, like the window's first (0.56 ms), stay below 1 ms. Known answers: a stall
    of S ms at the start of backward leaves the device idle S - 0.4 ms (it first drains the 0.41 ms
    of forward still queued) while the step's threads make no runtime call for S + 0.449 ms (from
    forward's last launch call, 2.801 ms into it, through zero_grad to backward's first launch,
    0.05 ms in). decode_stage: a GPU decode stage thread (data_pipeline ranges) launches a 0.2 ms
    kernel every 2 ms on its own stream throughout: it neither ends nor splits the step's gaps."""
    b = ExportBuilder()
    stalls = stalls or {}
    t = 0.2
    device_free = 0.0
    if decode_stage:
        b.domain(1, "data_pipeline", tid=STAGE)
    for k in range(steps):
        step_start = t
        for name, host_ms, tid, offsets, dev_ms in SIM_PHASES:
            phase_start = t
            t += stalls.get((name, k), 0.0)
            if name == "data_load":
                # Stalls may sit in its nested ranges too, at their start.
                wait, submit = stalls.get(("batch_wait", k), 0.0), stalls.get(
                    ("h2d_submit", k), 0.0
                )
                b.range("batch_wait", t, t + wait + 0.3)
                b.range("h2d_submit", t + wait + 0.3, t + wait + submit + 1.0)
                t += wait + submit
            for off in offsets:
                start = max(t + off + SIM_LATENCY_MS, device_free)
                device_free = start + dev_ms
                if name == "data_load":
                    b.memcpy(start, device_free, launch_ms=t + off, tid=tid)
                else:
                    b.kernel(start, device_free, launch_ms=t + off, tid=tid)
            t += host_ms
            b.range(name, phase_start, t)
        b.range("torch_step", step_start, t)
        t += 0.2
    end = max(t, device_free) + 1.0
    b.range("capture_drain", t, end - 0.5)
    b.range("capture_window", 0.0, end)
    if decode_stage:
        at = 0.3
        while at < end - 1:
            b.range("gpu_decode", at, at + 0.3, tid=STAGE, domain=1)
            b.kernel(
                at + 0.05,
                at + 0.25,
                "void decode_stage_kernel()",
                launch_ms=at,
                tid=STAGE,
                stream=11,
            )
            at += 2.0
    return b


# epoch_export(): where its training steps start (ms), the evaluation's eval_step ranges
# (start, ms).
EPOCH_STEP_STARTS = (1.0, 5.0, 29.5, 33.5)
EPOCH_EVAL_STEPS = ((10.0, 2.5), (12.5, 3.0), (15.5, 4.0))


def _epoch_input(b, t):
    """batch_wait [t, t+0.5] and h2d_submit [t+0.5, t+1] with its two H2D copies, launched at t+0.6
    and t+0.7 and run [t+0.8, t+0.9] and [t+0.9, t+1.0], on MAIN."""
    b.range("batch_wait", t, t + 0.5)
    b.range("h2d_submit", t + 0.5, t + 1.0)
    b.memcpy(t + 0.8, t + 0.9, launch_ms=t + 0.6)
    b.memcpy(t + 0.9, t + 1.0, launch_ms=t + 0.7)


def epoch_export(boundary=True):
    """A capture window across an epoch's end (train_resnet50 --epochs E --capture-at N): two
    training steps, the evaluation pass and the checkpoint, two more steps. Window [0, 40] ms,
    everything on MAIN but backward's kernels (AUTOGRAD).

      torch_step     4 ms each, at s = 1, 5, 29.5, 33.5 (EPOCH_STEP_STARTS): data_load [s, s+1]
                     (_epoch_input()'s batch_wait, h2d_submit and 2 H2D copies), forward [s+1, s+2]
                     (kernel launched s+1.05, run [s+1.1, s+1.9]), zero_grad [s+2, s+2.1], backward
                     [s+2.1, s+3.5] (kernel AUTOGRAD s+2.15, [s+2.2, s+3.4]), optimizer_step
                     [s+3.5, s+4] (kernel s+3.55, [s+3.6, s+3.9]); device 2.5 ms a step
      eval           [9.5, 21.5], 12 ms: eval_step [e, e+d] for (e, d) in EPOCH_EVAL_STEPS
                     (2.5, 3, 4 ms: median 3), each batch_wait, h2d_submit with 2 H2D copies as a
                     step's, forward [e+1, e+d] with a kernel launched e+1.05, run [e+1.1, e+d-0.1];
                     eval_reduce [19.5, 21] (1.5 ms): a kernel [19.6, 19.65] launched 19.55, a D2H
                     copy [19.8, 19.85] launched 19.75, a cudaStreamSynchronize [19.76, 19.86].
                     Device busy 6.6 ms: 55 %
      checkpoint     [21.5, 29.5], 8 ms: two D2H copies [21.7, 22.2] and [22.3, 22.8] launched 21.6
                     and 22.25, then the file written with no device work: busy 1 ms (12.5 %), idle
                     7 ms
      capture_drain  [37.5, 39.5], a cudaDeviceSynchronize [37.6, 39.4] in it
      PROFILER_OVERHEAD  one CUPTI Buffer flush on MAIN [25, 25.5], inside checkpoint

    Known answers: 4 steps (median 4 ms), 8 training H2D copies (the evaluation's 6 not among them);
    eval 3x, checkpoint 2x the median step. Host gaps by the range they began in: forward 8 (1.6 ms:
    0.1 + 0.3 a step), backward 4 (0.8), optimizer_step 3 (3.7: 0.9, the 1.9 before eval, 0.9),
    eval 8 (4.3, 1.85 of it from eval_reduce to the checkpoint's first copy), checkpoint 2 (7.6: 0.1
    between its copies, 7.5 to step 2's first copy), (no range) 1 (1.8, the window's first). GPU
    time: data_load 0.8, forward 3.2, backward 4.8, optimizer_step 1.2, eval 6.6, checkpoint 1.0 ms.
    boundary False: the same capture without the eval, eval_step, eval_reduce and checkpoint ranges
    (their nested ranges and device work stay), as the analysis would see it if it ignored those
    names."""
    b = ExportBuilder()
    b.range("capture_window", 0.0, 40.0)
    for s in EPOCH_STEP_STARTS:
        b.range("torch_step", s, s + 4.0)
        b.range("data_load", s, s + 1.0)
        _epoch_input(b, s)
        b.range("forward", s + 1.0, s + 2.0)
        b.kernel(
            s + 1.1,
            s + 1.9,
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>()",
            launch_ms=s + 1.05,
        )
        b.range("zero_grad", s + 2.0, s + 2.1)
        b.range("backward", s + 2.1, s + 3.5)
        b.kernel(
            s + 2.2,
            s + 3.4,
            "void cudnn::bn_bw_1C11_kernel_new<float>()",
            launch_ms=s + 2.15,
            tid=AUTOGRAD,
        )
        b.range("optimizer_step", s + 3.5, s + 4.0)
        b.kernel(
            s + 3.6,
            s + 3.9,
            "void at::native::multi_tensor_apply_kernel<sgd>()",
            launch_ms=s + 3.55,
        )
    if boundary:
        b.range("eval", 9.5, 21.5)
        b.range("eval_reduce", 19.5, 21.0)
        b.range("checkpoint", 21.5, 29.5)
    for e, d in EPOCH_EVAL_STEPS:
        if boundary:
            b.range("eval_step", e, e + d)
        _epoch_input(b, e)
        b.range("forward", e + 1.0, e + d)
        b.kernel(
            e + 1.1,
            e + d - 0.1,
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>()",
            launch_ms=e + 1.05,
        )
    b.kernel(19.6, 19.65, "void at::native::reduce_kernel<512, 1>()", launch_ms=19.55)
    b.memcpy(19.8, 19.85, kind=2, nbytes=8, launch_ms=19.75)
    b.api("cudaStreamSynchronize_v3020", 19.76, 19.86)
    b.memcpy(21.7, 22.2, kind=2, nbytes=50_000_000, launch_ms=21.6)
    b.memcpy(22.3, 22.8, kind=2, nbytes=50_000_000, launch_ms=22.25)
    b.range("capture_drain", 37.5, 39.5)
    b.api("cudaDeviceSynchronize_v3020", 37.6, 39.4)
    b.overhead("CUPTI Buffer flush", 25.0, 25.5, MAIN)
    return b


def epoch_report(eval_ms=12.4, checkpoint_ms=8.3):
    """A train_resnet50 --epochs 2 run report for epoch_export(): its 4 captured steps
    (epochs 0, 0, 1, 1; run-wide steps 10-13), batch size 8, and training.epochs with epoch 0's
    evaluation (96 images in 3 steps, top-1 0.25, eval_ms) and checkpoint (100 MB, checkpoint_ms);
    epoch 1 neither."""
    steps = [
        {
            "index": i,
            "step": 10 + i,
            "epoch": 0 if i < 2 else 1,
            "batch_in_epoch": i % 2 + 4,
            "batch_wait_ms": 0.5,
            "h2d_submit_ms": 0.5,
            "step_ms": 4.0,
            "phase_ms": {
                "data_load": 1.0,
                "batch_wait": 0.5,
                "h2d_submit": 0.5,
                "forward": 1.0,
                "zero_grad": 0.1,
                "backward": 1.4,
                "optimizer_step": 0.5,
            },
        }
        for i in range(4)
    ]
    return {
        "program": "train_resnet50",
        "config": {"steps": 4, "batch_size": 8, "epochs": 2},
        "capture": {
            "warmup_steps": 2,
            "steps": 4,
            "batch_size": 8,
            "elapsed_s": 0.04,
            "images_per_s": 800.0,
        },
        "steps": steps,
        "steps_after_capture": [dict(steps[-1], index=4, step=14, batch_in_epoch=2)],
        "training": {
            "epochs_planned": 2,
            "epochs": [
                {
                    "epoch": 0,
                    "steps": 6,
                    "eval": {
                        "images": 96,
                        "top1": 0.25,
                        "top5": 0.5,
                        "loss": 3.2,
                        "ms": eval_ms,
                        "steps": 3,
                    },
                    "checkpoint": {
                        "path": "ckpt/epoch0.pt",
                        "bytes": 100_000_000,
                        "ms": checkpoint_ms,
                    },
                },
                {"epoch": 1, "steps": 6, "eval": None, "checkpoint": None},
            ],
        },
        "interrupted": False,
    }


def first_phase(ex, name, step):
    """The range `name` of captured step `step` of an export."""
    st = find_window(ex.ranges).steps[step]
    return next(r for r in ex.ranges if r.name == name and st.contains(r))


def inject_stall(path, at_ns, stall_ns, latency_ns=1000):
    """Rewrite a real export (in place) as if the host had slept stall_ns from at_ns, as
    train_resnet50 --inject-stall would: every NVTX range and runtime call starting at or after
    at_ns starts stall_ns later (one enclosing at_ns ends that much later). On each stream, in
    order, a device activity those calls launched moves by the least delay that starts it no earlier
    than its new launch + latency_ns and no less than the activity before it moved (keeping the
    spacing of queued work); the work launched before at_ns keeps its times, so the device drains
    its queue before it idles. Cross-stream waits are ignored. Returns the largest delay of a device
    activity, ns."""
    conn = sqlite3.connect(path)
    launched = dict(
        conn.execute(
            "SELECT correlationId, start FROM CUPTI_ACTIVITY_KIND_RUNTIME "
            "WHERE start >= ? AND correlationId IS NOT NULL",
            (at_ns,),
        )
    )
    streams = {}
    for table in (
        "CUPTI_ACTIVITY_KIND_KERNEL",
        "CUPTI_ACTIVITY_KIND_MEMCPY",
        "CUPTI_ACTIVITY_KIND_MEMSET",
    ):
        for rowid, start, end, stream, corr in conn.execute(
            'SELECT rowid, start, "end", streamId, correlationId FROM "%s"' % table
        ):
            streams.setdefault(stream, []).append((start, end, corr, table, rowid))
    moves, largest = [], 0
    for acts in streams.values():
        delay = 0  # never shrinks along a stream: what follows a moved activity moves with it
        for start, _, corr, table, rowid in sorted(acts):
            if corr in launched:
                delay = max(delay, launched[corr] + stall_ns + latency_ns - start)
            if delay:
                moves.append((table, delay, rowid))
                largest = max(largest, delay)
    for table, delay, rowid in moves:
        conn.execute(
            'UPDATE "%s" SET start = start + ?, "end" = "end" + ? WHERE rowid = ?' % table,
            (delay, delay, rowid),
        )
    for table in ("NVTX_EVENTS", "CUPTI_ACTIVITY_KIND_RUNTIME"):
        conn.execute('UPDATE "%s" SET "end" = "end" + ? WHERE "end" > ?' % table, (stall_ns, at_ns))
        conn.execute(
            'UPDATE "%s" SET start = start + ? WHERE start >= ?' % table, (stall_ns, at_ns)
        )
    conn.commit()
    conn.close()
    return largest


def tracer_cost_export(steps=3):
    """A --decode gpu capture whose threads are named and whose profiler overhead is recorded, for
    cost.capture_cost(). Window [0, 10 x steps] ms; step k starts at s = 10 k + 1 and lasts 9 ms:
    data_load [s, s+2] (batch_wait [s, s+1], h2d_submit [s+1, s+2]), forward [s+2, s+5], backward
    [s+5, s+8], optimizer_step [s+8, s+9], all on MAIN; between the steps [s+9, s+11].

    Threads (ThreadNames): MAIN train_resnet50, AUTOGRAD pt_autograd_0, STAGE loader/gpu, CUPTI
    "CUPTI worker thread"; LOADER has no name (reads as "tid 200").
    Runtime calls per step, inside the window:
      loader/gpu   inside its gpu_decode range [s, s+0.9] (data_pipeline domain, so its syncs block
                   only it): 5 cudaLaunchKernel at s+0.1 .. s+0.5 and 4 cudaEventSynchronize at
                   s+0.55 .. s+0.7, each 0.01 ms, with no device work of their own; 2
                   cudaMemcpyAsync (0.001 ms) at s+0.8 and s+0.85 launching the step's H2D copies
                   [s+1.2, s+1.4] and [s+1.5, s+1.7] -> 11 calls, 0.092 ms a step
      main         cudaLaunchKernel at s+2.05 (forward kernel [s+2.1, s+5.0]) and s+8.05 (optimizer
                   kernel [s+8.1, s+9.0]), 0.001 ms each -> 2 calls, 0.002 ms a step
      autograd     cudaLaunchKernel at s+5.05 (backward kernel [s+5.1, s+8.0]) -> 1 call
      tid 200      one cudaEventQuery at 15 ms in all -> 1/3 a step
    and outside the window, loader/gpu's cudaLaunchKernel at -2 ms and at 10 x steps + 1 ms (not
    counted). Device busy 7.1 ms a step: with 3 steps 21.3 of the 30 ms window, 8.7 ms (29 %)
    without activity; the host-caused gaps that began in backward are [s+5.0, s+5.1] (3 x 0.1 ms),
    in h2d_submit [s+1.7, s+2.1] (3 x 0.4 ms).
    PROFILER_OVERHEAD (3 steps):
      TLS allocation        loader/gpu [9.5, 11.5]: optimizer_step 0.5, between steps 1.0,
                            data_load 0.5
      CUPTI Buffer flush    CUPTI [12.0, 12.5]: data_load 0.5
      Unknown               CUPTI [15.0, 15.0] (zero length): forward, 0 ms
      CUPTI Buffer flush    MAIN [25.9, 26.3]: forward 0.1, backward 0.3
      TLS allocation        AUTOGRAD [-0.5, 0.5]: clipped to [0, 0.5], between steps 0.5
      CUDA profiling data flush on cudaProfilerStop   MAIN [30.5, 40.5]: outside the window, 10 ms
    -> inside the window 5 rows, 3.4 ms: by name TLS allocation 2 rows 2.5 ms, CUPTI Buffer flush 2
    rows 0.9 ms, Unknown 1 row 0 ms; by phase (a row counted for its largest share) between steps
    1.5 ms (2 rows), data_load 1.0 (1), optimizer_step 0.5 (0), backward 0.3 (1), forward 0.1 (1).
    tracer_cost_report() gives the matching run reports."""
    b = ExportBuilder()
    for tid, name in (
        (MAIN, "train_resnet50"),
        (AUTOGRAD, "pt_autograd_0"),
        (STAGE, "loader/gpu"),
        (CUPTI, "CUPTI worker thread"),
    ):
        b.thread_name(tid, name)
    b.domain(1, "data_pipeline", tid=STAGE)
    end = 10.0 * steps
    b.range("capture_window", 0.0, end)
    for k in range(steps):
        s = 10.0 * k + 1
        b.range("torch_step", s, s + 9)
        b.range("data_load", s, s + 2)
        b.range("batch_wait", s, s + 1)
        b.range("h2d_submit", s + 1, s + 2)
        b.range("forward", s + 2, s + 5)
        b.range("backward", s + 5, s + 8)
        b.range("optimizer_step", s + 8, s + 9)
        b.range("gpu_decode", s, s + 0.9, tid=STAGE, domain=1)
        for i in range(5):
            b.api("cudaLaunchKernel_v7000", s + 0.1 + 0.1 * i, s + 0.11 + 0.1 * i, tid=STAGE)
        for i in range(4):
            b.api("cudaEventSynchronize_v3020", s + 0.55 + 0.05 * i, s + 0.56 + 0.05 * i, tid=STAGE)
        b.memcpy(s + 1.2, s + 1.4, launch_ms=s + 0.8, tid=STAGE)
        b.memcpy(s + 1.5, s + 1.7, launch_ms=s + 0.85, tid=STAGE)
        b.kernel(s + 2.1, s + 5.0, launch_ms=s + 2.05)
        b.kernel(
            s + 5.1,
            s + 8.0,
            "void cudnn::bn_bw_1C11_kernel_new<float>()",
            launch_ms=s + 5.05,
            tid=AUTOGRAD,
        )
        b.kernel(
            s + 8.1,
            s + 9.0,
            "void at::native::multi_tensor_apply_kernel<sgd>()",
            launch_ms=s + 8.05,
        )
    b.api("cudaEventQuery_v3020", 15.0, 15.01, tid=LOADER)
    b.api("cudaLaunchKernel_v7000", -2.0, -1.99, tid=STAGE)
    b.api("cudaLaunchKernel_v7000", end + 1, end + 1.01, tid=STAGE)
    b.overhead("TLS allocation", 9.5, 11.5, STAGE)
    b.overhead("CUPTI Buffer flush", 12.0, 12.5, CUPTI)
    b.overhead("Unknown", 15.0, 15.0, CUPTI)
    b.overhead("CUPTI Buffer flush", 25.9, 26.3, MAIN)
    b.overhead("TLS allocation", -0.5, 0.5, AUTOGRAD)
    b.overhead("CUDA profiling data flush on cudaProfilerStop", end + 0.5, end + 10.5, MAIN)
    return b


def tracer_cost_report(
    images_per_s,
    step_ms=9.0,
    forward_ms=3.0,
    backward_ms=3.0,
    optimizer_ms=1.0,
    steps=3,
    phase_ms=True,
):
    """A train_resnet50 run report for tracer_cost_export() (batch size 4): every captured step with
    those host times (data_load 2, batch_wait 1, h2d_submit 1 ms); phase_ms False: without the
    per-step phase_ms objects, as binaries before them wrote. The traced run:
    tracer_cost_report(400.0) (3 x 4 images in the 30 ms window); untraced runs of it: e.g.
    tracer_cost_report(480.0, 8.0, 2.4, 2.95) and tracer_cost_report(520.0, 8.2, 2.6, 2.95)."""
    step = {"batch_wait_ms": 1.0, "h2d_submit_ms": 1.0, "step_ms": step_ms}
    if phase_ms:
        step["phase_ms"] = {
            "data_load": 2.0,
            "batch_wait": 1.0,
            "h2d_submit": 1.0,
            "forward": forward_ms,
            "backward": backward_ms,
            "optimizer_step": optimizer_ms,
        }
    return {
        "config": {"steps": steps, "batch_size": 4, "decode": "gpu"},
        "capture": {
            "warmup_steps": 1,
            "steps": steps,
            "batch_size": 4,
            "elapsed_s": steps * 4 / images_per_s,
            "images_per_s": images_per_s,
        },
        "steps": [dict(step, index=i) for i in range(steps)],
        "interrupted": False,
    }


NCCL_KERNEL = "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
COMPUTE_STREAM, NCCL_STREAM = 7, 20
RANK_STEP_PITCH_MS = 20.0  # rank_export(): step k starts at 1 + 20 k ms after the window start
RANK_WINDOW_MS = 60.0  # and the window holds 3 steps


def rank_clock_ms(rank):
    """Where rank_export() puts rank's capture window on its own clock: 100 ms apart, so that any
    comparison of absolute times across ranks would call the later rank late in every step."""
    return 10.0 + 100.0 * rank


def rank_export(rank, steps=3, late_rank=1, late_step=2, late_ms=5.0, graph=False, node_trace=True):
    """One rank of a data-parallel run, as train_resnet50 under torchrun records it: the
    default-domain step tree on MAIN, `ddp` ranges (domain 3) on MAIN, compute kernels on stream 7,
    NCCL all-reduce kernels on stream 20 launched from AUTOGRAD during backward (with NCCL's own
    `NCCL` domain range, domain 2), one NCCL kernel before the window (the capture barrier's).

    Times below are ms from the window start [0, 60] on this rank's clock (rank_clock_ms()). Step k
    starts at s = 1 + 20 k and lasts 12 ms. On late_rank in late_step, everything after the batch
    arrives is late_ms later (d); on the other ranks in that step the all-reduce waits for it (w):
      data_load [s, s+2+d] (batch_wait [s, s+1+d], h2d_submit [s+1+d, s+2+d], two H2D copies in it),
      forward [s+2+d, s+5+d] (kernel [s+2.1+d, s+5+d]), zero_grad, backward [s+5.5+d, s+10+d]
      (kernel [s+5.6+d, s+9+d]; NCCL kernel [s+7+d, s+10+d+w], alone from s+9+d),
      optimizer_step [s+10+d, s+11+d] (kernel after the NCCL one: [s+10+d+w, s+11+d+w]).
    Known answers with the defaults (3 steps, rank 1 late by 5 ms in step 2):
      data_load end - step start    rank 0: 2, 2, 2      rank 1: 2, 2, 7    -> step 2's straggler: 1
      NCCL ms per step (1 kernel)   rank 0: 3, 3, 8      rank 1: 3, 3, 3    -> rank 0 waited 5 ms
      exposed communication         rank 0: 1+1+6 = 8 ms (13.333333 %)   rank 1: 3 x 1 = 3 ms (5 %)
      outside the steps             1 NCCL kernel of 0.3 ms (before the window)
    Every capture check passes (2 H2D copies a step, no sync inside a step, one capture_window).

    graph True: the same run with --cuda-graph, the same device work at the same times replayed from
    one graph per step: after data_load the step has graph_replay [s+2+d, s+2.2+d], whose one
    cudaGraphLaunch at s+2.05+d launched every kernel of the step (nsys --cuda-graph-trace=node
    gives them the launch's correlation id), and NCCL's NVTX ranges are not replayed; the capture
    barrier's all-reduce stays an eager launch. Same known answers. node_trace False: each replay
    recorded whole, as nsys's default --cuda-graph-trace=graph does (no kernel of a replay in the
    export).
    """
    b = ExportBuilder()
    if not graph:
        b.domain(2, "NCCL", tid=AUTOGRAD)
    b.domain(3, "ddp", tid=MAIN)
    t0 = rank_clock_ms(rank)

    def at(ms_):
        return t0 + ms_

    b.range("capture_barrier", at(-1.0), at(-0.2), domain=3)
    b.kernel(
        at(-0.4),
        at(-0.1),
        NCCL_KERNEL,
        launch_ms=at(-0.6),
        stream=NCCL_STREAM,
        call="cuLaunchKernelEx",
    )
    b.range("capture_window", at(0.0), at(RANK_WINDOW_MS))
    end = 0.0
    for k in range(steps):
        s = 1.0 + RANK_STEP_PITCH_MS * k
        d = late_ms if (rank == late_rank and k == late_step) else 0.0
        w = late_ms if (rank != late_rank and k == late_step) else 0.0
        b.range("torch_step", at(s), at(s + 12 + d))
        b.range("data_load", at(s), at(s + 2 + d))
        b.range("batch_wait", at(s), at(s + 1 + d))
        b.range("h2d_submit", at(s + 1 + d), at(s + 2 + d))
        b.memcpy(at(s + 1.2 + d), at(s + 1.4 + d), launch_ms=at(s + 1.1 + d))
        b.memcpy(at(s + 1.5 + d), at(s + 1.7 + d), launch_ms=at(s + 1.45 + d))
        if graph:
            b.range("graph_replay", at(s + 2 + d), at(s + 2.2 + d))
            b.graph_launch(
                at(s + 2.05 + d),
                [
                    (
                        at(s + 2.1 + d),
                        at(s + 5 + d),
                        "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>()",
                        COMPUTE_STREAM,
                    ),
                    (
                        at(s + 5.6 + d),
                        at(s + 9 + d),
                        "void cudnn::bn_bw_1C11_kernel_new<float>()",
                        COMPUTE_STREAM,
                    ),
                    (at(s + 7 + d), at(s + 10 + d + w), NCCL_KERNEL, NCCL_STREAM),
                    (
                        at(s + 10 + d + w),
                        at(s + 11 + d + w),
                        "void at::native::multi_tensor_apply_kernel<sgd>()",
                        COMPUTE_STREAM,
                    ),
                ],
                stream=COMPUTE_STREAM,
                node_trace=node_trace,
            )
            b.range("stop_agreement", at(s + 11.5 + d), at(s + 11.6 + d), domain=3)
            end = s + 12 + d
            continue
        b.range("forward", at(s + 2 + d), at(s + 5 + d), registered=True)
        b.range("broadcast_buffers", at(s + 2 + d), at(s + 2.05 + d), domain=3)
        b.kernel(
            at(s + 2.1 + d),
            at(s + 5 + d),
            "void cutlass::Kernel<cutlass_80_tensorop_s1688gemm>()",
            launch_ms=at(s + 2.05 + d),
            stream=COMPUTE_STREAM,
        )
        b.range("zero_grad", at(s + 5 + d), at(s + 5.5 + d), registered=True)
        b.range("backward", at(s + 5.5 + d), at(s + 10 + d), registered=True)
        b.kernel(
            at(s + 5.6 + d),
            at(s + 9 + d),
            "void cudnn::bn_bw_1C11_kernel_new<float>()",
            launch_ms=at(s + 5.5 + d),
            stream=COMPUTE_STREAM,
        )
        b.range("ncclAllReduce", at(s + 7 + d), at(s + 7.05 + d), tid=AUTOGRAD, domain=2)
        b.kernel(
            at(s + 7 + d),
            at(s + 10 + d + w),
            NCCL_KERNEL,
            launch_ms=at(s + 6.95 + d),
            tid=AUTOGRAD,
            stream=NCCL_STREAM,
            call="cuLaunchKernelEx",
        )
        b.range("optimizer_step", at(s + 10 + d), at(s + 11 + d), registered=True)
        b.kernel(
            at(s + 10 + d + w),
            at(s + 11 + d + w),
            "void at::native::multi_tensor_apply_kernel<sgd>()",
            launch_ms=at(s + 10.05 + d),
            stream=COMPUTE_STREAM,
        )
        b.range("stop_agreement", at(s + 11.5 + d), at(s + 11.6 + d), domain=3)
        end = s + 12 + d
    b.range("capture_drain", at(end), at(RANK_WINDOW_MS - 1))
    b.api("cudaDeviceSynchronize_v3020", at(end + 0.1), at(RANK_WINDOW_MS - 1.1))
    return b


def rank_report(rank, steps=3, world_size=2):
    """A train_resnet50 run report of one rank with its dist section (the fields analysis reads)."""
    return {
        "capture": {"steps": steps, "images_per_s": 1000.0 + rank, "elapsed_s": 0.06},
        "dist": {
            "backend": "nccl",
            "world_size": world_size,
            "rank": rank,
            "local_rank": rank,
            "bucket_mb": 25,
            "broadcast_buffers": True,
            "nccl_version": "2.28.9",
            "nccl_nvls_enable": "0",
            "parameter_digest": "0123456789abcdef",
            "stop_agreed_by": None,
        },
        "interrupted": False,
    }


class TempDirCase(ScratchCase):
    """A temporary directory per test (testutil.ScratchCase), for exports built there."""

    tmp_prefix = "analyze_test_"

    def build(self, builder, name="export.sqlite"):
        return builder.write(os.path.join(self.tmp, name))

    def summarize(self, builder, report=None, expected_steps=None, name="export.sqlite", **kw):
        """compute_summary() of the builder's export; kw: its other arguments (untraced,
        max_slowdown)."""
        return compute_summary(load_export(self.build(builder, name)), report, expected_steps, **kw)


class RealFixtureCase(unittest.TestCase):
    """The Python reference captured by nsys 2025.3 on an H200 (tests/fixtures/nsys/README.md),
    decompressed once per class into tmp with the nsys stats CSVs beside it: export (path), ex (the
    Export) and s (its summary, 8 steps expected)."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="analyze_fixture_")
        cls.export = os.path.join(cls.tmp, "py_reuse8.sqlite")
        with lzma.open(os.path.join(FIXTURE_DIR, "py_reuse8.sqlite.xz")) as src, open(
            cls.export, "wb"
        ) as dst:
            shutil.copyfileobj(src, dst)
        for name in os.listdir(FIXTURE_DIR):
            if name.endswith(".csv"):
                shutil.copy(os.path.join(FIXTURE_DIR, name), cls.tmp)
        cls.ex = load_export(cls.export)
        cls.s = compute_summary(cls.ex, expected_steps=8)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)


class RealRanksFixtureCase(unittest.TestCase):
    """A real data-parallel capture (RANKS_FIXTURE), its exports decompressed once per class into
    tmp with the CSVs and run reports beside them: exports and reports (paths in rank order; a
    report None where the fixture has none). Every test of the class is skipped while
    tests/fixtures/nsys/ has no such exports."""

    @classmethod
    def setUpClass(cls):
        found = {}
        for path in glob.glob(os.path.join(FIXTURE_DIR, RANKS_FIXTURE + ".rank*.sqlite.xz")):
            m = re.search(r"\.rank(\d+)\.sqlite\.xz$", path)
            if m:
                found[int(m.group(1))] = path
        if not found:
            raise unittest.SkipTest(
                "no %s.rank<r>.sqlite.xz in %s yet" % (RANKS_FIXTURE, FIXTURE_DIR)
            )
        cls.tmp = tempfile.mkdtemp(prefix="analyze_ranks_fixture_")
        cls.exports, cls.reports = [], []
        for rank in sorted(found):
            base = "%s.rank%d" % (RANKS_FIXTURE, rank)
            export = os.path.join(cls.tmp, base + ".sqlite")
            with lzma.open(found[rank]) as src, open(export, "wb") as dst:
                shutil.copyfileobj(src, dst)
            cls.exports.append(export)
            report = os.path.join(FIXTURE_DIR, base + ".json")
            cls.reports.append(shutil.copy(report, cls.tmp) if os.path.isfile(report) else None)
            for csv_path in glob.glob(os.path.join(FIXTURE_DIR, base + "_*.csv")):
                shutil.copy(csv_path, cls.tmp)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, True)


def write_json(path, doc):
    """Writes doc as JSON to path; returns path."""
    with open(path, "w") as f:
        json.dump(doc, f)
    return path
