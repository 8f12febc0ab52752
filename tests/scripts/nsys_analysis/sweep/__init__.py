"""Tests of scripts/nsys_analysis/sweep/, one file per module."""
