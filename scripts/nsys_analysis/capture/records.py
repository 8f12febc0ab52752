"""Named records of one Nsight Systems export and the NVTX range names the workload emits.

Times are nanoseconds on nsys's session clock. launch_ns / launch_tid name the CUDA runtime call
that enqueued a device activity (None when no runtime record correlates with it).
"""

from dataclasses import dataclass, field
from typing import Dict, List, NamedTuple, Optional, Sequence, Union, cast

# Range names the workload emits (an interface: lib/instrument/nvtx.h,
# data_pipeline/nvtx_domain.h and seed_workload.py use the same vocabulary;
# tests/scripts/nsys_analysis/capture/test_records.py checks them against the C++ headers).
STEP = "torch_step"
WINDOW = "capture_window"
# Inside a torch_step, on the main thread: the step-level phases (loss_item with --sync-every-step),
# and the ranges nested in data_load.
DATA_LOAD = "data_load"
BATCH_WAIT = "batch_wait"
H2D_SUBMIT = "h2d_submit"
NORMALIZE = "normalize"
FORWARD = "forward"
ZERO_GRAD = "zero_grad"
BACKWARD = "backward"
OPTIMIZER_STEP = "optimizer_step"
LOSS_ITEM = "loss_item"
# Between steps: the loader's iterator rebuilt at an epoch's end.
ITERATOR_RESET = "iterator_reset"
# Where the host waits on the input pipeline: an idle gap that began in one of these was the
# loader's or the copies' (summary input_starved).
INPUT_PIPELINE_RANGES = (DATA_LOAD, BATCH_WAIT, H2D_SUBMIT, NORMALIZE, ITERATOR_RESET)
# train_resnet50 --epochs: an epoch's end, between torch_step ranges on the main thread (siblings of
# torch_step in capture_window): the evaluation pass, eval { eval_step { batch_wait, h2d_submit,
# [normalize], forward }..., eval_reduce (the pass's one device sync) }, then the checkpoint
# written. Neither is a training step, and the training loop's names inside eval_step are no
# training phases.
EVAL = "eval"
EVAL_STEP = "eval_step"
EVAL_REDUCE = "eval_reduce"
CHECKPOINT = "checkpoint"
# The epoch boundary's top-level ranges (epochs.boundary_ranges()), and every range name of its own.
BOUNDARY_RANGES = (EVAL, CHECKPOINT)
BOUNDARY_NAMES = (EVAL, EVAL_STEP, EVAL_REDUCE, CHECKPOINT)
# The C++ loader's NVTX domain (data_pipeline/nvtx_domain.h): its ranges sit on worker threads (and
# on the GPU decode stage's thread), never on the main thread.
LOADER_DOMAIN = "data_pipeline"
# train_resnet50 --inject-stall: the drain and the sleep of a known-answer stall, on the main
# thread.
STALL_DOMAIN = "inject_stall"
# The GPU decode stage's ranges (--decode gpu), on its own thread in LOADER_DOMAIN.
GPU_STAGE_RANGES = ("gpu_decode", "decode_fallback", "resize_normalize")
# train_resnet50 --cuda-graph: the step range that launches the captured graph, and the runtime call
# (version suffix stripped) that enqueues a graph; with nsys --cuda-graph-trace=node each node's
# kernel correlates with that call.
GRAPH_REPLAY = "graph_replay"
GRAPH_LAUNCH = "cudaGraphLaunch"


class Range(NamedTuple):
    """One closed NVTX range. domain is None for NVTX's default domain."""

    name: str
    start: int
    end: int
    tid: Optional[int] = None
    domain: Optional[str] = None

    @property
    def duration(self):
        return self.end - self.start

    def contains(self, other):
        """True when other lies inside this range, on the same thread when both threads are
        known."""
        if self.tid is not None and other.tid is not None and self.tid != other.tid:
            return False
        return self.start <= other.start and other.end <= self.end


class Kernel(NamedTuple):
    """One kernel execution; name is the demangled name (the short name when nsys has none).
    launch_api names the runtime call that enqueued it (cudaLaunchKernel, cudaGraphLaunch for a node
    of a replayed graph, ...; without nsys's version suffix), None when uncorrelated."""

    start: int
    end: int
    name: str
    launch_ns: Optional[int]
    launch_tid: Optional[int]
    launch_api: Optional[str] = None


class Memcpy(NamedTuple):
    """One memory copy; label is nsys's copy-kind label ("Host-to-Device", ...)."""

    start: int
    end: int
    label: str
    is_htod: bool
    nbytes: int
    launch_ns: Optional[int]
    launch_tid: Optional[int]

    @property
    def operation(self):
        """The name of its row in summary.json's memory_operations and of a gap it ends."""
        return "[memcpy %s]" % self.label


class Memset(NamedTuple):
    """One memset."""

    start: int
    end: int
    nbytes: int
    launch_ns: Optional[int]
    launch_tid: Optional[int]

    @property
    def operation(self):
        """The name of its row in summary.json's memory_operations and of a gap it ends."""
        return "[memset]"


class GraphExec(NamedTuple):
    """One execution of a CUDA graph that nsys recorded whole (CUPTI_ACTIVITY_KIND_GRAPH_TRACE: a
    capture without --cuda-graph-trace=node, whose graph nodes have no kernel, copy or memset
    records): from its first node's start to its last node's end on the device. launch_*: its
    cudaGraphLaunch."""

    start: int
    end: int
    graph_id: Optional[int]
    launch_ns: Optional[int]
    launch_tid: Optional[int]
    launch_api: Optional[str] = None

    @property
    def operation(self):
        """Its name where a table names device activities (the one that ends an idle gap)."""
        return "[CUDA graph]" if self.graph_id is None else "[CUDA graph %d]" % self.graph_id


# Any one device activity (Export.device_activities()).
DeviceActivity = Union[Kernel, Memcpy, Memset, GraphExec]


class ApiCall(NamedTuple):
    """One CUDA runtime call; name without nsys's version suffix (cudaStreamSynchronize)."""

    start: int
    end: int
    name: str
    tid: Optional[int]


class Overhead(NamedTuple):
    """One row of nsys's PROFILER_OVERHEAD table: time the profiler itself took on a thread ("CUPTI
    Buffer flush", "TLS allocation", "CUDA profiling data flush on cudaProfilerStop", ...)."""

    start: int
    end: int
    name: str
    tid: Optional[int]


@dataclass
class Export:
    """What analysis needs from one export, read once by export.load_export(). Device lists are None
    when the export has no CUDA trace at all (device_data False); an absent table of a CUDA-traced
    export is an empty list. api_calls is None when the export has no runtime table. thread_names:
    globalTid -> the thread's name (nsys's ThreadNames; empty without that table); profiler_overhead
    None when the export has no PROFILER_OVERHEAD table."""

    path: Optional[str] = None
    nsys_version: Optional[str] = None
    ranges: List[Range] = field(default_factory=list)  # default-domain ranges
    other_ranges: List[Range] = field(default_factory=list)  # ranges of named domains
    unterminated: int = 0
    device_data: bool = False
    kernels: Optional[List[Kernel]] = None
    memcpys: Optional[List[Memcpy]] = None
    memsets: Optional[List[Memset]] = None
    graphs: Optional[List[GraphExec]] = None
    api_calls: Optional[List[ApiCall]] = None
    thread_names: Dict[int, str] = field(default_factory=dict)
    profiler_overhead: Optional[List[Overhead]] = None

    def thread_name(self, tid):
        """A thread's name from ThreadNames, else "tid N" with N the OS thread id (GlobalId's low 24
        bits)."""
        if tid in self.thread_names:
            return self.thread_names[tid]
        return "tid ?" if tid is None else "tid %d" % (tid & 0xFFFFFF)

    def device_activities(self):
        """Every kernel, copy, memset and graph execution recorded whole, in that order; empty
        without device data. What the device ran: a graph's nodes appear either as kernels, copies
        and memsets (nsys --cuda-graph-trace=node) or as its GraphExec, never both."""
        if not self.device_data:
            return []
        # device_data True means kernels, memcpys and memsets are lists (load_export() sets all
        # three), which their Optional types cannot say.
        device_lists = cast(
            "tuple[Sequence[DeviceActivity], ...]",
            (self.kernels, self.memcpys, self.memsets, self.graphs or ()),
        )
        return [op for ops in device_lists for op in ops]

    def device_intervals(self):
        """(start, end) of every device activity (device_activities())."""
        return [(op.start, op.end) for op in self.device_activities()]


class Window(NamedTuple):
    """The capture window (summary.find_window()) and the torch_step ranges in and outside it. lo
    and hi are None when the export has neither a capture_window nor a torch_step range."""

    lo: Optional[int]
    hi: Optional[int]
    source: Optional[str]  # how the window was found, as summary.json's capture_window_source says
    ranges: List[Range]  # the capture_window ranges
    all_steps: List[Range]  # every default-domain torch_step range, by start
    steps: List[Range]  # those lying wholly inside the window
    outside: List[Range]  # the others
    boundary: Sequence[
        Range
    ] = ()  # the epoch boundary's eval and checkpoint ranges in the window, by start

    def holds(self, r):
        """True when range r lies wholly inside the window (always, when there is no window)."""
        return self.lo is None or (self.lo <= r.start and r.end <= self.hi)
