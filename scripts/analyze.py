#!/usr/bin/env python3
"""Read an Nsight Systems SQLite export of the ResNet-50 workload: tables, checks and the article's figures.

usage: analyze.py EXPORT.sqlite --out DIR [--report run.json] [--expected-steps M] [--check]
                  [--no-figures]

Writes into DIR:
  summary.json         numbers and checks (see compute_summary for every key)
  summary.md           phases, per-step input timing, top kernels, memory operations, CUDA API calls,
                       other NVTX domains, checks
  fig1_phases.png      total duration of each phase range, torch_step and capture_window excluded
  fig2_top_kernels.png the twelve largest kernel groups by demangled name, with launch counts
  fig3_timeline.png    host ranges above kernel / copy / memset lanes, first step to last device op
  fig5_batch_wait.png  time inside batch_wait per step
(Figure 4 compares configurations; scripts/sweep.py draws it with plot_sweep() from this module.)

The export may come from any nsys 2023+ release: tables and columns are looked up by name, optional
tables may be absent, enum ids are read from the ENUM_* tables when present. Range text comes from
NVTX_EVENTS.text or, for registered strings, NVTX_EVENTS.textId -> StringIds. The training loop's ranges
live in NVTX's default domain (domainId 0 or NULL); ranges of other domains (the C++ loader's
`data_pipeline`: load_batch, load_sample, reuse_fence) are listed separately and never counted as
steps or phases.

Exit status: 0 done; 2 unusable input (missing file, not SQLite, no NVTX_EVENTS, bad report);
3 with --check when any check is false or not evaluable.
"""

import argparse
import bisect
import json
import os
import re
import sqlite3
import sys
from collections import OrderedDict, defaultdict

# Range names the workload emits (an interface: lib/ and seed_workload.py use the same vocabulary).
STEP = "torch_step"
WINDOW = "capture_window"
ENCLOSING = (STEP, WINDOW)
# Nested input ranges and the range that contains them, for figure 1's hatching.
NESTED_IN = {"batch_wait": "data_load", "h2d_submit": "data_load"}

# CUDA runtime calls that block the calling host thread until device work completes. nsys names them
# with a version suffix (cudaDeviceSynchronize_v3020), stripped before comparing.
SYNC_CALLS = ("cudaDeviceSynchronize", "cudaStreamSynchronize", "cudaEventSynchronize")

# NCHW <-> NHWC layout conversions. Patterns are deliberately narrow, from real kernel names:
#  * cuDNN's legacy transposes are `cudnn::ops::nchwToNhwcKernel` / `nhwcToNchwKernel`; TensorRT and
#    other libraries spell them `nchw2nhwc`, `NCHWToNHWC`, `nhwc_to_nchw`: the first pattern matches an
#    explicit direction between the two layouts, any case, with `to`, `2` or `_` between them.
#  * a generic transpose/reformat/permute/convert kernel counts only when its name also names both
#    layouts (e.g. `transpose_nchw_nhwc`).
# Deliberately NOT matched: the channels_last Python reference (tests/fixtures/nsys/py_reuse8) runs
# `cudnn::engines_precompiled::convertTensor_kernel<float, float, float, 2>` 3x and
# `nhwcAddPaddingKernel` 2x per step, all inside the first convolution (3 input channels padded for
# the tensor-core engine), with no layout mismatch anywhere in the model; counting them would fail a
# run that is fully channels_last. The ATen copy kernel that a `.contiguous(channels_last)` would use
# (`direct_copy_kernel_cuda`) is an ordinary elementwise copy and cannot be told apart by name either.
LAYOUT_DIRECT = re.compile(r"nchw_?(?:to|2)_?nhwc|nhwc_?(?:to|2)_?nchw", re.IGNORECASE)
LAYOUT_GENERIC = re.compile(r"transpose|reformat|permute|convert", re.IGNORECASE)
_NCHW = re.compile(r"nchw", re.IGNORECASE)
_NHWC = re.compile(r"nhwc", re.IGNORECASE)

# Fallback enum ids (nsys 2023-2025) for exports that lack the ENUM_* tables.
_FALLBACK_EVENT_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
_FALLBACK_HTOD = 1
_CUDA_TABLES = ("CUPTI_ACTIVITY_KIND_RUNTIME", "CUPTI_ACTIVITY_KIND_KERNEL",
                "CUPTI_ACTIVITY_KIND_MEMCPY", "CUPTI_ACTIVITY_KIND_MEMSET")


class AnalysisError(Exception):
    """An input this script cannot use; main() prints it on one line and exits 2."""


# --------------------------------------------------------------------------------------------------
# Loading
# --------------------------------------------------------------------------------------------------

class Range:
    """One closed NVTX range; times in ns. domain is None for NVTX's default domain."""

    __slots__ = ("name", "start", "end", "tid", "domain")

    def __init__(self, name, start, end, tid=None, domain=None):
        self.name, self.start, self.end, self.tid, self.domain = name, start, end, tid, domain

    @property
    def duration(self):
        return self.end - self.start

    def contains(self, other):
        """True when other lies inside this range, on the same thread when both threads are known."""
        if self.tid is not None and other.tid is not None and self.tid != other.tid:
            return False
        return self.start <= other.start and other.end <= self.end

    def __repr__(self):
        return "Range(%r, %d, %d)" % (self.name, self.start, self.end)


class Export:
    """What analysis needs from one export, read once. Device lists are None when the export has no
    CUDA trace at all (device_data False); an absent table of a CUDA-traced export is an empty list."""

    def __init__(self):
        self.path = None
        self.nsys_version = None
        self.ranges = []              # default-domain ranges
        self.other_ranges = []        # ranges of named domains
        self.unterminated = 0
        self.device_data = False
        self.kernels = None           # (start, end, demangled, launch_ns, launch_tid)
        self.memcpys = None           # (start, end, kind_label, is_htod, bytes, launch_ns, launch_tid)
        self.memsets = None           # (start, end, bytes, launch_ns, launch_tid)
        self.api_calls = None         # (start, end, name, tid); None when no runtime table


def _tables(conn):
    return {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")}


def _columns(conn, table):
    return [r[1] for r in conn.execute('PRAGMA table_info("%s")' % table)]


def _select(conn, table, wanted, required=()):
    """SELECT the wanted columns by name; absent optional columns read as NULL."""
    have = set(_columns(conn, table))
    missing = [c for c in required if c not in have]
    if missing:
        raise AnalysisError("%s lacks column(s) %s" % (table, ", ".join(missing)))
    exprs = ['"%s"' % c if c in have else "NULL" for c in wanted]
    return conn.execute('SELECT %s FROM "%s"' % (", ".join(exprs), table))


def _enum_ids(conn, tables, table, names, fallback):
    """Map enum symbol names to ids from an ENUM_* table, else use the fallback ids."""
    if table in tables and {"id", "name"} <= set(_columns(conn, table)):
        found = {n: i for i, n in conn.execute('SELECT id, name FROM "%s"' % table)}
        return {n: found.get(n, fallback.get(n)) for n in names}
    return {n: fallback.get(n) for n in names}


def _strip_version(name):
    return re.sub(r"_v\d+$", "", name or "")


def _pid_of(global_tid):
    """nsys GlobalId: the low 24 bits are the thread id; the rest names the process."""
    return None if global_tid is None else global_tid >> 24


def open_export(path):
    """Open an export read-only, with one-line errors for a missing file or a non-SQLite file."""
    if not os.path.exists(path):
        raise AnalysisError("no such file: %s" % path)
    if not os.path.isfile(path):
        raise AnalysisError("not a file: %s" % path)
    with open(path, "rb") as f:
        head = f.read(16)
    if head != b"SQLite format 3\x00":
        hint = " (decompress it first)" if head[:6] == b"\xfd7zXZ\x00" else ""
        raise AnalysisError("not an SQLite database: %s%s" % (path, hint))
    try:
        conn = sqlite3.connect("file:%s?mode=ro" % os.path.abspath(path), uri=True)
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.DatabaseError as e:
        raise AnalysisError("cannot read %s as SQLite: %s" % (path, e))
    return conn


def load_export(path):
    """Read ranges and device activity from an nsys SQLite export into an Export."""
    conn = open_export(path)
    try:
        return _load(conn, path)
    except sqlite3.DatabaseError as e:
        raise AnalysisError("cannot read %s: %s" % (path, e))
    finally:
        conn.close()


def _load(conn, path):
    ex = Export()
    ex.path = path
    tables = _tables(conn)
    if "NVTX_EVENTS" not in tables:
        raise AnalysisError("%s has no NVTX_EVENTS table (captured without --trace=nvtx?)" % path)
    strings = {}
    if "StringIds" in tables:
        strings = dict(conn.execute("SELECT id, value FROM StringIds"))
    if "META_DATA_EXPORT" in tables:
        row = conn.execute("SELECT value FROM META_DATA_EXPORT WHERE name='EXPORT_PRODUCT_VERSION'")
        row = row.fetchone()
        ex.nsys_version = row[0] if row else None

    def text_of(value):
        if value is None:
            return None
        return strings.get(value, str(value)) if isinstance(value, int) else value

    # NVTX ranges: push/pop and start/end; domain names from the domain-create events.
    ids = _enum_ids(conn, tables, "ENUM_NSYS_EVENT_TYPE", _FALLBACK_EVENT_TYPES, _FALLBACK_EVENT_TYPES)
    range_types = {ids["NvtxPushPopRange"], ids["NvtxStartEndRange"]} - {None}
    rows = _select(conn, "NVTX_EVENTS",
                   ("start", "end", "eventType", "text", "textId", "domainId", "globalTid"),
                   required=("start", "eventType")).fetchall()
    domains = {}
    for start, end, etype, text, text_id, domain_id, tid in rows:
        if etype == ids["NvtxDomainCreate"] and domain_id:
            domains[domain_id] = text if text is not None else text_of(text_id)
    for start, end, etype, text, text_id, domain_id, tid in rows:
        if etype not in range_types:
            continue
        if end is None:
            ex.unterminated += 1
            continue
        name = text if text is not None else text_of(text_id)
        if domain_id in (None, 0):
            ex.ranges.append(Range(name, start, end, tid))
        else:
            ex.other_ranges.append(Range(name, start, end, tid, domains.get(domain_id, "domain %d" % domain_id)))
    ex.ranges.sort(key=lambda r: (r.start, -r.end))
    ex.other_ranges.sort(key=lambda r: (r.start, -r.end))

    ex.device_data = any(t in tables for t in _CUDA_TABLES)
    if not ex.device_data:
        return ex

    launches = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        ex.api_calls = []
        for start, end, name_id, corr, tid in _select(
                conn, "CUPTI_ACTIVITY_KIND_RUNTIME",
                ("start", "end", "nameId", "correlationId", "globalTid"), required=("start", "end")):
            ex.api_calls.append((start, end, _strip_version(text_of(name_id)), tid))
            if corr is not None:
                launches[(_pid_of(tid), corr)] = (start, tid)
                launches.setdefault((None, corr), (start, tid))

    def launch_of(corr, gpid):
        """(start, thread) of the runtime call that enqueued a device activity, else (None, None)."""
        if corr is None:
            return None, None
        return launches.get((_pid_of(gpid), corr)) or launches.get((None, corr)) or (None, None)

    ex.kernels = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        cols = set(_columns(conn, "CUPTI_ACTIVITY_KIND_KERNEL"))
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        for start, end, name, corr, gpid in _select(
                conn, "CUPTI_ACTIVITY_KIND_KERNEL",
                ("start", "end", name_col, "correlationId", "globalPid"), required=("start", "end")):
            launch = launch_of(corr, gpid)
            ex.kernels.append((start, end, text_of(name) or "?", launch[0], launch[1]))

    ex.memcpys = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        kinds = {}
        if "ENUM_CUDA_MEMCPY_OPER" in tables:
            kinds = {i: (n, l) for i, n, l in _select(conn, "ENUM_CUDA_MEMCPY_OPER", ("id", "name", "label"))}
        htod = next((i for i, (n, _) in kinds.items() if n == "CUDA_MEMCPY_KIND_HTOD"), None)
        if htod is None:
            htod = _FALLBACK_HTOD
        for start, end, kind, nbytes, corr, gpid in _select(
                conn, "CUPTI_ACTIVITY_KIND_MEMCPY",
                ("start", "end", "copyKind", "bytes", "correlationId", "globalPid"),
                required=("start", "end", "copyKind")):
            label = (kinds.get(kind, (None, None))[1]
                     or {htod: "Host-to-Device"}.get(kind, "kind %s" % kind))
            ex.memcpys.append((start, end, label, kind == htod, nbytes or 0) + launch_of(corr, gpid))

    ex.memsets = []
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        ex.memsets = [(st, e, b or 0) + launch_of(corr, gpid) for st, e, b, corr, gpid in _select(
            conn, "CUPTI_ACTIVITY_KIND_MEMSET", ("start", "end", "bytes", "correlationId", "globalPid"),
            required=("start", "end"))]
    return ex


def load_report(path):
    """Read a run report: train_resnet50's JSON document, or seed_workload.py's one JSON line (the last
    line of a log that parses as a JSON object)."""
    if not os.path.isfile(path):
        raise AnalysisError("no such report: %s" % path)
    with open(path, encoding="utf-8", errors="replace") as f:
        text = f.read()
    try:
        doc = json.loads(text)
        if isinstance(doc, dict):
            return doc
    except ValueError:
        pass
    for line in reversed(text.splitlines()):
        line = line.strip()
        if line.startswith("{") and line.endswith("}"):
            try:
                doc = json.loads(line)
            except ValueError:
                continue
            if isinstance(doc, dict):
                return doc
    raise AnalysisError("expected a JSON object in report %s, found none" % path)


def _num(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def report_metrics(report):
    """Normalise either report form to: format, images_per_s, steps, elapsed_s, interrupted, and the
    host-timed input numbers (per-step lists only in train_resnet50's form; ms)."""
    if report is None:
        return None
    if isinstance(report.get("capture"), dict) or isinstance(report.get("steps"), list):
        cap = report.get("capture") or {}
        steps = [s for s in report.get("steps") or [] if isinstance(s, dict)]
        waits = [_num(s.get("batch_wait_ms")) for s in steps]
        subs = [_num(s.get("h2d_submit_ms")) for s in steps]
        summ = report.get("summary") or {}
        out = {
            "format": "train_resnet50",
            "images_per_s": _num(cap.get("images_per_s")),
            "steps": _num(cap.get("steps")),
            "step_records": len(steps),
            "elapsed_s": _num(cap.get("elapsed_s")),
            "interrupted": bool(report.get("interrupted", False)),
            "batch_wait_ms": waits if steps and None not in waits else None,
            "h2d_submit_ms": subs if steps and None not in subs else None,
            "batch_wait_total_ms": _num(summ.get("batch_wait_total_ms")),
            "h2d_submit_total_ms": _num(summ.get("h2d_submit_total_ms")),
            "batch_wait_max_ms": _num(summ.get("batch_wait_max_ms")),
            "batch_wait_max_step": _num(summ.get("batch_wait_max_step")),
        }
        if out["batch_wait_ms"]:
            w = out["batch_wait_ms"]
            if out["batch_wait_total_ms"] is None:
                out["batch_wait_total_ms"] = sum(w)
            if out["batch_wait_max_ms"] is None:
                out["batch_wait_max_ms"] = max(w)
                out["batch_wait_max_step"] = w.index(max(w))
        if out["h2d_submit_ms"] and out["h2d_submit_total_ms"] is None:
            out["h2d_submit_total_ms"] = sum(out["h2d_submit_ms"])
        return out
    # seed_workload.py's line: totals in seconds, the longest wait in ms, no per-step list.
    wait_s, sub_s = _num(report.get("batch_wait_s")), _num(report.get("h2d_submit_s"))
    return {
        "format": "seed_workload",
        "images_per_s": _num(report.get("images_per_s")),
        "steps": _num(report.get("steps")),
        "step_records": None,
        "elapsed_s": None,
        "interrupted": False,
        "batch_wait_ms": None,
        "h2d_submit_ms": None,
        "batch_wait_total_ms": None if wait_s is None else wait_s * 1e3,
        "h2d_submit_total_ms": None if sub_s is None else sub_s * 1e3,
        "batch_wait_max_ms": _num(report.get("max_wait_ms")),
        "batch_wait_max_step": None,
    }


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
    import csv
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


# --------------------------------------------------------------------------------------------------
# Computing
# --------------------------------------------------------------------------------------------------

def ms(ns):
    """ns -> ms, rounded to the ns so that exact inputs give exact outputs."""
    return None if ns is None else round(ns / 1e6, 6)


def union_length(intervals, lo, hi):
    """Length covered by intervals clipped to [lo, hi]; overlaps count once."""
    clipped = sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi)
    total, cur_s, cur_e = 0, None, None
    for s, e in clipped:
        if e <= s:
            continue
        if cur_e is None or s > cur_e:
            if cur_e is not None:
                total += cur_e - cur_s
            cur_s, cur_e = s, e
        else:
            cur_e = max(cur_e, e)
    if cur_e is not None:
        total += cur_e - cur_s
    return total


def merged_gaps(intervals, lo, hi):
    """Gaps in [lo, hi] not covered by any interval, as (start, end) pairs."""
    gaps, cursor = [], lo
    for s, e in sorted((max(s, lo), min(e, hi)) for s, e in intervals if e > lo and s < hi):
        if s > cursor:
            gaps.append((cursor, s))
        cursor = max(cursor, e)
    if cursor < hi:
        gaps.append((cursor, hi))
    return gaps


# Upper bounds (microseconds) of the idle-gap histogram's buckets; the last bucket is open.
GAP_BUCKETS_US = (2, 10, 100, 1000)
GAP_CAUSES = ("host", "device", "unattributed", "tail")


GAP_BUCKET_LABELS = (["< %d us" % GAP_BUCKETS_US[0]]
                     + ["%d-%d us" % pair for pair in zip(GAP_BUCKETS_US, GAP_BUCKETS_US[1:])]
                     + [">= %d us" % GAP_BUCKETS_US[-1]])


def _gap_bucket(ns):
    """The histogram label of a gap of ns nanoseconds."""
    return GAP_BUCKET_LABELS[bisect.bisect_right(GAP_BUCKETS_US, ns / 1000.0)]


class _RangeIndex:
    """Innermost default-domain range containing a time, per thread, for push/pop ranges (which
    nest on their thread: the containing range that started last is the innermost)."""

    def __init__(self, ranges):
        ranges = [r for r in ranges if r.name != WINDOW]
        self.by_tid = defaultdict(list)
        for r in sorted(ranges, key=lambda r: (r.start, -r.end)):
            self.by_tid[r.tid].append(r)
        self.all = sorted(ranges, key=lambda r: (r.start, -r.end))
        self.starts = {tid: [r.start for r in rs] for tid, rs in self.by_tid.items()}
        self.all_starts = [r.start for r in self.all]

    @staticmethod
    def _find(ranges, starts, t):
        i = bisect.bisect_right(starts, t) - 1
        while i >= 0:
            if ranges[i].end >= t:
                return ranges[i].name
            i -= 1
        return None

    def innermost(self, tid, t):
        """On thread tid when it has a range there, else on any thread; None when none contains t."""
        if tid in self.by_tid:
            name = self._find(self.by_tid[tid], self.starts[tid], t)
            if name is not None:
                return name
        return self._find(self.all, self.all_starts, t)


def idle_gaps(ex, lo, hi, ranges, top_n=8):
    """Every interval of [lo, hi] with no kernel, copy or memset, and why the device was idle there.

    A gap ends when the next device activity starts. Its cause:
      host          that activity was enqueued (its runtime call started) at or after the gap began:
                    the device had nothing queued, so the host set the gap's length. host_range is the
                    innermost default-domain range containing the gap's start on the enqueuing thread
                    (on any thread when that one has none): batch_wait means the loader, h2d_submit the
                    copy submission, a compute phase the launch rate.
      device        that activity was enqueued before the gap began: the work was waiting on the device
                    (launch latency between queued operations, a wait on another stream's event).
      unattributed  no runtime call correlates with that activity.
      tail          no activity follows inside the window (the end of the capture).
    Gap totals add up to the window minus the busy time of no_activity_pct.
    """
    acts = ([(k[0], k[1], k[2], k[3], k[4]) for k in ex.kernels]
            + [(c[0], c[1], "[memcpy %s]" % c[2], c[5], c[6]) for c in ex.memcpys]
            + [(m[0], m[1], "[memset]", m[3], m[4]) for m in ex.memsets])
    acts = sorted((a for a in acts if a[1] > lo and a[0] < hi),
                  key=lambda a: (a[0], a[3] is None, a[3] or 0))
    index = _RangeIndex(ranges)
    gaps, cursor = [], lo
    for start, end, name, launch, tid in acts:
        if start > cursor:
            if launch is None:
                cause, where = "unattributed", None
            elif launch >= cursor:
                cause, where = "host", index.innermost(tid, cursor)
            else:
                cause, where = "device", None
            gaps.append((cursor, start, cause, name, where))
        cursor = max(cursor, min(end, hi))
    if cursor < hi:
        gaps.append((cursor, hi, "tail", None, None))

    causes = OrderedDict((c, {"count": 0, "total_ns": 0}) for c in GAP_CAUSES)
    buckets = OrderedDict((label, {"count": 0, "total_ns": 0}) for label in GAP_BUCKET_LABELS)
    host_ranges = defaultdict(lambda: {"count": 0, "total_ns": 0})
    for a, b, cause, _, where in gaps:
        for d in (causes[cause], buckets[_gap_bucket(b - a)]) + (
                (host_ranges[where or "(no range)"],) if cause == "host" else ()):
            d["count"] += 1
            d["total_ns"] += b - a

    def out(d):
        return OrderedDict(count=d["count"], total_ms=ms(d["total_ns"]))
    largest = sorted(gaps, key=lambda g: (g[0] - g[1], g[0]))[:top_n]
    return OrderedDict(
        count=len(gaps),
        total_ms=ms(sum(b - a for a, b, *_ in gaps)),
        causes=OrderedDict((c, out(d)) for c, d in causes.items()),
        histogram=[OrderedDict(bucket=k, **out(d)) for k, d in buckets.items()],
        host_by_range=OrderedDict((k, out(d)) for k, d in sorted(
            host_ranges.items(), key=lambda kv: (-kv[1]["total_ns"], kv[0]))),
        largest=[OrderedDict(at_ms=ms(a - lo), gap_ms=ms(b - a), cause=cause, host_range=where,
                             next=None if name is None else short_kernel_label(name) if not name.startswith("[")
                             else name)
                 for a, b, cause, name, where in largest])


def is_layout_conversion(name):
    """True for kernels whose demangled name marks an NCHW <-> NHWC conversion (see LAYOUT_DIRECT)."""
    if LAYOUT_DIRECT.search(name):
        return True
    return bool(LAYOUT_GENERIC.search(name) and _NCHW.search(name) and _NHWC.search(name))


class _StepIndex:
    """Finds the step whose host interval contains a time (steps sorted, non-overlapping)."""

    def __init__(self, steps):
        self.steps = steps
        self.starts = [s.start for s in steps]

    def find(self, t):
        i = bisect.bisect_right(self.starts, t) - 1
        if i >= 0 and t <= self.steps[i].end:
            return i
        return None


def _group_stats(items):
    """items: (key, duration_ns[, bytes]) -> OrderedDict key -> stats, largest total first."""
    groups = defaultdict(list)
    nbytes = defaultdict(int)
    for item in items:
        groups[item[0]].append(item[1])
        if len(item) > 2:
            nbytes[item[0]] += item[2]
    out = OrderedDict()
    for key, durs in sorted(groups.items(), key=lambda kv: (-sum(kv[1]), str(kv[0]))):
        out[key] = {"count": len(durs), "total_ns": sum(durs), "min_ns": min(durs), "max_ns": max(durs),
                    "bytes": nbytes.get(key, 0)}
    return out


def compute_summary(ex, report=None, expected_steps=None, top_n=12):
    """Everything summary.json holds, from an Export (and optionally a run report). Times in ms.

    Definitions:
      window           the single default-domain `capture_window` range; without one, the span of the
                       torch_step ranges (capture_boundary then false).
      steps            torch_step ranges lying wholly inside the window.
      h2d_copies       host-to-device memcpy records whose device start lies in [window start, end).
      no_activity_pct  share of the window covered by no kernel, memcpy or memset (intervals clipped
                       to the window, overlaps counted once).
      idle_gaps        those uncovered intervals, by cause (host: the device had nothing queued;
                       device: the next operation was already queued), size and host range: idle_gaps().
      batch_wait_ms, h2d_submit_ms, data_load_ms, step_ms
                       per step, the summed duration of those ranges nested in it (same thread);
                       null for a step without such a range.
      phase_totals_ms  per default-domain range name, the total duration of its ranges in the window.
      sync_calls_in_steps
                       SYNC_CALLS calls starting inside a torch_step's time span, on any thread, except
                       calls enclosed by a range of another NVTX domain on their thread (the loader's
                       data_pipeline fences block only the loader).
      layout_conversion_kernels
                       kernels matching is_layout_conversion() launched (runtime call start; the kernel's
                       own start when uncorrelated) inside a torch_step's time span.
    """
    s = OrderedDict()
    s["export"] = ex.path
    s["nsys_version"] = ex.nsys_version
    s["device_data"] = ex.device_data
    details = OrderedDict()

    windows = [r for r in ex.ranges if r.name == WINDOW]
    all_steps = sorted((r for r in ex.ranges if r.name == STEP), key=lambda r: r.start)
    if len(windows) == 1:
        lo, hi, source = windows[0].start, windows[0].end, "nvtx capture_window"
    elif windows:
        lo, hi = min(w.start for w in windows), max(w.end for w in windows)
        source = "span of %d capture_window ranges" % len(windows)
    elif all_steps:
        lo, hi, source = all_steps[0].start, max(r.end for r in all_steps), "span of torch_step ranges"
    else:
        lo = hi = None
        source = None
    s["capture_window_source"] = source
    s["capture_window_count"] = len(windows)
    s["capture_window_ms"] = ms(hi - lo) if lo is not None else None
    in_window = (lambda r: lo <= r.start and r.end <= hi) if lo is not None else (lambda r: True)
    steps = [r for r in all_steps if in_window(r)]
    outside = [r for r in all_steps if not in_window(r)]
    s["steps"] = len(steps)
    s["torch_step_ranges"] = len(all_steps)
    s["steps_outside_window"] = len(outside)
    s["unterminated_ranges"] = ex.unterminated

    # Per-step host timing from the nested default-domain ranges.
    by_name = defaultdict(list)
    for r in ex.ranges:
        by_name[r.name].append(r)

    def nested_ns(name):
        out = []
        for st in steps:
            inner = [r.duration for r in by_name.get(name, ()) if st.contains(r)]
            out.append(sum(inner) if inner else None)
        return out

    def total(values):
        present = [v for v in values if v is not None]
        return ms(sum(present)) if present else None

    waits_ns, subs_ns = nested_ns("batch_wait"), nested_ns("h2d_submit")
    s["step_ms"] = [ms(st.duration) for st in steps]
    s["data_load_ms"] = [ms(v) for v in nested_ns("data_load")]
    s["batch_wait_ms"] = [ms(v) for v in waits_ns]
    s["h2d_submit_ms"] = [ms(v) for v in subs_ns]
    s["batch_wait_total_ms"] = total(waits_ns)
    longest = max((v, -i) for i, v in enumerate(waits_ns) if v is not None) if total(waits_ns) is not None else None
    s["batch_wait_max_ms"] = ms(longest[0]) if longest else None
    s["batch_wait_max_step"] = -longest[1] if longest else None
    s["h2d_submit_total_ms"] = total(subs_ns)

    phases = _group_stats((r.name, r.duration) for r in ex.ranges if in_window(r))
    s["phase_totals_ms"] = OrderedDict((k, ms(v["total_ns"])) for k, v in phases.items())
    s["phase_counts"] = OrderedDict((k, v["count"]) for k, v in phases.items())
    s["phases"] = [OrderedDict(name=k, count=v["count"], total_ms=ms(v["total_ns"]),
                               avg_ms=ms(v["total_ns"] / v["count"]), min_ms=ms(v["min_ns"]),
                               max_ms=ms(v["max_ns"])) for k, v in phases.items()]
    other = _group_stats(((r.domain, r.name), r.duration) for r in ex.other_ranges)
    s["other_domain_ranges"] = [OrderedDict(domain=k[0], name=k[1], count=v["count"],
                                            total_ms=ms(v["total_ns"])) for k, v in other.items()]

    step_index = _StepIndex(steps)
    if ex.device_data:
        device = ([(a, b) for a, b, *_ in ex.kernels] + [(a, b) for a, b, *_ in ex.memcpys]
                  + [(a, b) for a, b, *_ in ex.memsets])
        if lo is not None and hi > lo:
            busy = union_length(device, lo, hi)
            s["device_busy_ms"] = ms(busy)
            s["no_activity_pct"] = round(100.0 * (hi - lo - busy) / (hi - lo), 6)
            s["idle_gaps"] = idle_gaps(ex, lo, hi, ex.ranges)
        else:
            s["device_busy_ms"] = s["no_activity_pct"] = s["idle_gaps"] = None
        s["h2d_copies"] = (sum(1 for c in ex.memcpys if c[3] and lo <= c[0] < hi)
                           if lo is not None else sum(1 for c in ex.memcpys if c[3]))
        s["kernel_launches"] = len(ex.kernels)
        last_dev = max((e for _, e in device), default=None)
        s["last_device_end_after_last_step_ms"] = (ms(last_dev - steps[-1].end)
                                                   if steps and last_dev is not None else None)
        # Layout conversions inside steps.
        layout_names, layout_in_steps = OrderedDict(), 0
        for start, end, name, launch, _tid in ex.kernels:
            if is_layout_conversion(name):
                layout_names[name] = layout_names.get(name, 0) + 1
                if step_index.find(launch if launch is not None else start) is not None:
                    layout_in_steps += 1
        s["layout_conversion_kernels"] = layout_in_steps
        s["layout_conversion_names"] = layout_names
    else:
        for key in ("device_busy_ms", "no_activity_pct", "idle_gaps", "h2d_copies", "kernel_launches",
                    "last_device_end_after_last_step_ms", "layout_conversion_kernels"):
            s[key] = None
        s["layout_conversion_names"] = {}

    if ex.api_calls is not None:
        fences = defaultdict(list)
        for r in ex.other_ranges:
            fences[r.tid].append((r.start, r.end))
        counted, excused = OrderedDict(), 0
        for start, end, name, tid in ex.api_calls:
            if name not in SYNC_CALLS or step_index.find(start) is None:
                continue
            if any(a <= start and end <= b for a, b in fences.get(tid, ())):
                excused += 1
                continue
            counted[name] = counted.get(name, 0) + 1
        s["sync_calls_in_steps"] = sum(counted.values())
        s["sync_calls_in_steps_by_name"] = counted
        s["sync_calls_in_loader_ranges"] = excused
    else:
        s["sync_calls_in_steps"] = None
        s["sync_calls_in_steps_by_name"] = {}
        s["sync_calls_in_loader_ranges"] = None

    # Tables (whole export, like nsys stats).
    if ex.device_data:
        kern = _group_stats((name, e - st) for st, e, name, *_ in ex.kernels)
        total_kernel = sum(v["total_ns"] for v in kern.values()) or 1
        labels = kernel_labels(list(kern)[:top_n])
        s["top_kernels"] = [OrderedDict(rank=i + 1, label=labels[i], name=k, launches=v["count"],
                                        total_ms=ms(v["total_ns"]),
                                        avg_us=round(v["total_ns"] / v["count"] / 1e3, 3),
                                        pct=round(100.0 * v["total_ns"] / total_kernel, 2))
                            for i, (k, v) in enumerate(list(kern.items())[:top_n])]
        mem = _group_stats([("[memcpy %s]" % c[2], c[1] - c[0], c[4]) for c in ex.memcpys]
                           + [("[memset]", m[1] - m[0], m[2]) for m in ex.memsets])
        s["memory_operations"] = [OrderedDict(operation=k, count=v["count"], total_ms=ms(v["total_ns"]),
                                              avg_us=round(v["total_ns"] / v["count"] / 1e3, 3),
                                              max_us=round(v["max_ns"] / 1e3, 3), bytes=v["bytes"])
                                  for k, v in mem.items()]
    else:
        s["top_kernels"] = s["memory_operations"] = None
    if ex.api_calls is not None:
        api = _group_stats((name, e - st) for st, e, name, _ in ex.api_calls)
        s["api_calls"] = [OrderedDict(name=k, calls=v["count"], total_ms=ms(v["total_ns"]),
                                      avg_us=round(v["total_ns"] / v["count"] / 1e3, 3),
                                      max_ms=ms(v["max_ns"])) for k, v in api.items()]
    else:
        s["api_calls"] = None

    # Report and expected steps.
    metrics = report_metrics(report)
    if metrics is not None:
        s["images_per_s"] = metrics["images_per_s"]
        s["report"] = metrics
    if expected_steps is not None:
        exp, exp_src = int(expected_steps), "--expected-steps"
    elif metrics is not None and metrics["steps"] is not None:
        exp = int(metrics["steps"])
        exp_src = "run report capture.steps" if metrics["format"] == "train_resnet50" else "run report steps"
    else:
        exp, exp_src = None, "none given: passes when steps >= 1"
    s["expected_steps"] = exp
    s["expected_steps_source"] = exp_src

    checks = OrderedDict()
    if exp is not None:
        checks["step_count"] = s["steps"] == exp
        details["step_count"] = "%d torch_step ranges in the window, expected %d (%s)" % (
            s["steps"], exp, exp_src)
    else:
        checks["step_count"] = s["steps"] >= 1
        details["step_count"] = "%d torch_step ranges in the window, expected >= 1 (no expected count given)" % s["steps"]

    if not ex.device_data:
        checks["copy_count"] = None
        details["copy_count"] = "not evaluable: the export has no CUDA tables"
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
    s["checks"] = checks
    s["check_details"] = details
    s["all_checks_pass"] = all(v is True for v in checks.values())
    return s


def failed_checks(summary):
    """[(name, detail)] for checks that are false or not evaluable."""
    return [(k, summary["check_details"].get(k, "")) for k, v in summary["checks"].items() if v is not True]


def crosscheck_stats(summary, ex, csv_prefix):
    """Compare per-range totals with an nsys stats nvtx_sum CSV beside the export (names with or without
    the ':' domain prefix), and kernel / memcpy counts with the kernel and memory CSVs. Returns a dict
    (None when no CSV is found)."""
    out = OrderedDict()
    nvtx_csv = csv_prefix + "_nvtx_sum.csv"
    if os.path.isfile(nvtx_csv):
        mine = _group_stats((r.name, r.duration) for r in ex.ranges)
        mismatches, compared = [], 0
        for row in read_stats_csv(nvtx_csv):
            domain, name = normalize_nvtx_name(row.get("Range") or row.get("Name") or "")
            if domain is not None:
                continue
            compared += 1
            got = mine.get(name)
            want = (int(float(row["Instances"])), int(float(row["Total Time (ns)"])))
            if got is None or (got["count"], got["total_ns"]) != want:
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
        mine_h2d = sum(1 for c in ex.memcpys if c[3])
        out["cuda_gpu_mem_time_sum"] = OrderedDict(csv=mem_csv, csv_h2d=csv_h2d, export_h2d=mine_h2d,
                                                   match=csv_h2d == mine_h2d)
    return out or None


# --------------------------------------------------------------------------------------------------
# Kernel labels
# --------------------------------------------------------------------------------------------------

# (pattern on the demangled name, short label), first match wins. Written for the ATen, cuDNN, cuBLAS
# and CUTLASS kernels a ResNet-50 training step launches.
_KERNEL_LABELS = [
    (r"batchnorm_bwtr|batch_norm_backward|bn_bw|BatchNormBwd", "BN bwd"),
    (r"batchnorm_fwtr|batch_norm_(?:collect|elemt|transform)|bn_fw|BatchNormFwd|batch_norm_forward", "BN fwd"),
    (r"nchw_?(?:to|2)_?nhwc", "NCHW->NHWC"),
    (r"nhwc_?(?:to|2)_?nchw", "NHWC->NCHW"),
    (r"wgrad|Conv2dWgrad", "conv wgrad"),
    (r"dgrad|Conv2dDgrad", "conv dgrad"),
    (r"fprop|Conv2dFprop|implicit_convolve", "conv fprop"),
    (r"threshold_kernel", "ReLU bwd"),
    (r"clamp_scalar|clamp_min", "ReLU fwd"),
    (r"multi_tensor_apply|_foreach|sgd", "SGD"),
    (r"max_pool_backward", "max-pool bwd"),
    (r"max_pool_forward", "max-pool fwd"),
    (r"avg_pool|adaptive_avg", "avg-pool"),
    (r"MeanOps|mean_kernel", "mean"),
    (r"softmax_warp_backward|log_softmax_backward|softmax_backward", "softmax bwd"),
    (r"softmax", "softmax fwd"),
    (r"nll_loss_backward", "NLL loss bwd"),
    (r"nll_loss", "NLL loss fwd"),
    (r"splitKreduce|ReduceSplitK", "split-K reduce"),
    (r"convertTensor", "cuDNN convert"),
    (r"nhwcAddPadding", "NHWC pad"),
    (r"init_device_workspace", "cuDNN init"),
    (r"direct_copy_kernel|copy_kernel", "copy"),
    (r"CUDAFunctor_add|AddFunctor", "elementwise add"),
    (r"MulFunctor", "elementwise mul"),
    (r"reduce_kernel|sum_functor", "reduce"),
    (r"gemm|cublas|cutlass", "GEMM"),
    (r"elementwise", "elementwise"),
]
_KERNEL_LABELS = [(re.compile(p, re.IGNORECASE), label) for p, label in _KERNEL_LABELS]


def short_kernel_label(name):
    """A readable short label for a demangled kernel name ("BN fwd", "conv dgrad", "SGD", ...)."""
    for pattern, label in _KERNEL_LABELS:
        if pattern.search(name):
            return label
    base = re.sub(r"^void\s+", "", name)
    base = re.sub(r"<.*", "", base).split("(")[0].split("::")[-1]
    return base[:28] + ("..." if len(base) > 28 else "")


def kernel_labels(names):
    """Short labels for ranked kernel groups; a label shared by several groups gets its rank among
    them (#1 the largest), since the groups are distinct implementations."""
    shorts = [short_kernel_label(n) for n in names]
    seen, out = defaultdict(int), []
    for sh in shorts:
        seen[sh] += 1
        out.append("%s #%d" % (sh, seen[sh]) if shorts.count(sh) > 1 else sh)
    return out


# --------------------------------------------------------------------------------------------------
# Writing
# --------------------------------------------------------------------------------------------------

def _fmt(v, digits=3):
    if v is None:
        return "n/a"
    if isinstance(v, bool):
        return "pass" if v else "FAIL"
    if isinstance(v, float):
        return ("%%.%df" % digits) % v
    return str(v)


def _table(headers, rows, align=None):
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(str(c).replace("|", "\\|") for c in row) + " |" for row in rows]
    return "\n".join(lines)


def render_markdown(s):
    """summary.md: the tables a reader of the capture needs."""
    out = ["# Nsight Systems capture summary", ""]
    out.append("- export: `%s`%s" % (s["export"], " (nsys %s)" % s["nsys_version"] if s["nsys_version"] else ""))
    out.append("- capture window: %s ms (%s)" % (_fmt(s["capture_window_ms"]), s["capture_window_source"]))
    out.append("- torch_step ranges in the window: %d (expected: %s, %s)" % (
        s["steps"], _fmt(s["expected_steps"]), s["expected_steps_source"]))
    out.append("- no recorded kernel, copy or memset: %s%% of the window" % _fmt(s["no_activity_pct"], 2))
    out.append("- host-to-device copies in the window: %s" % _fmt(s["h2d_copies"]))
    if "images_per_s" in s:
        out.append("- throughput (run report): %s images/s" % _fmt(s["images_per_s"], 1))
    if s["last_device_end_after_last_step_ms"] is not None:
        out.append("- device work after the last host step ends (final drain): %s ms"
                   % _fmt(s["last_device_end_after_last_step_ms"]))
    gaps = s.get("idle_gaps")
    if gaps and gaps["count"]:
        out += ["", "## Where the device sat idle (gaps between recorded activities, inside the window)", "",
                "A gap is `host` when the operation that ended it was enqueued only after the device had gone "
                "idle (the host, not the device, set its length), `device` when that operation was already "
                "queued (launch latency between queued work, or a wait on another stream).", ""]
        out.append(_table(["cause", "gaps", "total ms"],
                          [(c, d["count"], _fmt(d["total_ms"])) for c, d in gaps["causes"].items()],
                          ["l", "r", "r"]))
        out += [""]
        out.append(_table(["gap length", "gaps", "total ms"],
                          [(h["bucket"], h["count"], _fmt(h["total_ms"])) for h in gaps["histogram"]],
                          ["l", "r", "r"]))
        if gaps["host_by_range"]:
            out += ["", "Host gaps by the host range they began in:", ""]
            out.append(_table(["host range", "gaps", "total ms"],
                              [(k, d["count"], _fmt(d["total_ms"])) for k, d in gaps["host_by_range"].items()],
                              ["l", "r", "r"]))
        out += ["", "Largest gaps:", ""]
        out.append(_table(["at ms", "gap ms", "cause", "host range", "next activity"],
                          [(_fmt(g["at_ms"]), _fmt(g["gap_ms"]), g["cause"], g["host_range"] or "",
                            g["next"] or "") for g in gaps["largest"]], ["r", "r", "l", "l", "l"]))
    out += ["", "## Checks", ""]
    out.append(_table(["check", "result", "detail"],
                      [(k, "not evaluable" if v is None else _fmt(v), s["check_details"][k])
                       for k, v in s["checks"].items()], ["l", "l", "l"]))
    out += ["", "## NVTX phases (default domain, inside the window)", "",
            "Ranges nest (batch_wait and h2d_submit lie inside data_load, everything inside torch_step), so "
            "totals are not exclusive buckets.", ""]
    out.append(_table(["range", "count", "total ms", "avg ms", "min ms", "max ms"],
                      [(p["name"], p["count"], _fmt(p["total_ms"]), _fmt(p["avg_ms"]), _fmt(p["min_ms"]),
                        _fmt(p["max_ms"])) for p in s["phases"]]))
    if s["steps"]:
        out += ["", "## Per step (host ranges, ms)", ""]
        out.append(_table(["step", "torch_step", "data_load", "batch_wait", "h2d_submit"],
                          [(i, _fmt(s["step_ms"][i]), _fmt(s["data_load_ms"][i]), _fmt(s["batch_wait_ms"][i]),
                            _fmt(s["h2d_submit_ms"][i])) for i in range(s["steps"])]))
        if s["batch_wait_max_ms"] is not None:
            out += ["", "batch_wait total %s ms, longest %s ms at step %d; h2d_submit total %s ms." % (
                _fmt(s["batch_wait_total_ms"]), _fmt(s["batch_wait_max_ms"]), s["batch_wait_max_step"],
                _fmt(s["h2d_submit_total_ms"]))]
    if s["top_kernels"]:
        out += ["", "## Largest kernel groups (identical demangled names, whole export)", ""]
        out.append(_table(["#", "label", "launches", "total ms", "avg us", "% kernel time", "demangled name"],
                          [(k["rank"], k["label"], k["launches"], _fmt(k["total_ms"]), _fmt(k["avg_us"], 1),
                            _fmt(k["pct"], 1), "`%s`" % (k["name"][:110] + ("..." if len(k["name"]) > 110 else "")))
                           for k in s["top_kernels"]], ["r", "l", "r", "r", "r", "r", "l"]))
    if s["memory_operations"]:
        out += ["", "## Memory operations (whole export)", ""]
        out.append(_table(["operation", "count", "total ms", "avg us", "max us", "MB"],
                          [(m["operation"], m["count"], _fmt(m["total_ms"]), _fmt(m["avg_us"], 1),
                            _fmt(m["max_us"], 1), _fmt(m["bytes"] / 1e6, 1)) for m in s["memory_operations"]]))
    if s["api_calls"]:
        out += ["", "## CUDA API calls (whole export, top 15 by total time)", ""]
        out.append(_table(["call", "calls", "total ms", "avg us", "max ms"],
                          [(a["name"], a["calls"], _fmt(a["total_ms"]), _fmt(a["avg_us"], 1), _fmt(a["max_ms"]))
                           for a in s["api_calls"][:15]]))
    if s["other_domain_ranges"]:
        out += ["", "## Ranges of other NVTX domains (not steps or phases)", ""]
        out.append(_table(["domain", "range", "count", "total ms"],
                          [(r["domain"], r["name"], r["count"], _fmt(r["total_ms"]))
                           for r in s["other_domain_ranges"]], ["l", "l", "r", "r"]))
    if s.get("layout_conversion_names"):
        out += ["", "## Layout-conversion kernels found", ""]
        out += ["- `%s` x%d" % (n[:120], c) for n, c in s["layout_conversion_names"].items()]
    if s.get("stats_crosscheck"):
        out += ["", "## Cross-check with the nsys stats CSVs", ""]
        for name, v in s["stats_crosscheck"].items():
            out.append("- %s: %s" % (name, ", ".join("%s=%s" % kv for kv in v.items() if kv[0] != "csv")))
    return "\n".join(out) + "\n"


# --------------------------------------------------------------------------------------------------
# Figures
# --------------------------------------------------------------------------------------------------

HOST_COLOR = "#4c72b0"
INPUT_COLOR = "#dd8452"
KERNEL_COLOR = "#55a868"
H2D_COLOR = "#c44e52"
COPY_COLOR = "#8172b3"
MEMSET_COLOR = "#937860"
GAP_COLOR = "#dcdcdc"
SEED_COLORS = ["#4c72b0", "#dd8452", "#55a868", "#c44e52", "#8172b3", "#937860"]


def require_matplotlib():
    """Import matplotlib with the Agg backend, or exit with a one-line hint."""
    try:
        import matplotlib
    except ImportError:
        sys.exit("error: matplotlib is not available to %s; run with /usr/bin/python3 or install "
                 "python3-matplotlib (or pass --no-figures)" % sys.executable)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    plt.rcParams.update({"figure.dpi": 110, "savefig.dpi": 150, "axes.spines.top": False,
                         "axes.spines.right": False, "axes.titleweight": "bold", "font.size": 10})
    return plt


def _save(fig, path):
    fig.savefig(path, bbox_inches="tight")
    import matplotlib.pyplot as plt
    plt.close(fig)
    return path


def plot_phase_totals(s, path, title_suffix=""):
    """Figure 1: total duration of each phase range (torch_step and capture_window excluded)."""
    plt = require_matplotlib()
    phases = [p for p in s["phases"] if p["name"] not in ENCLOSING]
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * max(len(phases), 3) + 1.4))
    names = [p["name"] for p in phases][::-1]
    totals = [p["total_ms"] for p in phases][::-1]
    colors = [INPUT_COLOR if n in ("data_load", "batch_wait", "h2d_submit", "iterator_reset") else HOST_COLOR
              for n in names]
    bars = ax.barh(range(len(names)), totals, color=colors, height=0.65)
    for bar, n in zip(bars, names):
        if n in NESTED_IN:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(["%s (in %s)" % (n, NESTED_IN[n]) if n in NESTED_IN else n for n in names])
    top = max(totals, default=1) or 1
    for i, p in enumerate(phases[::-1]):
        ax.text(p["total_ms"] + top * 0.01, i, "%.1f ms  (%d range%s, max %.1f)" % (
            p["total_ms"], p["count"], "" if p["count"] == 1 else "s", p["max_ms"]), va="center", fontsize=8.5)
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("total range duration (ms, host time)")
    ax.set_title("NVTX phase ranges across %d profiled step%s%s" % (
        s["steps"], "" if s["steps"] == 1 else "s", title_suffix))
    ax.grid(axis="x", alpha=0.3)
    fig.text(0.01, -0.02, "Host range durations, not exclusive GPU work; hatched ranges nest inside data_load.",
             fontsize=8, color="#555555")
    return _save(fig, path)


def plot_top_kernels(s, path, title_suffix=""):
    """Figure 2: the twelve largest kernel groups by demangled name, short labels, launch counts."""
    plt = require_matplotlib()
    ks = s["top_kernels"] or []
    fig, ax = plt.subplots(figsize=(8.5, 0.42 * max(len(ks), 3) + 1.4))
    labels = ["%d. %s" % (k["rank"], k["label"]) for k in ks][::-1]
    totals = [k["total_ms"] for k in ks][::-1]
    ax.barh(range(len(ks)), totals, color=KERNEL_COLOR, height=0.65)
    ax.set_yticks(range(len(ks)))
    ax.set_yticklabels(labels)
    top = max(totals, default=1) or 1
    for i, k in enumerate(ks[::-1]):
        ax.text(k["total_ms"] + top * 0.01, i, "%.1f ms, %d launches" % (k["total_ms"], k["launches"]),
                va="center", fontsize=8.5)
    ax.set_xlim(0, top * 1.32)
    ax.set_xlabel("total kernel time (ms, GPU)")
    ax.set_title("Largest kernel groups by demangled name%s" % title_suffix)
    ax.grid(axis="x", alpha=0.3)
    if not ks:
        ax.text(0.5, 0.5, "no kernels in this export", transform=ax.transAxes, ha="center")
    fig.text(0.01, -0.02, "Each bar is one demangled name; #n ranks implementations sharing a short label. "
             "Not operation-family totals.", fontsize=8, color="#555555")
    return _save(fig, path)


def plot_timeline(s, ex, path, title_suffix=""):
    """Figure 3: first captured step to the last device operation; host rows above device lanes."""
    plt = require_matplotlib()
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D
    steps = sorted((r for r in ex.ranges if r.name == STEP), key=lambda r: r.start)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    if not steps:
        ax.text(0.5, 0.5, "no torch_step ranges", transform=ax.transAxes, ha="center")
        return _save(fig, path)
    t0 = steps[0].start
    device = []
    if ex.device_data:
        device = ([(a, b) for a, b, *_ in ex.kernels] + [(a, b) for a, b, *_ in ex.memcpys]
                  + [(a, b) for a, b, *_ in ex.memsets])
    t_end = max([b for _, b in device if b >= t0] + [steps[-1].end])

    def bars(items):
        return [((a - t0) / 1e6, max((b - a) / 1e6, 0)) for a, b in items if b >= t0 and a <= t_end]

    lanes = ["torch_step", "data_load", "kernels", "memcpy", "memset"]
    y = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
    h = 0.6
    # Gaps with no device activity, shaded behind the device lanes.
    span_ms = (t_end - t0) / 1e6
    shaded = 0
    if ex.device_data:
        for a, b in merged_gaps(device, t0, t_end):
            if (b - a) / 1e6 >= span_ms * 0.001:
                ax.axvspan((a - t0) / 1e6, (b - t0) / 1e6, ymin=0, ymax=0.6, color=GAP_COLOR, zorder=0)
                shaded += 1
    for i, st in enumerate(steps):
        ax.broken_barh(bars([(st.start, st.end)]), (y["torch_step"] - h / 2, h),
                       facecolors=HOST_COLOR if i % 2 == 0 else "#7b9bd0", edgecolor="white", linewidth=0.6)
    ax.broken_barh(bars((r.start, r.end) for r in ex.ranges if r.name == "data_load"),
                   (y["data_load"] - h / 2, h), facecolors=INPUT_COLOR, edgecolor=INPUT_COLOR, linewidth=0.4)
    if ex.device_data:
        ax.broken_barh(bars((a, b) for a, b, *_ in ex.kernels), (y["kernels"] - h / 2, h),
                       facecolors=KERNEL_COLOR, edgecolor=KERNEL_COLOR, linewidth=0.3)
        ax.broken_barh(bars((c[0], c[1]) for c in ex.memcpys if c[3]), (y["memcpy"] - h / 2, h),
                       facecolors=H2D_COLOR, edgecolor=H2D_COLOR, linewidth=0.5)
        ax.broken_barh(bars((c[0], c[1]) for c in ex.memcpys if not c[3]), (y["memcpy"] - h / 2, h),
                       facecolors=COPY_COLOR, edgecolor=COPY_COLOR, linewidth=0.5)
        ax.broken_barh(bars((m[0], m[1]) for m in ex.memsets), (y["memset"] - h / 2, h),
                       facecolors=MEMSET_COLOR, edgecolor=MEMSET_COLOR, linewidth=0.3)
    end_ms = (steps[-1].end - t0) / 1e6
    ax.axvline(end_ms, color="black", linestyle="--", linewidth=1)
    ax.annotate("last host step ends", xy=(end_ms, len(lanes) - 0.45), xytext=(-4, 0),
                textcoords="offset points", ha="right", va="center", fontsize=8.5)
    ax.set_yticks([y[n] for n in lanes])
    ax.set_yticklabels(["torch_step (host)", "data_load (host)", "kernels (GPU)", "memcpy (GPU)",
                        "memset (GPU)"])
    ax.axhline(2.5, color="#999999", linewidth=0.6)
    ax.set_xlim(0, span_ms * 1.005)
    ax.set_ylim(-0.6, len(lanes) - 0.2)
    ax.set_xlabel("time since the first captured torch_step starts (ms)")
    ax.set_title("Host ranges and recorded GPU activity, first step to last device operation%s" % title_suffix)
    handles = [Patch(color=HOST_COLOR, label="torch_step"), Patch(color=INPUT_COLOR, label="data_load"),
               Patch(color=KERNEL_COLOR, label="kernel"), Patch(color=H2D_COLOR, label="H2D copy"),
               Patch(color=COPY_COLOR, label="other copy"), Patch(color=MEMSET_COLOR, label="memset"),
               Line2D([], [], color="black", linestyle="--", label="end of last host step")]
    if shaded:
        handles.insert(-1, Patch(color=GAP_COLOR, label="no device activity"))
    ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.16), ncol=8, fontsize=8, frameon=False)
    return _save(fig, path)


def plot_batch_wait(s, path, title_suffix=""):
    """Figure 5 for one capture: time inside batch_wait per step."""
    plt = require_matplotlib()
    waits = s["batch_wait_ms"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    if not waits or all(w is None for w in waits):
        ax.text(0.5, 0.5, "no batch_wait ranges in this capture", transform=ax.transAxes, ha="center")
    else:
        vals = [w or 0 for w in waits]
        ax.bar(range(len(vals)), vals, color=INPUT_COLOR, width=0.7)
        ax.set_xticks(range(len(vals)) if len(vals) <= 16 else range(0, len(vals), max(1, len(vals) // 16)))
        if s["batch_wait_max_step"] is not None:
            i = s["batch_wait_max_step"]
            ax.annotate("%.2f ms" % vals[i], xy=(i, vals[i]), xytext=(0, 3), textcoords="offset points",
                        ha="center", fontsize=8.5)
        ax.set_ylim(0, max(vals) * 1.15 or 1)
    ax.set_xlabel("captured step (0 = first)")
    ax.set_ylabel("time inside batch_wait (ms)")
    ax.set_title("Waiting for the next batch, per step%s" % title_suffix)
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)


def plot_sweep(rows, path, has_capture=True):
    """Figure 4: throughput and no-activity share per configuration; bars are means, dots single runs.
    rows: [{"config": str, "runs": [{"seed": int, "images_per_s": x, "no_activity_pct": y}, ...]}]."""
    plt = require_matplotlib()
    seeds = sorted({r["seed"] for row in rows for r in row["runs"]})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    metrics = [("images_per_s", "throughput (images/s)", "Synchronized throughput"),
               ("no_activity_pct", "window with no GPU activity (%)", "No recorded GPU activity")]
    x = list(range(len(rows)))
    for ax, (key, ylabel, title) in zip(axes, metrics):
        vals = [[r[key] for r in row["runs"] if r.get(key) is not None] for row in rows]
        if not any(vals):
            ax.text(0.5, 0.5, "not measured (runs without a capture)" if not has_capture else "no data",
                    transform=ax.transAxes, ha="center", color="#555555")
            ax.set_yticks([])
        means = [sum(v) / len(v) if v else 0 for v in vals]
        ax.bar(x, means, color=HOST_COLOR if key == "images_per_s" else "#999999", width=0.65, alpha=0.85,
               label="mean of runs")
        for j, seed in enumerate(seeds):
            xs, ys = [], []
            for i, row in enumerate(rows):
                for r in row["runs"]:
                    if r["seed"] == seed and r.get(key) is not None:
                        xs.append(i + (j - (len(seeds) - 1) / 2) * 0.16)
                        ys.append(r[key])
            ax.scatter(xs, ys, color=SEED_COLORS[(j + 1) % len(SEED_COLORS)], edgecolor="black",
                       linewidth=0.5, s=28, zorder=3, label="seed %d" % seed)
        ax.set_xticks(x)
        ax.set_xticklabels([row["config"] for row in rows], rotation=30, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        top = max((v for vs in vals for v in vs), default=0)
        if top > 0:
            ax.set_ylim(0, top * 1.22)  # headroom for the legend
    axes[0].legend(fontsize=8, loc="upper center", ncol=len(seeds) + 1, frameon=False)
    fig.text(0.01, -0.04, "Bars: mean of the runs; dots: individual runs (not confidence intervals).",
             fontsize=8, color="#555555")
    fig.tight_layout()
    return _save(fig, path)


def plot_sweep_batch_wait(left, right, path, titles=("Reset vs reused iterator", "Baseline runs")):
    """Figure 5 for a sweep: batch_wait per step. left / right: [(label, [ms per step])] with labels
    "<config> seed <n>"; the left panel compares short captures (reset vs reuse), the right shows the
    long baseline runs. One colour per configuration (per run when a panel holds one configuration),
    one line style per seed."""
    plt = require_matplotlib()
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    styles = ["-", "--", ":", "-."]
    for ax, series, title in ((axes[0], left, titles[0]), (axes[1], right, titles[1])):
        if not series:
            ax.text(0.5, 0.5, "no runs", transform=ax.transAxes, ha="center", color="#555555")
        configs = []
        for label, _ in series:
            if label.split(" ")[0] not in configs:
                configs.append(label.split(" ")[0])
        seen = {}
        for k, (label, waits) in enumerate(series):
            cfg = label.split(" ")[0]
            si = seen.get(cfg, 0)
            seen[cfg] = si + 1
            color = SEED_COLORS[(k if len(configs) == 1 else configs.index(cfg)) % len(SEED_COLORS)]
            ax.plot(range(len(waits)), [w if w is not None else float("nan") for w in waits], color=color,
                    linestyle=styles[si % len(styles)], marker="o", markersize=3 if len(waits) > 16 else 4.5,
                    linewidth=1.1, label=label)
        vals = [w for _, ws in series for w in ws if w]
        if vals and max(vals) / max(min(vals), 1e-9) > 50:
            ax.set_yscale("log")
            ax.set_ylabel("time inside batch_wait (ms, log scale)")
        else:
            ax.set_ylabel("time inside batch_wait (ms)")
        ax.set_xlabel("captured step (0 = first)")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        if series:
            ax.legend(fontsize=8, loc="best", framealpha=0.9)
    fig.text(0.01, -0.04, "Time inside next(batches), excluding transfer submission; panel scales differ.",
             fontsize=8, color="#555555")
    fig.tight_layout()
    return _save(fig, path)


def write_outputs(s, ex, out_dir, figures=True):
    """Write summary.json, summary.md and (unless figures is False) figures 1, 2, 3 and 5 into out_dir."""
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "summary.json"), "w") as f:
        json.dump(s, f, indent=2)
        f.write("\n")
    with open(os.path.join(out_dir, "summary.md"), "w") as f:
        f.write(render_markdown(s))
    paths = []
    if figures:
        paths.append(plot_phase_totals(s, os.path.join(out_dir, "fig1_phases.png")))
        paths.append(plot_top_kernels(s, os.path.join(out_dir, "fig2_top_kernels.png")))
        paths.append(plot_timeline(s, ex, os.path.join(out_dir, "fig3_timeline.png")))
        paths.append(plot_batch_wait(s, os.path.join(out_dir, "fig5_batch_wait.png")))
    return paths


def analyze(export_path, out_dir, report_path=None, expected_steps=None, figures=True):
    """Load, compute and write; returns the summary dict."""
    ex = load_export(export_path)
    report = load_report(report_path) if report_path else None
    s = compute_summary(ex, report, expected_steps)
    if report_path:
        s["report_path"] = report_path
    base = export_path[:-7] if export_path.endswith(".sqlite") else export_path
    check = crosscheck_stats(s, ex, base)
    if check:
        s["stats_crosscheck"] = check
    write_outputs(s, ex, out_dir, figures)
    return s


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter,
                                epilog="\n".join(__doc__.split("\n")[2:]))
    p.add_argument("export", help="nsys SQLite export (nsys export --type=sqlite)")
    p.add_argument("--out", required=True, help="directory for summary.json, summary.md and figures")
    p.add_argument("--report", help="run report: train_resnet50 --report JSON, or seed_workload.py's line")
    p.add_argument("--expected-steps", type=int, metavar="M",
                   help="steps the capture must hold (default: the report's capture.steps)")
    p.add_argument("--check", "--strict", dest="check", action="store_true",
                   help="exit 3 when any check fails or cannot be evaluated, naming it")
    p.add_argument("--no-figures", action="store_true", help="skip the PNG figures (no matplotlib needed)")
    a = p.parse_args(argv)
    if a.expected_steps is not None and a.expected_steps < 0:
        p.error("expected --expected-steps >= 0, got %d" % a.expected_steps)
    if not a.no_figures:
        require_matplotlib()
    try:
        s = analyze(a.export, a.out, a.report, a.expected_steps, figures=not a.no_figures)
    except AnalysisError as e:
        print("error: %s" % e, file=sys.stderr)
        return 2
    fails = failed_checks(s)
    print("%s: %d steps, window %s ms, %s%% no device activity, %s H2D copies -> %s" % (
        a.export, s["steps"], _fmt(s["capture_window_ms"]), _fmt(s["no_activity_pct"], 2),
        _fmt(s["h2d_copies"]), a.out))
    for name, detail in fails:
        print("check %s %s: %s" % (name, "not evaluable" if s["checks"][name] is None else "FAILED", detail),
              file=sys.stderr)
    if a.check and fails:
        print("error: %d check(s) did not pass: %s" % (len(fails), ", ".join(n for n, _ in fails)), file=sys.stderr)
        return 3
    return 0


if __name__ == "__main__":
    sys.exit(main())
