"""Cross-rank analysis of a data-parallel capture, one nsys export per rank: NCCL kernels per step,
exposed communication, stragglers, and every rank's checks (rank_comm() per export, then
compute_ranks()).

Every number here comes from one rank's own export and clock; nothing compares timestamps of two
exports. Each rank's nsys has its own session clock (times count from that nsys's session start), so
absolute times of two exports differ by the nsys start skew even on one machine, and by clock
offsets across hosts. Cross-rank comparisons use step-relative offsets (host) and per-step kernel
durations (device) instead.
"""

import re
from collections import OrderedDict
from typing import List, NamedTuple, Optional

from .export import AnalysisError
from .intervals import SpanIndex, ms, union_length
from .records import DATA_LOAD
from .summary import find_window

# NCCL's kernels, as named in libnccl.so.2 2.28: ncclDevKernel_<Coll>_<Op>_<type>_<algo>_<proto>
# (`ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)`,
# ncclDevKernel_Generic) and ncclSymkDevKernel_... (symmetric memory); older releases used
# ncclKernel_.... They are not templates, so their demangled names carry no return type; the
# optional `void ` covers a demangler that prints one. Without a demangled name the export's short
# name (the same prefix) is used.
NCCL_KERNEL = re.compile(r"^(?:void\s+)?nccl")
# A rank named in an export's file name: out/run.rank3.sqlite (profile.sh's PREFIX.rank<r>).
_RANK_IN_NAME = re.compile(r"\.rank(\d+)(?:\.sqlite)?$")


def is_nccl_kernel(name):
    """True for a kernel NCCL launched: its demangled name starts with `nccl` (after an optional
    `void `). c10d's own kernels on NCCL's streams (bucket copies, scaling) are compute kernels, not
    NCCL ones.
    """
    return bool(NCCL_KERNEL.match(name or ""))


class RankComm(NamedTuple):
    """What compute_ranks() needs from one rank's export (rank_comm()); ns on that rank's clock.
    Lists are per captured step (torch_step ranges wholly inside the capture window, in order).

      nccl_count, nccl_ns  NCCL kernels attributed to the step (launched inside its host span: the
                           runtime call's start, or the kernel's own start when no runtime call
                           correlates), and the sum of their device durations (concurrent NCCL
                           kernels both count)
      nccl_outside_count, nccl_outside_ns
                           NCCL kernels of the export attributed to no captured step (the capture
                           barrier's all-reduce, the drain, warm-up leftovers)
      exposed_ns           time of the window in which an NCCL kernel runs and no other kernel does
                           (union of NCCL kernels minus union of the other kernels, clipped to the
                           window); copies and memsets do not hide communication. None without a
                           window or without CUDA tables
      data_load_end_ns     end of the step's data_load (the last one nested in it, same thread)
                           minus the step's start; None for a step without one
      graphs_whole         CUDA graph replays in the window recorded whole (nsys's default
                           --cuda-graph-trace=graph): their kernels, NCCL's included, are not in the
                           export, so the NCCL counts miss them and exposed_ns is None. With
                           --cuda-graph-trace=node every node is a kernel correlated with its
                           cudaGraphLaunch and is attributed to the step that launched the replay
    """

    rank: int
    export: Optional[str]
    steps: int
    window_ns: Optional[int]
    nccl_count: List[int]
    nccl_ns: List[int]
    nccl_outside_count: int
    nccl_outside_ns: int
    exposed_ns: Optional[int]
    data_load_end_ns: List[Optional[int]]
    graphs_whole: int = 0

    @property
    def exposed_pct(self):
        """exposed_ns as a percentage of the capture window; None when either is unknown."""
        if self.exposed_ns is None or not self.window_ns:
            return None
        return round(100.0 * self.exposed_ns / self.window_ns, 6)


class StepStragglers(NamedTuple):
    """One captured step across ranks; lists are in rank order (compute_ranks()'s `ranks`).

    data_load_end_ns  each rank's RankComm.data_load_end_ns of this step
    straggler         the rank whose data_load ended latest after its own step start; None when
                      fewer than two ranks have a data_load in this step or the latest is shared
    spread_ns         latest minus earliest of data_load_end_ns (None with fewer than two)
    nccl_ns           each rank's NCCL kernel time in this step
    waited_ns         each rank's nccl_ns beyond the smallest: how long its all-reduces waited for
                      the last rank to join (a rank that arrives early sees its NCCL kernels run
                      longer)
    fastest_nccl      the rank with the smallest nccl_ns (the one the others waited for); None when
                      no rank ran an NCCL kernel in this step or the smallest is shared
    agrees            straggler == fastest_nccl: the host-side and the device-side evidence name the
                      same rank; None when either is None
    """

    step: int
    data_load_end_ns: List[Optional[int]]
    straggler: Optional[int]
    spread_ns: Optional[int]
    nccl_ns: List[int]
    waited_ns: List[int]
    fastest_nccl: Optional[int]
    agrees: Optional[bool]


def rank_label(export_path, report, position):
    """The rank of an export: the `.rank<r>` in its file name, else its position among the exports.
    A run report's dist.rank must agree (AnalysisError otherwise: exports and reports given in
    different orders).
    """
    m = _RANK_IN_NAME.search(export_path or "")
    label = int(m.group(1)) if m else position
    dist = (report or {}).get("dist")
    if (
        isinstance(dist, dict)
        and isinstance(dist.get("rank"), int)
        and not isinstance(dist.get("rank"), bool)
    ):
        if dist["rank"] != label:
            raise AnalysisError(
                "expected the run report of rank %d for %s, got rank %d's (give the reports "
                "in the exports' order)" % (label, export_path, dist["rank"])
            )
    return label


def rank_comm(rank, ex):
    """RankComm of one rank's Export (export.load_export())."""
    window = find_window(ex.ranges)
    steps = window.steps
    step_index = SpanIndex(steps)
    count, total = [0] * len(steps), [0] * len(steps)
    out_count = out_ns = 0
    nccl, other = [], []
    for k in ex.kernels or ():
        if not is_nccl_kernel(k.name):
            other.append((k.start, k.end))
            continue
        nccl.append((k.start, k.end))
        i = step_index.index_of(k.launch_ns if k.launch_ns is not None else k.start)
        if i is None:
            out_count += 1
            out_ns += k.end - k.start
        else:
            count[i] += 1
            total[i] += k.end - k.start
    exposed = None
    whole = 0
    if window.lo is not None:
        whole = sum(1 for g in ex.graphs or () if g.end > window.lo and g.start < window.hi)
    if ex.device_data and window.lo is not None and window.hi > window.lo and not whole:
        exposed = union_length(nccl + other, window.lo, window.hi) - union_length(
            other, window.lo, window.hi
        )

    loads = [r for r in ex.ranges if r.name == DATA_LOAD]
    ends = []
    for st in steps:
        inner = [r.end for r in loads if st.contains(r)]
        ends.append(max(inner) - st.start if inner else None)
    return RankComm(
        rank,
        ex.path,
        len(steps),
        None if window.lo is None else window.hi - window.lo,
        count,
        total,
        out_count,
        out_ns,
        exposed,
        ends,
        whole,
    )


def step_stragglers(comms):
    """StepStragglers for each step every rank captured (the first min(steps) steps), from RankComms
    in rank order.

    Which rank is late is judged on the host, step-relative: the data_load end's offset from the
    start of that rank's own torch_step k. It needs no common clock (see the module docstring) and
    measures what a rank's input cost it inside the step; a rank whose loader delivered late
    launches its backward, and so its all-reduces, late. How much that cost the others is judged on
    the device: each rank's NCCL kernel time in step k beyond the fastest rank's (an all-reduce
    kernel starts when its rank launches it and ends when the last rank has joined). `agrees` says
    whether both name the same rank; when the host runs steps ahead of the device, the host offsets
    say little and the waits are the evidence to read.
    """
    out = []
    for k in range(min((c.steps for c in comms), default=0)):
        ends = [c.data_load_end_ns[k] for c in comms]
        present = [(e, c.rank) for e, c in zip(ends, comms) if e is not None]
        straggler = spread = None
        if len(present) >= 2:
            latest = max(e for e, _ in present)
            spread = latest - min(e for e, _ in present)
            late = [r for e, r in present if e == latest]
            straggler = late[0] if len(late) == 1 else None
        nccl = [c.nccl_ns[k] for c in comms]
        low = min(nccl)
        fastest = comms[nccl.index(low)].rank if any(nccl) and nccl.count(low) == 1 else None
        agrees = None if straggler is None or fastest is None else straggler == fastest
        out.append(
            StepStragglers(
                k, ends, straggler, spread, nccl, [n - low for n in nccl], fastest, agrees
            )
        )
    return out


def compute_ranks(comms, summaries, reports=None):
    """ranks.json's numbers from each rank's RankComm, summary (summary.compute_summary()) and run
    report (None where none was given), all in rank order. Times in ms; lists under `stragglers`
    follow `ranks`.

      per_rank          per rank: its steps and window, NCCL kernels per step (count, ms) and
                        outside the captured steps, exposed communication (ms and % of the window),
                        the graph replays recorded whole (RankComm.graphs_whole), data_load
                        end offsets per step, how often it was the straggler, the wait its lateness
                        caused the others in total (sum of their waited_ms in the steps it was the
                        straggler), its own total waited_ms, whether its checks all passed, and its
                        run report's dist section when there is one
      steps_compared    steps compared across ranks (the smallest step count)
      stragglers        StepStragglers per compared step (step_stragglers())
      checks            every rank's checks as `rank<r>.<check>`; same_step_count: every rank
                        captured the same number of torch_step ranges in its window;
                        nccl_kernels_visible: no rank recorded a graph replay whole (its NCCL
                        kernels would be missing)
    """
    reports = reports or [None] * len(comms)
    ranks = [c.rank for c in comms]
    strag = step_stragglers(comms)
    out: OrderedDict[str, object] = OrderedDict()
    out["ranks"] = ranks
    out["exports"] = [c.export for c in comms]
    out["steps"] = [c.steps for c in comms]
    out["steps_compared"] = len(strag)
    per_rank = []
    for i, (c, s, rep) in enumerate(zip(comms, summaries, reports)):
        row = OrderedDict(
            rank=c.rank, export=c.export, steps=c.steps, capture_window_ms=ms(c.window_ns)
        )
        row["nccl_kernels"] = sum(c.nccl_count)
        row["nccl_ms"] = ms(sum(c.nccl_ns))
        row["nccl_kernels_per_step"] = list(c.nccl_count)
        row["nccl_ms_per_step"] = [ms(n) for n in c.nccl_ns]
        row["nccl_kernels_outside_steps"] = c.nccl_outside_count
        row["nccl_ms_outside_steps"] = ms(c.nccl_outside_ns)
        row["exposed_comm_ms"] = ms(c.exposed_ns)
        row["exposed_comm_pct"] = c.exposed_pct
        row["data_load_end_ms"] = [ms(e) for e in c.data_load_end_ns]
        row["straggler_steps"] = sum(1 for st in strag if st.straggler == c.rank)
        row["caused_wait_ms"] = ms(
            sum(
                sum(w for j, w in enumerate(st.waited_ns) if j != i)
                for st in strag
                if st.straggler == c.rank
            )
        )
        row["waited_ms"] = ms(sum(st.waited_ns[i] for st in strag))
        row["graph_replays_recorded_whole"] = c.graphs_whole
        row["all_checks_pass"] = s["all_checks_pass"]
        dist = (rep or {}).get("dist")
        if isinstance(dist, dict):
            row["dist"] = dist
        per_rank.append(row)
    out["per_rank"] = per_rank
    out["stragglers"] = [
        OrderedDict(
            step=st.step,
            straggler=st.straggler,
            spread_ms=ms(st.spread_ns),
            data_load_end_ms=[ms(e) for e in st.data_load_end_ns],
            nccl_ms=[ms(n) for n in st.nccl_ns],
            waited_ms=[ms(w) for w in st.waited_ns],
            fastest_nccl=st.fastest_nccl,
            agrees=st.agrees,
        )
        for st in strag
    ]

    checks, details = OrderedDict(), OrderedDict()
    counts = [c.steps for c in comms]
    checks["same_step_count"] = len(set(counts)) == 1
    details["same_step_count"] = "torch_step ranges in each rank's window: %s" % ", ".join(
        "rank %d: %d" % (r, n) for r, n in zip(ranks, counts)
    )
    whole = [(c.rank, c.graphs_whole) for c in comms if c.graphs_whole]
    checks["nccl_kernels_visible"] = not whole
    details["nccl_kernels_visible"] = (
        "every NCCL kernel of the windows is in the exports (eager launches, or graph replays "
        "traced node by node)"
        if not whole
        else "%s recorded whole (nsys --cuda-graph-trace=graph): the NCCL kernels inside them are "
        "not in the export, so NCCL time, exposed communication and the waits are not known; "
        "capture with nsys --cuda-graph-trace=node (scripts/profile.sh adds it for --cuda-graph)"
        % ", ".join("rank %d: %d graph replay(s)" % w for w in whole)
    )
    for r, s in zip(ranks, summaries):
        for name, value in s["checks"].items():
            checks["rank%d.%s" % (r, name)] = value
            details["rank%d.%s" % (r, name)] = s["check_details"][name]
    out["checks"] = checks
    out["check_details"] = details
    out["all_checks_pass"] = all(v is True for v in checks.values())
    return out
