#!/usr/bin/env python3
"""Same behaviour before and after a refactor: fixed runs of two train_resnet50 builds, compared.

usage: scripts/dev/same_behaviour.py --old BIN --new BIN --data ROOT [--device cpu|cuda]
                                     [--out DIR] [--timeout S]

Each build runs the same command lines on the same Food-101 ROOT (scripts/run.sh's, or
food101_synth's: a few classes are enough on the CPU). On the CPU: 2 + 4 steps step by step; 3
epochs with a capture window, evaluation and checkpoints; the same run resumed after its newest
checkpoint was removed; a run that a learning rate of 1e6 stops at its first non-finite loss. With
--device cuda: 2 + 8 steps step by step, fp32 with the CPU loader, bf16 with the fused batch norm
and the GPU decode stage, and the same as one CUDA graph. Between the two builds, every run must
have:
- the same exit status;
- the same digest and loss at every warm-up and captured step, and the same loss after the drain;
- the same training and evaluation figures at every epoch;
- a report with the same keys;
- the same printed lines, times, rates and paths aside.

Speed is not compared here: scripts/dev/paired_throughput.sh does that. This script says what
differs, run by run, and exits 0 when nothing does, 1 when something does or a run could not be
read, 2 for usage errors (a binary that is not executable, a ROOT without images/ and meta/, a
--timeout not above 0). A run still going after --timeout seconds (1800) is killed and named.
"""

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from typing import Any, Dict, List, Tuple

# The report's fields that differ between two runs of one build: times, rates, paths, the host.
VOLATILE = re.compile(
    r"(^ms$|^s$|_ms|_s|seconds|per_s|time|path|argv|pid|host|report|checkpoint_dir|resumed_from|"
    r"environment|bytes|load_average|rss|threads)"
)
# The same in printed lines.
PRINTED_VOLATILE = [
    # A figure with its unit, or several ("p50 / p95  3418.89 / 3500.20 ms", "2m13.4 s").
    (
        re.compile(
            r"([0-9]+m)?[0-9][0-9.,]*(\s*/\s*[0-9][0-9.,]*)*\s*(ms|s|images/s|img/s|MiB|GiB|%)\b"
        ),
        "<n \\3>",
    ),
    # The step that waited longest ("batch_wait max  12.3 ms (step 4)").
    (re.compile(r"(<n ms>) \(step [0-9]+\)"), "\\1 (step <n>)"),
    (re.compile(r"(?<![<\w])/\S+"), "<path>"),
]


def cpu_runs(data: str) -> List[Tuple[str, List[str]]]:
    common = ["--data", data, "--device", "cpu", "--image-size", "64", "--batch-size", "8"]
    common += ["--workers", "2", "--intra-op-threads", "1", "--quiet"]
    epochs = ["--epochs", "3", "--eval-every", "1", "--sync-every-step"]
    return [
        ("steps", common + ["--warmup", "2", "--steps", "4", "--sync-every-step"]),
        ("epochs", common + epochs + ["--capture-at", "4", "--steps", "3", "--checkpoint-dir"]),
        ("resume", common + epochs + ["--resume", "--checkpoint-dir"]),
        ("nan", common + ["--epochs", "2", "--lr", "1e6", "--lr-schedule", "constant"]),
    ]


def cuda_runs(data: str) -> List[Tuple[str, List[str]]]:
    common = ["--data", data, "--warmup", "2", "--steps", "8", "--sync-every-step", "--quiet"]
    bf16 = ["--fused-bn", "--precision", "bf16"]
    return [
        ("fp32", common + ["--workers", "4"]),
        ("fused_bn_gpu_decode", common + bf16 + ["--decode", "gpu", "--workers", "2"]),
        ("graph", common + bf16 + ["--cuda-graph", "--workers", "4"]),
    ]


def run_build(
    binary: str, runs: List[Tuple[str, List[str]]], out: str, timeout: float
) -> Dict[str, Any]:
    """Runs every command line; {run: (status, report or None, printed lines)}. A run still
    going after `timeout` seconds is killed, its status "timed out"."""
    os.makedirs(out, exist_ok=True)
    checkpoints = os.path.join(out, "checkpoints")
    results: Dict[str, Any] = {}
    for name, args in runs:
        args = list(args)
        if args[-1] == "--checkpoint-dir":
            args.append(checkpoints)
        if name == "resume" and os.path.isdir(checkpoints):
            newest = sorted(f for f in os.listdir(checkpoints) if f.endswith(".ckpt"))
            if newest:
                os.remove(os.path.join(checkpoints, newest[-1]))
        report = os.path.join(out, name + ".json")
        try:
            done = subprocess.run(
                [binary] + args + ["--report", report],
                capture_output=True,
                text=True,
                stdin=subprocess.DEVNULL,
                timeout=timeout,
            )
            status: Any = done.returncode
            output = done.stdout + done.stderr
        except subprocess.TimeoutExpired as e:
            status = "timed out after %g s" % timeout
            output = "".join(
                x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                for x in (e.stdout, e.stderr)
            )
        try:
            with open(report) as f:
                loaded = json.load(f)
        except (OSError, ValueError):
            loaded = None
        with open(os.path.join(out, name + ".log"), "w") as f:
            f.write(output)
        results[name] = (status, loaded, output.splitlines())
    return results


def steady(x: Any) -> Any:
    """The report without what differs between two runs of one build."""
    if isinstance(x, dict):
        return {k: steady(v) for k, v in x.items() if not VOLATILE.search(k)}
    if isinstance(x, list):
        return [steady(v) for v in x]
    return x


def keys(x: Any, prefix: str = "") -> set:
    found = set()
    if isinstance(x, dict):
        for k, v in x.items():
            found.add(prefix + "/" + k)
            found |= keys(v, prefix + "/" + k)
    elif isinstance(x, list) and x:
        found |= keys(x[0], prefix + "[]")
    return found


def printed(lines: List[str]) -> List[str]:
    out = []
    for line in lines:
        for pattern, replacement in PRINTED_VOLATILE:
            line = pattern.sub(replacement, line)
        out.append(line)
    return out


def compare(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
    """What differs, one line each; empty when nothing does."""
    found = []
    for name in old:
        (s_old, r_old, p_old), (s_new, r_new, p_new) = old[name], new[name]
        if s_old != s_new:
            found.append("%s: exit status %s before, %s after" % (name, s_old, s_new))
        if r_old is None or r_new is None:
            if r_old is not None or r_new is not None:
                found.append("%s: a report from one build only" % name)
            continue
        for part in ("warmup", "steps"):
            a, b = r_old.get(part) or [], r_new.get(part) or []
            if len(a) != len(b):
                found.append("%s: %d %s steps before, %d after" % (name, len(a), part, len(b)))
            for i, (x, y) in enumerate(zip(a, b)):
                for field in ("digest", "loss"):
                    if x.get(field) != y.get(field):
                        found.append(
                            "%s: %s step %d: %s %s before, %s after"
                            % (name, part, i, field, x.get(field), y.get(field))
                        )
        if keys(r_old) != keys(r_new):
            found.append(
                "%s: report keys differ: %s" % (name, sorted(keys(r_old) ^ keys(r_new))[:8])
            )
        a, b = steady(r_old), steady(r_new)
        for section in sorted(set(a) | set(b)):
            if section not in ("warmup", "steps") and a.get(section) != b.get(section):
                found.append(
                    "%s: the report's %s differs: %s | %s"
                    % (
                        name,
                        section,
                        json.dumps(a.get(section))[:200],
                        json.dumps(b.get(section))[:200],
                    )
                )
        lines_old, lines_new = printed(p_old), printed(p_new)
        if lines_old != lines_new:
            first = next(
                (i for i, (x, y) in enumerate(zip(lines_old, lines_new)) if x != y),
                min(len(lines_old), len(lines_new)),
            )
            found.append(
                "%s: printed line %d differs: %r | %r"
                % (
                    name,
                    first + 1,
                    lines_old[first] if first < len(lines_old) else None,
                    lines_new[first] if first < len(lines_new) else None,
                )
            )
    return found


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(
        prog="same_behaviour.py",
        description="Fixed runs of two train_resnet50 builds, compared (see the module's text).",
    )
    parser.add_argument("--old", required=True, help="the build before: its train_resnet50")
    parser.add_argument("--new", required=True, help="the build after: its train_resnet50")
    parser.add_argument("--data", required=True, help="a Food-101 root (images/, meta/)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument(
        "--timeout", type=float, default=1800, help="seconds a run may take (default 1800)"
    )
    parser.add_argument(
        "--out",
        help="where the runs' reports and output go: OUT/old, OUT/new (default: a temporary"
        " folder, removed when nothing differs)",
    )
    args = parser.parse_args(argv)
    for flag, path in (("--old", args.old), ("--new", args.new)):
        if not (os.path.isfile(path) and os.access(path, os.X_OK)):
            parser.error("%s: %s is no executable file" % (flag, path))
    if not args.timeout > 0:
        parser.error("--timeout: expected a positive number of seconds, got %g" % args.timeout)
    if not all(os.path.isdir(os.path.join(args.data, d)) for d in ("images", "meta")):
        parser.error("--data: %s has no images/ and meta/ (a Food-101 root)" % args.data)
    out = args.out or tempfile.mkdtemp(prefix="same_behaviour_")
    runs = (cpu_runs if args.device == "cpu" else cuda_runs)(args.data)
    results = {}
    for who, binary in (("old", args.old), ("new", args.new)):
        where = os.path.join(out, who)
        shutil.rmtree(where, ignore_errors=True)
        results[who] = run_build(os.path.abspath(binary), runs, where, args.timeout)
    found = compare(results["old"], results["new"])
    for name, (status, report, _) in results["new"].items():
        steps = len((report or {}).get("warmup") or []) + len((report or {}).get("steps") or [])
        print("%-20s exit %s, %d steps compared" % (name, status, steps))
    for line in found:
        print("DIFFERS: " + line)
    print("same behaviour" if not found else "%d difference(s); runs in %s" % (len(found), out))
    if not args.out and not found:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if not found else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
