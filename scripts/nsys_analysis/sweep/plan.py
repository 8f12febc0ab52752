"""The sweep's configurations and run plan: the article's eight flag sets, configuration files, the
train_resnet50 arguments of one run, and the shuffled order of (configuration, seed) runs."""

import json
import random
import re
from collections import OrderedDict
from typing import NamedTuple

# The article's baseline (section 8): 64 steps, 8 workers, prefetch 2, pinned, iterator reused.
BASELINE = OrderedDict(
    [
        ("steps", 64),
        ("warmup", 3),
        ("batch_size", 128),
        ("workers", 8),
        ("prefetch_factor", 2),
        ("pin_memory", True),
        ("reuse_iterator", True),
    ]
)


def variant(**changes):
    """The baseline with some flags changed (keys: train_resnet50's flags in snake_case)."""
    cfg = OrderedDict(BASELINE)
    cfg.update(changes)
    return cfg


# The article's eight configurations: two short captures (reset vs reused iterator), the baseline,
# and one-change variants of the baseline.
DEFAULT_CONFIGS = OrderedDict(
    [
        ("reset_8", variant(steps=8, reuse_iterator=False)),
        ("reuse_8", variant(steps=8)),
        ("reuse_64", variant()),
        ("workers_4", variant(workers=4)),
        ("workers_12", variant(workers=12)),
        ("prefetch_1", variant(prefetch_factor=1)),
        ("prefetch_4", variant(prefetch_factor=4)),
        ("no_pin", variant(pin_memory=False)),
    ]
)
DEFAULT_SEEDS = (2026, 2027)
_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class ConfigError(Exception):
    """A configuration file, --only name or --steps value that cannot be used; sweep.py exits 2."""


class PlannedRun(NamedTuple):
    """One run of the plan: a configuration's name and a seed."""

    config: str
    seed: int


def load_configs(path):
    """Read a configuration file: {"name": {flag: value}} or [{"name": ..., flag: value}, ...].
    Returns {name: flags} in the file's order, each configuration completed with the baseline's
    flags."""
    try:
        with open(path) as f:
            doc = json.load(f, object_pairs_hook=_pairs)
    except _Repeated as e:
        raise ConfigError("--configs %s: %s" % (path, e))
    except RecursionError:
        raise ConfigError("cannot read --configs %s: nested too deeply" % path)
    except (OSError, ValueError) as e:
        raise ConfigError("cannot read --configs %s: %s" % (path, e))
    if isinstance(doc, list):
        items = []
        for entry in doc:
            if not isinstance(entry, dict) or "name" not in entry:
                raise ConfigError('expected objects with a "name" in %s, got %r' % (path, entry))
            entry = OrderedDict(entry)
            items.append((str(entry.pop("name")), entry))
    elif isinstance(doc, dict):
        items = list(doc.items())
    else:
        raise ConfigError("expected a JSON object or list in %s" % path)
    configs = OrderedDict()
    for name, flags in items:
        if name in configs:
            raise ConfigError(
                "--configs %s: the configuration %s is given twice (each name is one run's folder)"
                % (path, name)
            )
        if isinstance(flags, dict) and "seed" in flags:
            raise ConfigError(
                "--configs %s: %s.seed: the seeds are the sweep's (--seeds), not a configuration's"
                % (path, name)
            )
        if not _NAME.match(name):
            raise ConfigError(
                "expected configuration names of letters, digits, _ . -, got %r in %s"
                % (name, path)
            )
        if not isinstance(flags, dict):
            raise ConfigError(
                "expected an object of flags for %s in %s, got %r" % (name, path, flags)
            )
        for key, value in flags.items():
            if not isinstance(value, (str, int, float, bool)):
                raise ConfigError(
                    "expected a string, number or boolean for %s.%s in %s, got %r"
                    % (name, key, path, value)
                )
        cfg = variant(**flags)
        if not isinstance(cfg["steps"], int) or isinstance(cfg["steps"], bool) or cfg["steps"] < 1:
            raise ConfigError(
                "expected %s.steps to be a positive integer in %s, got %r"
                % (name, path, cfg["steps"])
            )
        configs[name] = cfg
    if not configs:
        raise ConfigError("no configurations in %s" % path)
    return configs


class _Repeated(ValueError):
    """A key given twice in one JSON object of a configuration file."""


def _pairs(pairs):
    """json's object_pairs_hook: an OrderedDict, refusing a key given twice (json keeps the last
    silently)."""
    out = OrderedDict()
    for key, value in pairs:
        if key in out:
            raise _Repeated(
                "%r is given twice in one object (a configuration or a flag would be lost)" % key
            )
        out[key] = value
    return out


def select_configs(configs, only):
    """The configurations named in only (all when only is empty or None), in configs' order."""
    if not only:
        return configs
    unknown = [n for n in only if n not in configs]
    if unknown:
        raise ConfigError(
            "expected --only names among %s, got %s" % (", ".join(configs), ", ".join(unknown))
        )
    return OrderedDict((n, configs[n]) for n in configs if n in only)


def flag_name(key):
    """A configuration key as train_resnet50's flag: prefetch_factor -> --prefetch-factor."""
    return "--" + key.replace("_", "-")


def extra_flags(extra):
    """Flag names (and values) given after `--`: {"--steps": "2", "--synthetic": None}."""
    out, i = {}, 0
    while i < len(extra):
        tok = extra[i]
        if tok.startswith("--"):
            if "=" in tok:
                name, value = tok.split("=", 1)
                out[name] = value
            elif i + 1 < len(extra) and not extra[i + 1].startswith("--"):
                out[tok] = extra[i + 1]
                i += 1
            else:
                out[tok] = None
        i += 1
    return out


def run_args(cfg, seed, data, extra):
    """train_resnet50 arguments for one run; flags in extra override the configuration's."""
    overridden = extra_flags(extra)
    args = []
    if data and "--data" not in overridden:
        args += ["--data", data]
    for key, value in cfg.items():
        flag = flag_name(key)
        if flag in overridden:
            continue
        if isinstance(value, bool):
            args.append("%s=%s" % (flag, "true" if value else "false"))
        else:
            args += [flag, str(value)]
    if "--seed" not in overridden:
        args += ["--seed", str(seed)]
    return args + list(extra)


def expected_steps(cfg, extra):
    """The steps a run must capture: --steps after `--` when given, else the configuration's."""
    flags = extra_flags(extra)
    value = flags.get("--steps")
    if "--steps" in flags and value is None:  # `-- --steps` last, or followed by another flag
        raise ConfigError("expected an integer after --steps, got nothing")
    try:
        steps = int(value) if value is not None else int(cfg["steps"])
    except ValueError:
        raise ConfigError("expected an integer after --steps, got %r" % value)
    if steps < 1:
        raise ConfigError("expected --steps >= 1 after --, got %d" % steps)
    return steps


def changes_from_baseline(cfg):
    """The flags where cfg differs from the baseline, as sweep.md's "change" column writes them."""
    diff = [
        "%s=%s" % (k, str(v).lower() if isinstance(v, bool) else v)
        for k, v in cfg.items()
        if BASELINE.get(k) != v
    ]
    return ", ".join(diff) if diff else "baseline"


def make_plan(configs, seeds, order_seed):
    """[PlannedRun] for every (configuration, seed) pair, shuffled reproducibly by order_seed."""
    plan = [PlannedRun(name, seed) for name in configs for seed in seeds]
    random.Random(order_seed).shuffle(plan)
    return plan
