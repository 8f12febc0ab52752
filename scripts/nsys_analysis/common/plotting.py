"""What every figure shares: matplotlib with the Agg backend and the figures' style, the colours,
and saving a figure as an output file (common.files' rules: a symlink followed, /dev/null written in
place, a regular file replaced atomically)."""

import os
import sys

from .exit_status import FAILURE
from .files import atomic_output

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
    """Import matplotlib with the Agg backend and return pyplot, or exit (exit_status.FAILURE) with
    a one-line hint."""
    try:
        import matplotlib
    except ImportError:
        print(
            "error: matplotlib is not available to %s; run with /usr/bin/python3 or install "
            "python3-matplotlib (or pass --no-figures)" % sys.executable,
            file=sys.stderr,
        )
        sys.exit(FAILURE)
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update(
        {
            "figure.dpi": 110,
            "savefig.dpi": 150,
            "axes.spines.top": False,
            "axes.spines.right": False,
            "axes.titleweight": "bold",
            "font.size": 10,
        }
    )
    return plt


def save_figure(fig, path):
    """Saves fig at path (its format from the extension, PNG without one) and closes it; returns
    path. Raises files.OutputError naming path when it cannot be written."""
    fmt = os.path.splitext(path)[1][1:].lower() or "png"
    try:
        with atomic_output(path, "wb") as f:
            fig.savefig(f, format=fmt, bbox_inches="tight")
    finally:
        import matplotlib.pyplot as plt

        plt.close(fig)
    return path
