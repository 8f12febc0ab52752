"""The sweep's figures: 4 (throughput and no-activity share per configuration) and 5 (batch_wait per
step of chosen runs) (matplotlib, Agg backend)."""

from ..common.plotting import HOST_COLOR, SEED_COLORS, require_matplotlib, save_figure


def plot_sweep(rows, path, has_capture=True):
    """Figure 4: throughput and no-activity share per configuration; bars are means, dots single
    runs. rows: [{"config": str, "runs": [{"seed": int, "images_per_s": x, "no_activity_pct": y},
    ...]}].
    """
    plt = require_matplotlib()
    seeds = sorted({r["seed"] for row in rows for r in row["runs"]})
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.4))
    metrics = [
        ("images_per_s", "throughput (images/s)", "Synchronized throughput"),
        ("no_activity_pct", "window with no GPU activity (%)", "No recorded GPU activity"),
    ]
    x = list(range(len(rows)))
    for ax, (key, ylabel, title) in zip(axes, metrics):
        vals = [[r[key] for r in row["runs"] if r.get(key) is not None] for row in rows]
        if not any(vals):
            ax.text(
                0.5,
                0.5,
                "not measured (runs without a capture)" if not has_capture else "no data",
                transform=ax.transAxes,
                ha="center",
                color="#555555",
            )
            ax.set_yticks([])
        means = [sum(v) / len(v) if v else 0 for v in vals]
        ax.bar(
            x,
            means,
            color=HOST_COLOR if key == "images_per_s" else "#999999",
            width=0.65,
            alpha=0.85,
            label="mean of runs",
        )
        for j, seed in enumerate(seeds):
            xs, ys = [], []
            for i, row in enumerate(rows):
                for r in row["runs"]:
                    if r["seed"] == seed and r.get(key) is not None:
                        xs.append(i + (j - (len(seeds) - 1) / 2) * 0.16)
                        ys.append(r[key])
            ax.scatter(
                xs,
                ys,
                color=SEED_COLORS[(j + 1) % len(SEED_COLORS)],
                edgecolor="black",
                linewidth=0.5,
                s=28,
                zorder=3,
                label="seed %d" % seed,
            )
        ax.set_xticks(x)
        ax.set_xticklabels([row["config"] for row in rows], rotation=30, ha="right")
        ax.set_ylabel(ylabel)
        ax.set_title(title)
        ax.grid(axis="y", alpha=0.3)
        top = max((v for vs in vals for v in vs), default=0)
        if top > 0:
            ax.set_ylim(0, top * 1.22)  # headroom for the legend
    axes[0].legend(fontsize=8, loc="upper center", ncol=len(seeds) + 1, frameon=False)
    fig.text(
        0.01,
        -0.04,
        "Bars: mean of the runs; dots: individual runs (not confidence intervals).",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout()
    return save_figure(fig, path)


def plot_sweep_batch_wait(left, right, path, titles=("Reset vs reused iterator", "Baseline runs")):
    """Figure 5 for a sweep: batch_wait per step. left / right: [(label, [ms per step])] with labels
    "<config> seed <n>"; the left panel compares short captures (reset vs reuse), the right shows
    the long baseline runs. One colour per configuration (per run when a panel holds one
    configuration), one line style per seed."""
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
        seen: dict[str, int] = {}
        for k, (label, waits) in enumerate(series):
            cfg = label.split(" ")[0]
            si = seen.get(cfg, 0)
            seen[cfg] = si + 1
            color = SEED_COLORS[(k if len(configs) == 1 else configs.index(cfg)) % len(SEED_COLORS)]
            ax.plot(
                range(len(waits)),
                [w if w is not None else float("nan") for w in waits],
                color=color,
                linestyle=styles[si % len(styles)],
                marker="o",
                markersize=3 if len(waits) > 16 else 4.5,
                linewidth=1.1,
                label=label,
            )
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
    fig.text(
        0.01,
        -0.04,
        "Time inside next(batches), excluding transfer submission; panel scales differ.",
        fontsize=8,
        color="#555555",
    )
    fig.tight_layout()
    return save_figure(fig, path)
