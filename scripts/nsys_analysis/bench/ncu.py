"""Nsight Compute output of `benchmarks.py ncu`: its raw CSV page read into rows, the rows grouped
by kernel kind with time-weighted speed-of-light percentages."""

import csv
from typing import TypedDict

from ..capture.kernels import short_kernel_label

# Per-kernel metrics of `benchmarks.py ncu` (Nsight Compute's speed-of-light section, in raw form).
NCU_METRICS = (
    "gpu__time_duration.sum",
    "dram__bytes.sum",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
)


def parse_ncu_csv(text):
    """Rows of `ncu --csv --page raw --print-units base` output: [{column: value}], numbers as
    float. Lines that are not CSV records (the program's own output, ==PROF== notes) are skipped;
    the units row that follows the header is dropped."""
    lines = [line for line in text.splitlines() if line.startswith('"')]
    rows = list(csv.reader(lines))
    if not rows:
        return []
    header, out = rows[0], []
    for r in rows[1:]:
        if len(r) != len(header) or r == header:
            continue
        fields = dict(zip(header, r))
        if fields.get("ID", "").strip() == "" or not fields["ID"].strip().isdigit():
            continue  # the units row
        # The record: the text of every column, the metrics' numbers in place of theirs.
        rec: dict[str, str | float | None] = dict(fields)
        for m in NCU_METRICS:
            if m in fields:
                try:
                    rec[m] = float(fields[m].replace(",", ""))
                except ValueError:
                    rec[m] = None
        out.append(rec)
    return out


class _Group(TypedDict):
    """group_ncu()'s sums for one kernel kind: w holds each percentage metric times the time."""

    launches: int
    ns: float
    bytes: float
    w: dict[str, float]


def group_ncu(rows):
    """Per kernel kind (nsys_analysis.capture.kernels.short_kernel_label): launches, time, DRAM
    traffic and the time-weighted speed-of-light percentages. Largest total time first."""
    groups: dict[str, _Group] = {}
    for r in rows:
        name = r.get("Kernel Name") or r.get("Function Name") or "?"
        t = r.get("gpu__time_duration.sum") or 0.0
        g = groups.setdefault(
            short_kernel_label(name), {"launches": 0, "ns": 0.0, "bytes": 0.0, "w": {}}
        )
        g["launches"] += 1
        g["ns"] += t
        g["bytes"] += r.get("dram__bytes.sum") or 0.0
        for m in NCU_METRICS[2:]:
            if r.get(m) is not None:
                g["w"][m] = g["w"].get(m, 0.0) + r[m] * t
    total = sum(g["ns"] for g in groups.values()) or 1.0
    out = []
    for label, g in sorted(groups.items(), key=lambda kv: -kv[1]["ns"]):
        ns = g["ns"] or 1.0
        out.append(
            {
                "kind": label,
                "launches": g["launches"],
                "total_ms": g["ns"] / 1e6,
                "pct_of_time": 100.0 * g["ns"] / total,
                "dram_gb_per_s": g["bytes"] / ns,
                "memory_sol_pct": g["w"].get(NCU_METRICS[2], 0.0) / ns,
                "sm_sol_pct": g["w"].get(NCU_METRICS[3], 0.0) / ns,
                "dram_pct": g["w"].get(NCU_METRICS[4], 0.0) / ns,
            }
        )
    return out
