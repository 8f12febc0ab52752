"""One capture's figures: 1-3, 5 and 6, and the ranks figure of a data-parallel capture (matplotlib,
Agg backend). The sweep's figures 4 and 5 are sweep.figures'."""

from ..common.plotting import (
    COPY_COLOR,
    GAP_COLOR,
    GRAPH_COLOR,
    H2D_COLOR,
    HOST_COLOR,
    INPUT_COLOR,
    KERNEL_COLOR,
    MEMSET_COLOR,
    SEED_COLORS,
    require_matplotlib,
    save_figure,
)
from .epochs import is_boundary_name
from .intervals import merged_gaps
from .records import (
    BACKWARD,
    BATCH_WAIT,
    DATA_LOAD,
    FORWARD,
    GRAPH_REPLAY,
    H2D_SUBMIT,
    ITERATOR_RESET,
    LOSS_ITEM,
    OPTIMIZER_STEP,
    STEP,
    WINDOW,
    ZERO_GRAD,
)

# Ranges that enclose the phases, left out of figure 1.
ENCLOSING = (STEP, WINDOW)
# Nested input ranges and the range that contains them, for figure 1's hatching.
NESTED_IN = {BATCH_WAIT: DATA_LOAD, H2D_SUBMIT: DATA_LOAD}
# The input side's ranges, in figure 1's input colour.
INPUT_RANGES = (DATA_LOAD, BATCH_WAIT, H2D_SUBMIT, ITERATOR_RESET)


def plot_phase_totals(s, path, title_suffix=""):
    """Figure 1: total duration of each phase range (torch_step and capture_window excluded, and the
    epoch boundary's eval and checkpoint ranges, summary.md's "Epoch boundary")."""
    plt = require_matplotlib()
    phases = [
        p for p in s["phases"] if p["name"] not in ENCLOSING and not is_boundary_name(p["name"])
    ]
    fig, ax = plt.subplots(figsize=(8.5, 0.45 * max(len(phases), 3) + 1.4))
    names = [p["name"] for p in phases][::-1]
    totals = [p["total_ms"] for p in phases][::-1]
    colors = [INPUT_COLOR if n in INPUT_RANGES else HOST_COLOR for n in names]
    bars = ax.barh(range(len(names)), totals, color=colors, height=0.65)
    for bar, n in zip(bars, names):
        if n in NESTED_IN:
            bar.set_hatch("///")
            bar.set_edgecolor("white")
    ax.set_yticks(range(len(names)))
    ax.set_yticklabels(["%s (in %s)" % (n, NESTED_IN[n]) if n in NESTED_IN else n for n in names])
    top = max(totals, default=1) or 1
    for i, p in enumerate(phases[::-1]):
        ax.text(
            p["total_ms"] + top * 0.01,
            i,
            "%.1f ms  (%d range%s, max %.1f)"
            % (p["total_ms"], p["count"], "" if p["count"] == 1 else "s", p["max_ms"]),
            va="center",
            fontsize=8.5,
        )
    ax.set_xlim(0, top * 1.35)
    ax.set_xlabel("total range duration (ms, host time)")
    ax.set_title(
        "NVTX phase ranges across %d profiled step%s%s"
        % (s["steps"], "" if s["steps"] == 1 else "s", title_suffix)
    )
    ax.grid(axis="x", alpha=0.3)
    fig.text(
        0.01,
        -0.02,
        "Host range durations, not exclusive GPU work; hatched ranges nest inside data_load.",
        fontsize=8,
        color="#555555",
    )
    return save_figure(fig, path)


# Figure 6's colours per step-level phase; other phases take SEED_COLORS in turn.
PHASE_COLORS = {
    DATA_LOAD: INPUT_COLOR,
    FORWARD: HOST_COLOR,
    ZERO_GRAD: "#999999",
    BACKWARD: KERNEL_COLOR,
    OPTIMIZER_STEP: H2D_COLOR,
    LOSS_ITEM: MEMSET_COLOR,
    GRAPH_REPLAY: GRAPH_COLOR,
}


def plot_gpu_phases(s, path, title_suffix=""):
    """Figure 6, the device-side counterpart of figure 1: per captured step, the GPU time of the
    work launched in each step-level phase (summary gpu_time_by_phase_per_step_ms), stacked; dots
    mark the step's host time (torch_step)."""
    plt = require_matplotlib()
    per_step = s.get("gpu_time_by_phase_per_step_ms") or {}
    totals = s.get("gpu_time_by_phase_ms") or {}
    n = s["steps"] if per_step else 0
    fig, ax = plt.subplots(figsize=(9, 4.2))
    if not n:
        ax.text(
            0.5,
            0.5,
            "no device data" if s.get("gpu_time_by_phase_ms") is None else "no captured steps",
            transform=ax.transAxes,
            ha="center",
            color="#555555",
        )
    else:
        grand = s.get("gpu_time_total_ms") or 0
        bottom, handles = [0.0] * n, []
        spare = iter(SEED_COLORS[4:] + SEED_COLORS[:4])
        for name, vals in per_step.items():
            vals = [v or 0.0 for v in vals]
            label = "%s: %.1f ms%s" % (
                name,
                totals.get(name, sum(vals)),
                " (%.0f%%)" % (100.0 * totals.get(name, 0) / grand) if grand else "",
            )
            handles.append(
                ax.bar(
                    range(n),
                    vals,
                    bottom=bottom,
                    width=0.75,
                    label=label,
                    color=PHASE_COLORS.get(name) or next(spare, "#cccccc"),
                )
            )
            bottom = [b + v for b, v in zip(bottom, vals)]
        handles.reverse()  # the legend lists the phases top of the stack first
        host = s.get("step_ms") or []
        if len(host) != n:
            host = []
        if host:
            handles.append(
                ax.scatter(
                    range(n),
                    host,
                    color="black",
                    s=10 if n > 16 else 18,
                    zorder=3,
                    label="%s (host time)" % STEP,
                )
            )
        ax.set_xticks(range(n) if n <= 16 else range(0, n, max(1, n // 16)))
        ax.set_ylim(0, max(bottom + list(host)) * 1.12 or 1)
        ax.legend(
            handles=handles,
            fontsize=8,
            loc="center left",
            bbox_to_anchor=(1.01, 0.5),
            frameon=False,
        )
    ax.set_xlabel("captured step (0 = first)")
    ax.set_ylabel("GPU time (ms, device)")
    ax.set_title("GPU time of the work launched in each phase, per step%s" % title_suffix)
    ax.grid(axis="y", alpha=0.3)
    # Buckets of no step: phases.OTHER_BUCKETS, and the epoch boundary's eval and checkpoint.
    left = [(k, totals[k]) for k in totals if k not in per_step and totals[k]]
    fig.text(
        0.01,
        -0.02,
        "Kernels, copies and memsets charged to the main thread's phase in which their runtime "
        "call started, from any thread (backward's come from autograd's).%s"
        % (" Not shown: " + ", ".join("%s %.1f ms" % kv for kv in left) + "." if left else ""),
        fontsize=8,
        color="#555555",
    )
    return save_figure(fig, path)


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
        ax.text(
            k["total_ms"] + top * 0.01,
            i,
            "%.1f ms, %d launches" % (k["total_ms"], k["launches"]),
            va="center",
            fontsize=8.5,
        )
    ax.set_xlim(0, top * 1.32)
    ax.set_xlabel("total kernel time (ms, GPU)")
    ax.set_title("Largest kernel groups by demangled name%s" % title_suffix)
    ax.grid(axis="x", alpha=0.3)
    if not ks:
        ax.text(0.5, 0.5, "no kernels in this export", transform=ax.transAxes, ha="center")
    fig.text(
        0.01,
        -0.02,
        "Each bar is one demangled name; #n ranks implementations sharing a short label. "
        "Not operation-family totals.",
        fontsize=8,
        color="#555555",
    )
    return save_figure(fig, path)


def plot_timeline(s, ex, path, title_suffix=""):
    """Figure 3: first captured step to the last device operation; host rows above device lanes."""
    plt = require_matplotlib()
    from matplotlib.patches import Patch
    from matplotlib.lines import Line2D

    steps = sorted((r for r in ex.ranges if r.name == STEP), key=lambda r: r.start)
    fig, ax = plt.subplots(figsize=(11, 4.2))
    if not steps:
        ax.text(0.5, 0.5, "no torch_step ranges", transform=ax.transAxes, ha="center")
        return save_figure(fig, path)
    t0 = steps[0].start
    device = ex.device_intervals()
    t_end = max([b for _, b in device if b >= t0] + [steps[-1].end])

    def bars(items):
        return [((a - t0) / 1e6, max((b - a) / 1e6, 0)) for a, b in items if b >= t0 and a <= t_end]

    lanes = [STEP, DATA_LOAD, "kernels", "memcpy", "memset"]
    y = {name: len(lanes) - 1 - i for i, name in enumerate(lanes)}
    h = 0.6
    # Gaps with no device activity, shaded behind the device lanes.
    span_ms = (t_end - t0) / 1e6
    shaded = 0
    if ex.device_data:
        for a, b in merged_gaps(device, t0, t_end):
            if (b - a) / 1e6 >= span_ms * 0.001:
                ax.axvspan(
                    (a - t0) / 1e6, (b - t0) / 1e6, ymin=0, ymax=0.6, color=GAP_COLOR, zorder=0
                )
                shaded += 1
    for i, st in enumerate(steps):
        ax.broken_barh(
            bars([(st.start, st.end)]),
            (y[STEP] - h / 2, h),
            facecolors=HOST_COLOR if i % 2 == 0 else "#7b9bd0",
            edgecolor="white",
            linewidth=0.6,
        )
    ax.broken_barh(
        bars((r.start, r.end) for r in ex.ranges if r.name == DATA_LOAD),
        (y[DATA_LOAD] - h / 2, h),
        facecolors=INPUT_COLOR,
        edgecolor=INPUT_COLOR,
        linewidth=0.4,
    )
    if ex.device_data:
        ax.broken_barh(
            bars((k.start, k.end) for k in ex.kernels),
            (y["kernels"] - h / 2, h),
            facecolors=KERNEL_COLOR,
            edgecolor=KERNEL_COLOR,
            linewidth=0.3,
        )
        # Graphs recorded whole (no --cuda-graph-trace=node): their kernels' lane, one bar a replay.
        ax.broken_barh(
            bars((g.start, g.end) for g in ex.graphs or ()),
            (y["kernels"] - h / 2, h),
            facecolors=GRAPH_COLOR,
            edgecolor=GRAPH_COLOR,
            linewidth=0.3,
        )
        ax.broken_barh(
            bars((c.start, c.end) for c in ex.memcpys if c.is_htod),
            (y["memcpy"] - h / 2, h),
            facecolors=H2D_COLOR,
            edgecolor=H2D_COLOR,
            linewidth=0.5,
        )
        ax.broken_barh(
            bars((c.start, c.end) for c in ex.memcpys if not c.is_htod),
            (y["memcpy"] - h / 2, h),
            facecolors=COPY_COLOR,
            edgecolor=COPY_COLOR,
            linewidth=0.5,
        )
        ax.broken_barh(
            bars((m.start, m.end) for m in ex.memsets),
            (y["memset"] - h / 2, h),
            facecolors=MEMSET_COLOR,
            edgecolor=MEMSET_COLOR,
            linewidth=0.3,
        )
    end_ms = (steps[-1].end - t0) / 1e6
    ax.axvline(end_ms, color="black", linestyle="--", linewidth=1)
    ax.annotate(
        "last host step ends",
        xy=(end_ms, len(lanes) - 0.45),
        xytext=(-4, 0),
        textcoords="offset points",
        ha="right",
        va="center",
        fontsize=8.5,
    )
    ax.set_yticks([y[n] for n in lanes])
    ax.set_yticklabels(
        [
            "%s (host)" % STEP,
            "%s (host)" % DATA_LOAD,
            "kernels (GPU)",
            "memcpy (GPU)",
            "memset (GPU)",
        ]
    )
    ax.axhline(2.5, color="#999999", linewidth=0.6)
    ax.set_xlim(0, span_ms * 1.005)
    ax.set_ylim(-0.6, len(lanes) - 0.2)
    ax.set_xlabel("time since the first captured torch_step starts (ms)")
    ax.set_title(
        "Host ranges and recorded GPU activity, first step to last device operation%s"
        % title_suffix
    )
    handles = [
        Patch(color=HOST_COLOR, label=STEP),
        Patch(color=INPUT_COLOR, label=DATA_LOAD),
        Patch(color=KERNEL_COLOR, label="kernel"),
        Patch(color=H2D_COLOR, label="H2D copy"),
        Patch(color=COPY_COLOR, label="other copy"),
        Patch(color=MEMSET_COLOR, label="memset"),
        Line2D([], [], color="black", linestyle="--", label="end of last host step"),
    ]
    if ex.device_data and ex.graphs:
        handles.insert(3, Patch(color=GRAPH_COLOR, label="CUDA graph (recorded whole)"))
    if shaded:
        handles.insert(-1, Patch(color=GAP_COLOR, label="no device activity"))
    ax.legend(
        handles=handles,
        loc="upper center",
        bbox_to_anchor=(0.5, -0.16),
        ncol=8,
        fontsize=8,
        frameon=False,
    )
    return save_figure(fig, path)


def plot_batch_wait(s, path, title_suffix=""):
    """Figure 5 for one capture: time inside batch_wait per step."""
    plt = require_matplotlib()
    waits = s["batch_wait_ms"]
    fig, ax = plt.subplots(figsize=(8, 3.8))
    if not waits or all(w is None for w in waits):
        ax.text(
            0.5, 0.5, "no batch_wait ranges in this capture", transform=ax.transAxes, ha="center"
        )
    else:
        vals = [w or 0 for w in waits]
        ax.bar(range(len(vals)), vals, color=INPUT_COLOR, width=0.7)
        ax.set_xticks(
            range(len(vals)) if len(vals) <= 16 else range(0, len(vals), max(1, len(vals) // 16))
        )
        if s["batch_wait_max_step"] is not None:
            i = s["batch_wait_max_step"]
            ax.annotate(
                "%.2f ms" % vals[i],
                xy=(i, vals[i]),
                xytext=(0, 3),
                textcoords="offset points",
                ha="center",
                fontsize=8.5,
            )
        ax.set_ylim(0, max(vals) * 1.15 or 1)
    ax.set_xlabel("captured step (0 = first)")
    ax.set_ylabel("time inside batch_wait (ms)")
    ax.set_title("Waiting for the next batch, per step%s" % title_suffix)
    ax.grid(axis="y", alpha=0.3)
    return save_figure(fig, path)


def plot_ranks(r, path):
    """The ranks figure of a data-parallel capture (ranks.compute_ranks()'s dict): per captured step
    and rank, the data_load end after the rank's own step start (left) and the NCCL kernel time
    (right; a rank that waits for a late one shows longer NCCL kernels); stragglers marked."""
    plt = require_matplotlib()
    ranks, strag = r["ranks"], r["stragglers"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    if not strag:
        for ax in axes:
            ax.text(
                0.5,
                0.5,
                "no step captured by every rank",
                transform=ax.transAxes,
                ha="center",
                color="#555555",
            )
    steps = [st["step"] for st in strag]
    width = 0.8 / max(len(ranks), 1)
    for j, rank in enumerate(ranks):
        color = SEED_COLORS[j % len(SEED_COLORS)]
        row = r["per_rank"][j]
        ends = [st["data_load_end_ms"][j] for st in strag]
        axes[0].plot(
            steps,
            [float("nan") if v is None else v for v in ends],
            color=color,
            marker="o",
            markersize=4,
            linewidth=1.1,
            label="rank %d" % rank,
        )
        late = [(st["step"], st["data_load_end_ms"][j]) for st in strag if st["straggler"] == rank]
        if late:
            axes[0].scatter(
                *zip(*late), s=90, facecolors="none", edgecolors=color, linewidths=1.5, zorder=3
            )
        axes[1].bar(
            [k + (j - (len(ranks) - 1) / 2) * width for k in steps],
            [st["nccl_ms"][j] for st in strag],
            width=width * 0.95,
            color=color,
            label="rank %d (exposed %s%% of window)"
            % (
                rank,
                "n/a" if row["exposed_comm_pct"] is None else "%.1f" % row["exposed_comm_pct"],
            ),
        )
    axes[0].set_ylabel("data_load end after torch_step start (ms)")
    axes[0].set_title("Input ready, per rank (circled: the step's straggler)")
    axes[1].set_ylabel("NCCL kernel time in the step (ms, GPU)")
    axes[1].set_title("Communication per step and rank")
    for ax in axes:
        ax.set_xlabel("captured step (0 = first)")
        ax.grid(axis="y", alpha=0.3)
        if strag:
            ax.legend(fontsize=8, loc="best", framealpha=0.9)
            if len(steps) <= 16:
                ax.set_xticks(steps)
    fig.text(
        0.01,
        -0.04,
        "Each rank on its own clock: host offsets from its own step start; NCCL time beyond "
        "the fastest rank's is time spent waiting for the last rank.",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout()
    return save_figure(fig, path)
