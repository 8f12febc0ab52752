"""Named records of one Nsight Systems export and the NVTX range names the workload emits."""

from typing import List, NamedTuple, Optional

# Range names the workload emits (an interface: lib/ and seed_workload.py use the same vocabulary).
STEP = "torch_step"
WINDOW = "capture_window"


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


class Window(NamedTuple):
    """The capture window (find_window()) and the torch_step ranges in and outside it. lo and hi are None
    when the export has neither a capture_window nor a torch_step range."""
    lo: Optional[int]
    hi: Optional[int]
    source: Optional[str]      # how the window was found, as summary.json's capture_window_source says
    ranges: List[Range]        # the capture_window ranges
    all_steps: List[Range]     # every default-domain torch_step range, by start
    steps: List[Range]         # those lying wholly inside the window
    outside: List[Range]       # the others

    def holds(self, r):
        """True when range r lies wholly inside the window (always, when there is no window)."""
        return self.lo is None or (self.lo <= r.start and r.end <= self.hi)
