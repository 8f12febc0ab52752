"""The Python tests of scripts/, laid out as scripts/ is: test_<script>.py for each command line of
scripts/ (and of scripts/experiments/ and scripts/dev/, flat beside them),
nsys_analysis/<sub-package>/test_<module>.py for each module of scripts/nsys_analysis/, and
test_layout.py for the package's import layers; support/ holds the helpers they share (testutil:
stand-in programs, scratch directories, the repository's paths; nsys_exports: synthetic nsys exports
and the checked-in ones in tests/fixtures/nsys/).

scripts/dev/python_tests.sh runs them: pytest, else unittest discovery with tests/ as the top-level
directory (so this package is `scripts`, and its sub-packages' names never shadow scripts/'s own
nsys_analysis). Importing this package puts scripts/ and scripts/experiments/ first on sys.path, so
that every test imports nsys_analysis and the command lines' modules (kernel_families, benchmarks,
reference_epochs) of this checkout.
"""

import os
import sys

_SCRIPTS = os.path.join(
    os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))), "scripts"
)
for _path in (os.path.join(_SCRIPTS, "experiments"), _SCRIPTS):
    if _path not in sys.path:
        sys.path.insert(0, _path)
