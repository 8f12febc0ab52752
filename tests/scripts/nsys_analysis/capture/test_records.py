"""Tests for scripts/nsys_analysis/capture/records.py: its NVTX range names and domains are the ones
the C++ program emits. The C++ side's names are read from its headers, the `kName = "text"` string
constants of lib/instrument/nvtx.h (the training step's tree, the ddp and inject_stall domains;
lib/nvtx.h in trees from before lib/ had sub-folders) and data_pipeline/nvtx_domain.h (the loader's
domain and its ranges, the GPU decode stage's). Renaming a range on one side only fails here.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_records.py
"""

import os
import re
import unittest

from scripts.support.testutil import REPO
from nsys_analysis.capture import records

# Where the C++ side defines the names, newest layout first.
STEP_HEADERS = ("lib/instrument/nvtx.h", "lib/nvtx.h")
LOADER_HEADER = "data_pipeline/nvtx_domain.h"
# `inline constexpr const char* kName = "text";` (or `{"text"}`), as both headers write their names.
CONSTANT = re.compile(
    r'constexpr\s+(?:const\s+)?char\s*(?:const\s*)?\*\s*(k\w+)\s*(?:=\s*|\{\s*)"([^"]*)"'
)

# Names records.py holds that are not NVTX names, and why.
NOT_NVTX = {
    "GRAPH_LAUNCH": "the CUDA runtime call that enqueues a graph (cudaGraphLaunch), not a range"
}
# Constants of the headers that name no range or domain.
NOT_RANGES = {
    "kWorkerThreadPrefix": "the loader workers' thread-name prefix",
    "kGpuStageThread": "the GPU decode stage's thread name",
}
# Ranges the C++ side emits that the analysis does not look up by name, and why.
NOT_NEEDED = {
    "capture_drain": "the drain after the last step: the analysis measures it from the last step's "
    "end to the device's last activity, and charges launches in it to OUTSIDE "
    "(phases.OTHER_BUCKETS)",
    "graph_capture": "the one --cuda-graph capture, after warm-up and before capture_window: never "
    "inside the window the analysis reads",
    "load_batch": "a loader worker's range: listed by (domain, name) in summary.md's "
    "other-domains table",
    "load_sample": "a loader worker's range: listed by (domain, name) like load_batch",
    "reuse_fence": "a loader worker's wait for a slot: listed by (domain, name) like load_batch",
    "broadcast_buffers": "a ddp-domain range inside forward: listed by (domain, name); ranks.py "
    "reads NCCL kernels, not these ranges",
    "rebuild_buckets": "a ddp-domain range inside forward: listed by (domain, name)",
    "stop_agreement": "a ddp-domain range at a step boundary: listed by (domain, name)",
    "capture_barrier": "a ddp-domain range before the capture starts: outside the window",
    "ddp": "the ddp domain: its ranges are listed by (domain, name), never counted as steps or "
    "phases",
    "inject_stall": "the --inject-stall range: found by its domain (records.STALL_DOMAIN), whose "
    "name it shares",
}
# The training step's tree and the GPU stage's ranges: each must be a name of the C++ side, and in
# records.py or NOT_NEEDED.
STEP_TREE = (
    "torch_step",
    "data_load",
    "batch_wait",
    "h2d_submit",
    "normalize",
    "forward",
    "zero_grad",
    "backward",
    "optimizer_step",
    "capture_window",
    "iterator_reset",
    "capture_drain",
    "loss_item",
    "graph_replay",
    "graph_capture",
    "gpu_decode",
    "decode_fallback",
    "resize_normalize",
)


def header_constants():
    """{constant: text} of the C++ headers' string constants; fails naming the headers when one is
    absent."""
    step = next((h for h in STEP_HEADERS if os.path.isfile(os.path.join(REPO, h))), None)
    if step is None:
        raise AssertionError(
            "none of %s exists: where does the C++ side define its NVTX names now?"
            % ", ".join(STEP_HEADERS)
        )
    out = {}
    for rel in (step, LOADER_HEADER):
        with open(os.path.join(REPO, rel)) as f:
            found = CONSTANT.findall(f.read())
        if not found:
            raise AssertionError(
                '%s defines no `kName = "text"` constants: has its form changed?' % rel
            )
        for name, text in found:
            out[name] = text
    return out


def records_names():
    """{NAME: text} of records.py's NVTX names: its upper-case str constants, and each text of its
    tuples."""
    out = {}
    for name, value in vars(records).items():
        if not name.isupper() or name in NOT_NVTX:
            continue
        if isinstance(value, str):
            out[name] = value
        elif isinstance(value, tuple) and value and all(isinstance(v, str) for v in value):
            out.update(("%s[%d]" % (name, i), v) for i, v in enumerate(value))
    return out


class RangeNamesTest(unittest.TestCase):
    def setUp(self):
        self.cpp = header_constants()
        self.domains = {v for k, v in self.cpp.items() if k == "kDomain" or k.endswith("Domain")}
        self.ranges = {
            v for k, v in self.cpp.items() if v not in self.domains and k not in NOT_RANGES
        }
        self.python = records_names()

    def test_the_headers_are_read(self):
        self.assertEqual(self.cpp.get("kTorchStep"), "torch_step")
        self.assertEqual(self.cpp.get("kDomain"), "data_pipeline")
        self.assertIn("kLoadBatch", self.cpp)

    def test_every_name_of_records_is_the_cpp_sides(self):
        for name, text in self.python.items():
            with self.subTest(name=name):
                if name.endswith("_DOMAIN"):
                    self.assertIn(
                        text,
                        self.domains,
                        "records.%s = %r is no domain of the C++ headers" % (name, text),
                    )
                else:
                    self.assertIn(
                        text,
                        self.ranges,
                        "records.%s = %r is no range of the C++ headers" % (name, text),
                    )

    def test_the_domains_are_the_ones_their_ranges_live_in(self):
        self.assertEqual(records.LOADER_DOMAIN, self.cpp["kDomain"])
        self.assertEqual(records.STALL_DOMAIN, self.cpp["kStallDomain"])

    def test_every_cpp_range_is_in_records_or_not_needed(self):
        known = set(self.python.values())
        for text in sorted(self.ranges | self.domains):
            with self.subTest(cpp=text):
                self.assertTrue(
                    text in known or text in NOT_NEEDED,
                    "the C++ side emits %r: name it in records.py, or list it in this test's "
                    "NOT_NEEDED with the reason the analysis does not need it" % text,
                )

    def test_the_step_tree(self):
        known = set(self.python.values())
        for text in STEP_TREE:
            with self.subTest(name=text):
                self.assertIn(
                    text, self.ranges, "%r is no longer a range of the C++ headers" % text
                )
                self.assertTrue(text in known or text in NOT_NEEDED, text)

    def test_not_needed_lists_only_names_the_cpp_side_has(self):
        # A stale entry would hide a rename on the C++ side.
        for text in NOT_NEEDED:
            with self.subTest(name=text):
                self.assertIn(text, self.ranges | self.domains)
                self.assertNotIn(text, set(self.python.values()) - {records.STALL_DOMAIN})


if __name__ == "__main__":
    unittest.main()
