"""Tests of scripts/nsys_analysis/capture/, one file per module."""
