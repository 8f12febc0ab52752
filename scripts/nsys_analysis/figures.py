"""The article's figures: 1-3, 5 and 6 for one capture, 4 and 5 for a sweep, the ranks figure of a data-parallel
capture (matplotlib, Agg backend)."""

import sys

from .intervals import merged_gaps
from .phases import OTHER_BUCKETS
from .records import (BACKWARD, BATCH_WAIT, DATA_LOAD, FORWARD, GRAPH_REPLAY, H2D_SUBMIT, ITERATOR_RESET,
                      LOSS_ITEM, OPTIMIZER_STEP, STEP, WINDOW, ZERO_GRAD)

# Ranges that enclose the phases, left out of figure 1.
ENCLOSING = (STEP, WINDOW)
# Nested input ranges and the range that contains them, for figure 1's hatching.
NESTED_IN = {BATCH_WAIT: DATA_LOAD, H2D_SUBMIT: DATA_LOAD}
# The input side's ranges, in figure 1's input colour.
INPUT_RANGES = (DATA_LOAD, BATCH_WAIT, H2D_SUBMIT, ITERATOR_RESET)

HOST_COLOR = "#4c72b0"
INPUT_COLOR = "#dd8452"
KERNEL_COLOR = "#55a868"
H2D_COLOR = "#c44e52"
COPY_COLOR = "#8172b3"
MEMSET_COLOR = "#937860"
GRAPH_COLOR = "#6a3d9a"
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


# Figure 6's colours per step-level phase; other phases take SEED_COLORS in turn.
PHASE_COLORS = {DATA_LOAD: INPUT_COLOR, FORWARD: HOST_COLOR, ZERO_GRAD: "#999999", BACKWARD: KERNEL_COLOR,
                OPTIMIZER_STEP: H2D_COLOR, LOSS_ITEM: MEMSET_COLOR, GRAPH_REPLAY: GRAPH_COLOR}


def plot_gpu_phases(s, path, title_suffix=""):
    """Figure 6, the device-side counterpart of figure 1: per captured step, the GPU time of the work
    launched in each step-level phase (summary gpu_time_by_phase_per_step_ms), stacked; dots mark the
    step's host time (torch_step)."""
    plt = require_matplotlib()
    per_step = s.get("gpu_time_by_phase_per_step_ms") or {}
    totals = s.get("gpu_time_by_phase_ms") or {}
    n = s["steps"] if per_step else 0
    fig, ax = plt.subplots(figsize=(9, 4.2))
    if not n:
        ax.text(0.5, 0.5, "no device data" if s.get("gpu_time_by_phase_ms") is None else "no captured steps",
                transform=ax.transAxes, ha="center", color="#555555")
    else:
        grand = s.get("gpu_time_total_ms") or 0
        bottom, handles = [0.0] * n, []
        spare = iter(SEED_COLORS[4:] + SEED_COLORS[:4])
        for name, vals in per_step.items():
            vals = [v or 0.0 for v in vals]
            label = "%s: %.1f ms%s" % (name, totals.get(name, sum(vals)),
                                       " (%.0f%%)" % (100.0 * totals.get(name, 0) / grand) if grand else "")
            handles.append(ax.bar(range(n), vals, bottom=bottom, width=0.75, label=label,
                                  color=PHASE_COLORS.get(name) or next(spare, "#cccccc")))
            bottom = [b + v for b, v in zip(bottom, vals)]
        handles.reverse()  # the legend lists the phases top of the stack first
        host = s.get("step_ms") or []
        if len(host) != n:
            host = []
        if host:
            handles.append(ax.scatter(range(n), host, color="black", s=10 if n > 16 else 18, zorder=3,
                                      label="%s (host time)" % STEP))
        ax.set_xticks(range(n) if n <= 16 else range(0, n, max(1, n // 16)))
        ax.set_ylim(0, max(bottom + list(host)) * 1.12 or 1)
        ax.legend(handles=handles, fontsize=8, loc="center left", bbox_to_anchor=(1.01, 0.5), frameon=False)
    ax.set_xlabel("captured step (0 = first)")
    ax.set_ylabel("GPU time (ms, device)")
    ax.set_title("GPU time of the work launched in each phase, per step%s" % title_suffix)
    ax.grid(axis="y", alpha=0.3)
    left = [(k, totals[k]) for k in OTHER_BUCKETS if totals.get(k)]
    fig.text(0.01, -0.02,
             "Kernels, copies and memsets charged to the main thread's phase in which their runtime call started, "
             "from any thread (backward's come from autograd's).%s" % (
                 " Not shown: " + ", ".join("%s %.1f ms" % kv for kv in left) + "." if left else ""),
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
                ax.axvspan((a - t0) / 1e6, (b - t0) / 1e6, ymin=0, ymax=0.6, color=GAP_COLOR, zorder=0)
                shaded += 1
    for i, st in enumerate(steps):
        ax.broken_barh(bars([(st.start, st.end)]), (y[STEP] - h / 2, h),
                       facecolors=HOST_COLOR if i % 2 == 0 else "#7b9bd0", edgecolor="white", linewidth=0.6)
    ax.broken_barh(bars((r.start, r.end) for r in ex.ranges if r.name == DATA_LOAD),
                   (y[DATA_LOAD] - h / 2, h), facecolors=INPUT_COLOR, edgecolor=INPUT_COLOR, linewidth=0.4)
    if ex.device_data:
        ax.broken_barh(bars((k.start, k.end) for k in ex.kernels), (y["kernels"] - h / 2, h),
                       facecolors=KERNEL_COLOR, edgecolor=KERNEL_COLOR, linewidth=0.3)
        # Graphs recorded whole (no --cuda-graph-trace=node): their kernels' lane, one bar a replay.
        ax.broken_barh(bars((g.start, g.end) for g in ex.graphs or ()), (y["kernels"] - h / 2, h),
                       facecolors=GRAPH_COLOR, edgecolor=GRAPH_COLOR, linewidth=0.3)
        ax.broken_barh(bars((c.start, c.end) for c in ex.memcpys if c.is_htod), (y["memcpy"] - h / 2, h),
                       facecolors=H2D_COLOR, edgecolor=H2D_COLOR, linewidth=0.5)
        ax.broken_barh(bars((c.start, c.end) for c in ex.memcpys if not c.is_htod), (y["memcpy"] - h / 2, h),
                       facecolors=COPY_COLOR, edgecolor=COPY_COLOR, linewidth=0.5)
        ax.broken_barh(bars((m.start, m.end) for m in ex.memsets), (y["memset"] - h / 2, h),
                       facecolors=MEMSET_COLOR, edgecolor=MEMSET_COLOR, linewidth=0.3)
    end_ms = (steps[-1].end - t0) / 1e6
    ax.axvline(end_ms, color="black", linestyle="--", linewidth=1)
    ax.annotate("last host step ends", xy=(end_ms, len(lanes) - 0.45), xytext=(-4, 0),
                textcoords="offset points", ha="right", va="center", fontsize=8.5)
    ax.set_yticks([y[n] for n in lanes])
    ax.set_yticklabels(["%s (host)" % STEP, "%s (host)" % DATA_LOAD, "kernels (GPU)", "memcpy (GPU)",
                        "memset (GPU)"])
    ax.axhline(2.5, color="#999999", linewidth=0.6)
    ax.set_xlim(0, span_ms * 1.005)
    ax.set_ylim(-0.6, len(lanes) - 0.2)
    ax.set_xlabel("time since the first captured torch_step starts (ms)")
    ax.set_title("Host ranges and recorded GPU activity, first step to last device operation%s" % title_suffix)
    handles = [Patch(color=HOST_COLOR, label=STEP), Patch(color=INPUT_COLOR, label=DATA_LOAD),
               Patch(color=KERNEL_COLOR, label="kernel"), Patch(color=H2D_COLOR, label="H2D copy"),
               Patch(color=COPY_COLOR, label="other copy"), Patch(color=MEMSET_COLOR, label="memset"),
               Line2D([], [], color="black", linestyle="--", label="end of last host step")]
    if ex.device_data and ex.graphs:
        handles.insert(3, Patch(color=GRAPH_COLOR, label="CUDA graph (recorded whole)"))
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


def plot_ranks(r, path):
    """The ranks figure of a data-parallel capture (ranks.compute_ranks()'s dict): per captured step and
    rank, the data_load end after the rank's own step start (left) and the NCCL kernel time (right; a
    rank that waits for a late one shows longer NCCL kernels); stragglers marked."""
    plt = require_matplotlib()
    ranks, strag = r["ranks"], r["stragglers"]
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2))
    if not strag:
        for ax in axes:
            ax.text(0.5, 0.5, "no step captured by every rank", transform=ax.transAxes, ha="center",
                    color="#555555")
    steps = [st["step"] for st in strag]
    width = 0.8 / max(len(ranks), 1)
    for j, rank in enumerate(ranks):
        color = SEED_COLORS[j % len(SEED_COLORS)]
        row = r["per_rank"][j]
        ends = [st["data_load_end_ms"][j] for st in strag]
        axes[0].plot(steps, [float("nan") if v is None else v for v in ends], color=color, marker="o",
                     markersize=4, linewidth=1.1, label="rank %d" % rank)
        late = [(st["step"], st["data_load_end_ms"][j]) for st in strag if st["straggler"] == rank]
        if late:
            axes[0].scatter(*zip(*late), s=90, facecolors="none", edgecolors=color, linewidths=1.5, zorder=3)
        axes[1].bar([k + (j - (len(ranks) - 1) / 2) * width for k in steps], [st["nccl_ms"][j] for st in strag],
                    width=width * 0.95, color=color,
                    label="rank %d (exposed %s%% of window)" % (rank, "n/a" if row["exposed_comm_pct"] is None
                                                                  else "%.1f" % row["exposed_comm_pct"]))
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
    fig.text(0.01, -0.04, "Each rank on its own clock: host offsets from its own step start; NCCL time beyond "
             "the fastest rank's is time spent waiting for the last rank.", fontsize=8, color="#555555")
    fig.tight_layout()
    return _save(fig, path)
