"""Helpers of the Python tests (no tests here): testutil (stand-in programs, scratch directories,
the repository's paths) and nsys_exports (synthetic nsys SQLite exports, the checked-in
fixtures)."""
