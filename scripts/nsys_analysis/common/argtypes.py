"""argparse types the scripts share: each returns the value or raises argparse.ArgumentTypeError
saying what was expected, which argparse turns into a usage error (exit_status.USAGE) naming the
flag."""

import argparse


def positive_int(text):
    """An integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError("expected an integer >= 1, got %r" % text)
    return value


def unit_fraction(text):
    """A number in [0, 1]."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 <= value <= 1.0:
        raise argparse.ArgumentTypeError("expected a number in [0, 1], got %r" % text)
    return value
