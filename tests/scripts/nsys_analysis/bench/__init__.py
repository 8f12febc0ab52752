"""Tests of scripts/nsys_analysis/bench/, one file per module."""
