"""Tests of scripts/nsys_analysis/, one folder per sub-package, one file per module."""
