"""Tests of scripts/nsys_analysis/common/, one file per module."""
