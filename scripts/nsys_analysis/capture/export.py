"""Reading an nsys SQLite export (any nsys 2023+ release) into an Export: tables and columns looked
up by name, optional tables allowed to be absent, enum ids read from the ENUM_* tables when
present."""

import os
import re
import sqlite3

from .records import ApiCall, Export, GraphExec, Kernel, Memcpy, Memset, Overhead, Range


# Fallback enum ids (nsys 2023-2025) for exports that lack the ENUM_* tables.
_FALLBACK_EVENT_TYPES = {"NvtxPushPopRange": 59, "NvtxStartEndRange": 60, "NvtxDomainCreate": 75}
_FALLBACK_HTOD = 1
# A graph replayed without --cuda-graph-trace=node is a GRAPH_TRACE row, and nsys then writes no
# kernel table when nothing else ran: any of these tables means a CUDA trace.
_GRAPH_TRACE = "CUPTI_ACTIVITY_KIND_GRAPH_TRACE"
_CUDA_TABLES = (
    "CUPTI_ACTIVITY_KIND_RUNTIME",
    "CUPTI_ACTIVITY_KIND_KERNEL",
    "CUPTI_ACTIVITY_KIND_MEMCPY",
    "CUPTI_ACTIVITY_KIND_MEMSET",
    _GRAPH_TRACE,
)


class AnalysisError(Exception):
    """An unusable input (export or run report); analyze.py prints it on one line and exits 2."""


def _tables(conn):
    return {
        r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type IN ('table','view')")
    }


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
    try:
        with open(path, "rb") as f:
            head = f.read(16)
    except OSError as e:
        raise AnalysisError("cannot read %s: %s" % (path, e.strerror or e))
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
    except _Damaged as e:
        raise AnalysisError("export %s: %s" % (path, e))
    finally:
        conn.close()


class _Damaged(Exception):
    """A row no nsys export holds; load_export() names the file."""


# No nsys time comes near this either side of 0 (2^62 ns is 146 years); INT64_MAX does.
_MAX_TIME_NS = 1 << 62


def _times(table: str, start: object, end: object) -> tuple[int, int]:
    """(start, end) of a row of table when both are integer ns times, start <= end, both within
    2^62 of 0, else _Damaged: SQLite keeps whatever a column is given, and nsys writes integers
    only, an end never before its start (a graph CUPTI could not time has 0 for both)."""
    if type(start) is not int or type(end) is not int:
        raise _Damaged(
            "%s has a row with start %r, end %r, expected integer nanoseconds (not an nsys "
            "export, or a damaged one)" % (table, start, end)
        )
    if not -_MAX_TIME_NS < start <= end < _MAX_TIME_NS:
        raise _Damaged(
            "%s has a row with start %d, end %d, expected start <= end, both within 2^62 ns of 0 "
            "(a damaged export)" % (table, start, end)
        )
    return start, end


# The name of an NVTX range that has neither text nor a textId.
UNNAMED = "(unnamed)"


def _bytes(table: str, value: object) -> int:
    """A copy's or memset's byte count: an integer >= 0 (None: 0), else AnalysisError."""
    if value is None:
        return 0
    if type(value) is not int or value < 0:
        raise _Damaged(
            "%s has a row with bytes %r, expected an integer >= 0 (a damaged export)"
            % (table, value)
        )
    return value


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

    _load_ranges(conn, tables, ex, text_of)
    pids = sorted({_pid_of(r.tid) for r in ex.ranges if r.name == "torch_step"} - {None})
    if len(pids) > 1:
        # One timeline of several processes' steps would interleave them as one run's.
        raise AnalysisError(
            "%s holds torch_step ranges of %d processes (pids %s): the ranks of a data-parallel "
            "run, which analyze.py reads one export per rank (scripts/profile.sh --nproc N writes "
            "PREFIX.rank<r>.sqlite)" % (path, len(pids), ", ".join(map(str, pids)))
        )
    _load_threads_and_overhead(conn, tables, ex, text_of)
    ex.device_data = any(t in tables for t in _CUDA_TABLES)
    if ex.device_data:
        _load_device(conn, tables, ex, text_of)
    return ex


def _load_ranges(conn, tables, ex, text_of):
    """NVTX ranges into ex: push/pop and start/end; domain names from the domain-create events."""
    ids = _enum_ids(
        conn, tables, "ENUM_NSYS_EVENT_TYPE", _FALLBACK_EVENT_TYPES, _FALLBACK_EVENT_TYPES
    )
    range_types = {ids["NvtxPushPopRange"], ids["NvtxStartEndRange"]} - {None}
    rows = _select(
        conn,
        "NVTX_EVENTS",
        ("start", "end", "eventType", "text", "textId", "domainId", "globalTid"),
        required=("start", "eventType"),
    ).fetchall()
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
        start, end = _times("NVTX_EVENTS", start, end)
        name = text if text is not None else text_of(text_id)
        name = UNNAMED if name is None else str(name)
        if domain_id in (None, 0):
            ex.ranges.append(Range(name, start, end, tid))
        else:
            ex.other_ranges.append(
                Range(name, start, end, tid, domains.get(domain_id, "domain %s" % domain_id))
            )
    ex.ranges.sort(key=lambda r: (r.start, -r.end))
    ex.other_ranges.sort(key=lambda r: (r.start, -r.end))


def _load_threads_and_overhead(conn, tables, ex, text_of):
    """Thread names (ThreadNames) and the profiler's own time (PROFILER_OVERHEAD) into ex; both
    tables are optional. A thread named twice (renamed after it started) keeps its last row's
    name."""
    if "ThreadNames" in tables:
        for name_id, tid in _select(
            conn, "ThreadNames", ("nameId", "globalTid"), required=("nameId",)
        ):
            if tid is not None and name_id is not None:
                ex.thread_names[tid] = text_of(name_id)
    if "PROFILER_OVERHEAD" in tables:
        ex.profiler_overhead = []
        for start, end, tid, name_id in _select(
            conn,
            "PROFILER_OVERHEAD",
            ("start", "end", "globalTid", "nameId"),
            required=("start", "end"),
        ):
            start, end = _times("PROFILER_OVERHEAD", start, end)
            ex.profiler_overhead.append(Overhead(start, end, text_of(name_id) or "?", tid))
        ex.profiler_overhead.sort(key=lambda o: o.start)


def _load_device(conn, tables, ex, text_of):
    """Runtime calls, kernels, copies, memsets and graphs recorded whole into ex, each device
    activity with the runtime call that enqueued it."""
    launches = {}
    if "CUPTI_ACTIVITY_KIND_RUNTIME" in tables:
        ex.api_calls = []
        for start, end, name_id, corr, tid in _select(
            conn,
            "CUPTI_ACTIVITY_KIND_RUNTIME",
            ("start", "end", "nameId", "correlationId", "globalTid"),
            required=("start", "end"),
        ):
            start, end = _times("CUPTI_ACTIVITY_KIND_RUNTIME", start, end)
            call = ApiCall(start, end, _strip_version(text_of(name_id)), tid)
            ex.api_calls.append(call)
            if corr is not None:
                launches[(_pid_of(tid), corr)] = (start, tid, call.name)
                launches.setdefault((None, corr), (start, tid, call.name))

    def launch_of(corr, gpid):
        """(start, thread, name) of the runtime call that enqueued a device activity, else Nones.
        The nodes of a replayed graph all correlate with its cudaGraphLaunch."""
        if corr is None:
            return None, None, None
        return (
            launches.get((_pid_of(gpid), corr)) or launches.get((None, corr)) or (None, None, None)
        )

    _load_kernels_and_copies(conn, tables, ex, text_of, launch_of)


def _load_kernels_and_copies(conn, tables, ex, text_of, launch_of):
    """Kernels, copies, memsets and graphs recorded whole into ex (an absent table: an empty
    list)."""
    ex.kernels = []
    if "CUPTI_ACTIVITY_KIND_KERNEL" in tables:
        cols = set(_columns(conn, "CUPTI_ACTIVITY_KIND_KERNEL"))
        name_col = "demangledName" if "demangledName" in cols else "shortName"
        for start, end, name, corr, gpid in _select(
            conn,
            "CUPTI_ACTIVITY_KIND_KERNEL",
            ("start", "end", name_col, "correlationId", "globalPid"),
            required=("start", "end"),
        ):
            ex.kernels.append(
                Kernel(
                    *_times("CUPTI_ACTIVITY_KIND_KERNEL", start, end),
                    text_of(name) or "?",
                    *launch_of(corr, gpid),
                )
            )

    ex.memcpys = []
    if "CUPTI_ACTIVITY_KIND_MEMCPY" in tables:
        kinds = {}
        if "ENUM_CUDA_MEMCPY_OPER" in tables:
            kinds = {
                i: (n, l)
                for i, n, l in _select(conn, "ENUM_CUDA_MEMCPY_OPER", ("id", "name", "label"))
            }
        htod = next((i for i, (n, _) in kinds.items() if n == "CUDA_MEMCPY_KIND_HTOD"), None)
        if htod is None:
            htod = _FALLBACK_HTOD
        for start, end, kind, nbytes, corr, gpid in _select(
            conn,
            "CUPTI_ACTIVITY_KIND_MEMCPY",
            ("start", "end", "copyKind", "bytes", "correlationId", "globalPid"),
            required=("start", "end", "copyKind"),
        ):
            label = kinds.get(kind, (None, None))[1] or {htod: "Host-to-Device"}.get(
                kind, "kind %s" % kind
            )
            ex.memcpys.append(
                Memcpy(
                    *_times("CUPTI_ACTIVITY_KIND_MEMCPY", start, end),
                    label,
                    kind == htod,
                    _bytes("CUPTI_ACTIVITY_KIND_MEMCPY", nbytes),
                    *launch_of(corr, gpid)[:2],
                )
            )

    ex.memsets = []
    if "CUPTI_ACTIVITY_KIND_MEMSET" in tables:
        ex.memsets = [
            Memset(
                *_times("CUPTI_ACTIVITY_KIND_MEMSET", st, e),
                _bytes("CUPTI_ACTIVITY_KIND_MEMSET", b),
                *launch_of(corr, gpid)[:2],
            )
            for st, e, b, corr, gpid in _select(
                conn,
                "CUPTI_ACTIVITY_KIND_MEMSET",
                ("start", "end", "bytes", "correlationId", "globalPid"),
                required=("start", "end"),
            )
        ]

    ex.graphs = []
    if _GRAPH_TRACE in tables:
        # CUPTI gives 0 for both times of a graph it could not time: no interval to count.
        ex.graphs = [
            GraphExec(*_times(_GRAPH_TRACE, st, e), graph_id, *launch_of(corr, gpid))
            for st, e, graph_id, corr, gpid in _select(
                conn,
                _GRAPH_TRACE,
                ("start", "end", "graphId", "correlationId", "globalPid"),
                required=("start", "end"),
            )
            if st or e
        ]
