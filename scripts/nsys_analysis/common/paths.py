"""Where the repository's scripts and programs are, for sweep.py and benchmarks.py."""

import os

# This file is scripts/nsys_analysis/common/paths.py.
SCRIPTS_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
REPO_ROOT = os.path.dirname(SCRIPTS_DIR)
PROFILE_SH = os.path.join(SCRIPTS_DIR, "profile.sh")


def default_train_binary():
    """$TRAIN_BIN when set and not empty, else build/bin/train_resnet50 in the repository."""
    return os.environ.get("TRAIN_BIN") or os.path.join(REPO_ROOT, "build", "bin", "train_resnet50")
