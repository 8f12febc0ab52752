"""profile.sh's outputs: their names (per capture with --repeat, per rank with --nproc), their
checks before anything runs (none inside the dataset train_resnet50 reads, none that is a file the
program writes by its own flags), the stale ones of an earlier run removed, the run reports copied
beside the capture or saved from a wrapped command's output, and the closing listing of what was
written (the files that are there).

Every path follows common/files.py's rules: symlinks are followed, /dev/null is written in place, a
directory, FIFO or socket is refused and never replaced, a report is written atomically. In the
lists of outputs to check, a path ending in `/` is an analysis directory (--analyze writes there).
"""

import json
import os
from typing import Optional, Sequence

from ..capture.report import last_json_object
from ..common import files
from ..common.exit_status import USAGE
from .cli import Options
from .errors import ProfileError
from .plan import STATS_REPORTS, capture_prefixes, rank_path, rank_prefix, rank_untraced_report


def stats_csv(pfx: str, report: str) -> str:
    """The CSV nsys stats writes for one report of PFX.sqlite."""
    return "%s_%s.csv" % (pfx, report)


def capture_outputs(pfx: str) -> list[str]:
    """The files of the capture PFX: PFX.nsys-rep, .sqlite, .json and the stats CSVs."""
    return [pfx + ".nsys-rep", pfx + ".sqlite", pfx + ".json"] + [
        stats_csv(pfx, report) for report in STATS_REPORTS
    ]


def single_outputs(prefix: str, pfxs: Sequence[str], untraced: bool, analyze: bool) -> list[str]:
    """Every output of one process's captures pfxs (capture_prefixes()), in the order they are
    checked: the logs, each capture's files and untraced report (and with several captures and
    --analyze its analysis directory), the analysis directory, the spread across captures."""
    several = len(pfxs) > 1
    out = [prefix + ".log"] + ([prefix + ".untraced.log"] if untraced else [])
    for pfx in pfxs:
        out += capture_outputs(pfx)
        if untraced:
            out.append(pfx + ".untraced.json")
        if analyze and several:
            out.append(pfx + "_analysis/")
    if analyze:
        out.append(prefix + "_analysis/")
    if analyze and several:
        out += [prefix + "_repeats.json", prefix + "_repeats.md"]
    return out


def ranks_outputs(prefix: str, nproc: int, untraced: bool, analyze: bool) -> list[str]:
    """Every output of an --nproc N run, in the order they are checked: the one log of all ranks
    (and the untraced runs'), each rank's capture files, untraced report and analysis directory,
    the ranks' comparison directory."""
    out = [prefix + ".log"] + ([prefix + ".untraced.log"] if untraced else [])
    for r in range(nproc):
        out += capture_outputs(rank_prefix(prefix, r))
        if untraced:
            out.append(rank_untraced_report(prefix, r))
        if analyze:
            out.append(rank_prefix(prefix, r) + "_analysis/")
    if analyze:
        out.append(prefix + "_ranks_analysis/")
    return out


def command_outputs(o: Options) -> list[str]:
    """Every output the command line o names (single_outputs() or ranks_outputs()), the untraced
    run's included unless --no-untraced."""
    if o.nproc is not None:
        return ranks_outputs(o.prefix, o.nproc, o.untraced, o.analyze)
    return single_outputs(o.prefix, capture_prefixes(o.prefix, o.repeat), o.untraced, o.analyze)


def find_dataset_dir(root: str) -> Optional[str]:
    """The dataset train_resnet50 reads for --data ROOT, as data_pipeline::find_dataset_dir() finds
    it: ROOT/food-101 when that holds meta/, else ROOT when it does; None otherwise."""
    if not root:
        return None
    if os.path.isdir(os.path.join(root, "food-101", "meta")):
        return os.path.join(root, "food-101")
    if os.path.isdir(os.path.join(root, "meta")):
        return root
    return None


def _within(path: str, directory: str) -> bool:
    """True when path lies inside directory (below it, not the directory itself), symlinks of
    both resolved as far as they exist."""
    p, d = os.path.realpath(path), os.path.realpath(directory)
    return p != d and p.startswith(d.rstrip(os.sep) + os.sep)


def _same_path(a: str, b: str) -> bool:
    """True when paths a and b name one file: the same existing file (links followed), or the same
    path once resolved."""
    try:
        return os.path.samefile(a, b)
    except OSError:
        return os.path.realpath(a) == os.path.realpath(b)


def check_outside_dataset(prefix: str, paths: Sequence[str], data: str) -> None:
    """Before anything runs or is removed: ProfileError (exit_status.USAGE) naming --prefix and the
    first output (paths, analysis directories ending in `/`) inside the dataset that --data DATA
    reads (find_dataset_dir()), as train_resnet50 refuses its own outputs there."""
    dataset = find_dataset_dir(data)
    if dataset is None:
        return
    for path in paths:
        path = path.rstrip("/")
        if _within(path, dataset) or _same_path(path, dataset):
            raise ProfileError(
                "--prefix %s: %s: inside the dataset --data %s reads (%s); write the outputs "
                "elsewhere" % (prefix, path, data, dataset),
                USAGE,
            )


def check_given_outputs(o: Options, given: Sequence[tuple[str, str]], paths: Sequence[str]) -> None:
    """Before anything runs or is removed: ProfileError (exit_status.USAGE) when a file the program
    writes by its own flags, given as (flag, path) pairs (--report, --torch-profiler-trace,
    --checkpoint-dir; with --nproc each rank's file, .rank<r> before its extension, but the
    directory's), is one of PREFIX's outputs, paths, or inside an analysis directory of them.
    --report may be the run report itself (PREFIX.json of a single capture, each rank's
    PREFIX.rank<r>.json): the program writes it in place."""
    ranks: Sequence[Optional[int]] = [None] if o.nproc is None else range(o.nproc)
    for flag, path in given:
        if not path:
            continue
        for r in [None] if flag == "--checkpoint-dir" else ranks:
            mine = path if r is None else rank_path(path, r)
            whose = "" if r is None else " (rank %d's)" % r
            report = o.prefix if r is None else rank_prefix(o.prefix, r)
            if flag == "--report" and _same_path(mine, report + ".json"):
                continue
            for out in paths:
                if out.endswith("/") and (_within(mine, out) or _same_path(mine, out[:-1])):
                    raise ProfileError(
                        "%s %s: %s%s is inside %s, where --analyze writes; give it another path"
                        % (flag, path, mine, whose, out),
                        USAGE,
                    )
                if not out.endswith("/") and _same_path(mine, out):
                    raise ProfileError(
                        "%s %s: is %s%s, an output of --prefix %s; give it another path"
                        % (flag, path, mine, whose, o.prefix),
                        USAGE,
                    )


def check_outputs(prefix: str, paths: Sequence[str]) -> None:
    """Before anything runs: ProfileError (exit_status.USAGE) naming --prefix and the first path
    where an output cannot be written (a directory, FIFO or socket there, a file in the way of its
    directory), or where an analysis directory (a path ending in `/`) is something else."""
    for path in paths:
        if path.endswith("/"):
            directory = path[:-1]
            if os.path.exists(directory) and not os.path.isdir(directory):
                raise ProfileError(
                    "--prefix %s: %s: is not a directory (--analyze writes there)"
                    % (prefix, directory),
                    USAGE,
                )
            continue
        try:
            # files' message is "FLAG PATH: why": here "--prefix PREFIX: PATH: why".
            files.check_output_file("--prefix %s:" % prefix, path, create_dirs=True)
        except files.UsageError as e:
            raise ProfileError(str(e), USAGE)


def stale_outputs(pfxs: Sequence[str], reports: bool) -> list[str]:
    """What an earlier run left that would hide a capture (or untraced run, or stats report) that
    never happened: each capture's .nsys-rep, .sqlite, stats CSVs and .untraced.json, and (reports:
    profile.sh names the report, so the program writes it anew) its .json. The logs are truncated
    by their first run."""
    out = []
    for pfx in pfxs:
        out += [pfx + ".nsys-rep", pfx + ".sqlite", pfx + ".untraced.json"]
        out += [stats_csv(pfx, report) for report in STATS_REPORTS]
        if reports:
            out.append(pfx + ".json")
    return out


def ranks_stale_outputs(prefix: str, nproc: int, reports: bool) -> list[str]:
    """stale_outputs() of an --nproc run: each rank's capture, stats CSVs, untraced report and
    (reports) run report."""
    out = []
    for r in range(nproc):
        rp = rank_prefix(prefix, r)
        out += [rp + ".nsys-rep", rp + ".sqlite", rank_untraced_report(prefix, r)]
        out += [stats_csv(rp, report) for report in STATS_REPORTS]
        if reports:
            out.append(rp + ".json")
    return out


def prepare(prefix: str, stale: Sequence[str]) -> None:
    """The directory of PREFIX made and the stale outputs removed (a symlink's target, the link
    kept; never a device or FIFO); files.OutputError when either cannot be done."""
    files.make_dirs(os.path.dirname(prefix) or ".")
    for path in stale:
        files.remove_stale(path)


def copy_report(source: str, target: str) -> None:
    """The report a program wrote at source copied to target (atomically; nothing when both name
    one file); ProfileError when it cannot be."""
    try:
        if os.path.exists(target) and os.path.samefile(source, target):
            return
        with open(source, "rb") as f:
            data = f.read()
        with files.atomic_output(target, "wb") as out:
            out.write(data)
    except (OSError, files.OutputError) as e:
        raise ProfileError("cannot copy %s to %s (%s)" % (source, target, e))


def save_report_line(lines: Sequence[str], path: str) -> bool:
    """The last of a wrapped command's output lines that is a JSON object (its report) written to
    path, atomically; False when there is none. ProfileError when it cannot be written."""
    doc = last_json_object(lines)
    if doc is None:
        return False
    try:
        files.write_text(path, json.dumps(doc) + "\n")
    except files.OutputError as e:
        raise ProfileError("cannot write the run report %s (%s)" % (path, e))
    return True


def missing_csvs(pfx: str) -> list[str]:
    """The stats CSVs of PFX that are not there (nsys stats skips a report without data)."""
    csvs = [stats_csv(pfx, report) for report in STATS_REPORTS]
    return [csv for csv in csvs if not os.path.exists(csv)]


def _capture_listing(pfx: str) -> list[str]:
    """The lines naming a capture's export files, those that are there."""
    lines = [
        ("capture:     %s.nsys-rep" % pfx, pfx + ".nsys-rep"),
        ("sqlite:      %s.sqlite" % pfx, pfx + ".sqlite"),
    ] + [
        ("%-12s %s" % (report + ":", stats_csv(pfx, report)), stats_csv(pfx, report))
        for report in STATS_REPORTS
    ]
    return [line for line, path in lines if os.path.exists(path)]


def single_listing(prefix: str, pfxs: Sequence[str], untraced: bool, analyze: bool) -> list[str]:
    """What one process's run wrote, a line each, after a blank line (the reports that are
    there)."""
    several = len(pfxs) > 1
    out = [""]
    for k, pfx in enumerate(pfxs, 1):
        if several:
            out.append("capture %d:" % k)
        out += _capture_listing(pfx)
        if os.path.isfile(pfx + ".json"):
            out.append("run report:  %s.json" % pfx)
        if os.path.isfile(pfx + ".untraced.json"):
            out.append("untraced:    %s.untraced.json" % pfx)
        if analyze and several:
            out.append("summary:     %s_analysis/summary.md" % pfx)
    out.append("log:         %s.log" % prefix)
    if untraced:
        out.append("untraced log: %s.untraced.log" % prefix)
    if analyze:
        out.append("analysis:    %s_analysis/summary.md" % prefix)
    if analyze and several:
        out.append("repeats:     %s_repeats.md" % prefix)
    return out


def ranks_listing(prefix: str, nproc: int, untraced: bool, analyze: bool) -> list[str]:
    """What an --nproc run wrote, a line each, after a blank line, rank by rank."""
    out = [""]
    for r in range(nproc):
        rp = rank_prefix(prefix, r)
        out.append("rank %d:" % r)
        out += _capture_listing(rp)
        if os.path.isfile(rp + ".json"):
            out.append("run report:  %s.json" % rp)
        unreport = rank_untraced_report(prefix, r)
        if os.path.isfile(unreport):
            out.append("untraced:    %s" % unreport)
        if analyze:
            out.append("analysis:    %s_analysis/summary.md" % rp)
    out.append("log:         %s.log" % prefix)
    if untraced:
        out.append("untraced log: %s.untraced.log" % prefix)
    if analyze:
        out.append("ranks:       %s_ranks_analysis/ranks.md" % prefix)
    return out
