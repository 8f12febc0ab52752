"""Tests of scripts/nsys_analysis/profile/, one file per module (profile.sh end to end:
tests/scripts/test_profile_sh.py)."""
