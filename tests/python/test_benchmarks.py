"""Tests of scripts/benchmarks.py's parsing and tables, and of how it runs commands (time limits, the
report line, loader_bench and ncu output) with stand-ins for the GPU programs; the GPU runs themselves
are measured, not tested."""

import contextlib
import io
import json
import os
import shutil
import signal
import sys
import tempfile
import time
import unittest
from unittest import mock

from testutil import alive, write_exe

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "scripts"))
import benchmarks  # noqa: E402

# Three records of a real `ncu --csv --page raw --print-units base --print-kernel-base demangled`
# run on the H200 (Nsight Compute 2025.3.1; columns trimmed), between the program's own output and
# ncu's notes, as they come on stdout.
NCU_OUTPUT = '''==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, profiling results may be inconsistent.
==PROF== Connected to process 772 (/work/main/build-gpu/bin/train_resnet50)
train_resnet50 0.1.0: cuda, batch 128, 224 px, 1 warm-up + 2 captured steps, synthetic batches (no loader)
summary (2 captured steps of batch 128, after 1 warm-up)
==PROF== Disconnected from process 772
"ID","Process ID","Kernel Name","Block Size","gpu__time_duration.sum","dram__bytes.sum","gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed","sm__throughput.avg.pct_of_peak_sustained_elapsed","dram__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","ns","byte","%","%","%"
"0","772","void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, 512, 16, 2, 4, 1, 1, 0, 0, 1, 2>(cudnn::NhwcBatchNormFwdParams<T1, T2>)","(512, 1, 1)","30,752","28,397,824","28.48","22.15","19.21"
"1","772","void at::vectorized_elementwise_kernel<4, at::<unnamed>::launch_clamp_scalar(at::TensorIteratorBase &, c10::Scalar, c10::Scalar, detail::ClampLimits)::[lambda() (instance 1)]::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)], std::array<char *, 2>>(int, T2, T3)","(128, 1, 1)","13,184","29,985,280","47.34","19.48","47.34"
"93","772","void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::BinaryFunctor<float, float, float, void at::<unnamed>::threshold_kernel_impl<float>(at::TensorIteratorBase &, T1, T1)::[lambda(float, float) (instance 1)]>>(at::TensorIteratorBase &, const T1 &)::[lambda(int) (instance 1)]>(int, T3)","(128, 1, 1)","95,488","144,306,432","95.29","28.98","31.42"
'''


class NcuTest(unittest.TestCase):
    def test_parse_skips_program_output_and_units_and_reads_grouped_digits(self):
        rows = benchmarks.parse_ncu_csv(NCU_OUTPUT)
        self.assertEqual([r["ID"] for r in rows], ["0", "1", "93"])
        self.assertEqual(rows[0]["gpu__time_duration.sum"], 30752.0)
        self.assertEqual(rows[2]["dram__bytes.sum"], 144306432.0)
        self.assertEqual(rows[1]["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 19.48)

    def test_parse_of_no_records(self):
        self.assertEqual(benchmarks.parse_ncu_csv("==ERROR== the application returned an error\n"), [])

    def test_groups_by_kernel_kind_with_time_weighted_percentages(self):
        groups = benchmarks.group_ncu(benchmarks.parse_ncu_csv(NCU_OUTPUT + NCU_OUTPUT.splitlines()[-1]
                                                              .replace('"93"', '"94"', 1) + "\n"))
        by_kind = {g["kind"]: g for g in groups}
        self.assertEqual([g["kind"] for g in groups], ["ReLU bwd", "BN fwd", "ReLU fwd"])
        self.assertEqual(by_kind["ReLU bwd"]["launches"], 2)
        self.assertAlmostEqual(by_kind["ReLU bwd"]["total_ms"], 2 * 0.095488)
        self.assertAlmostEqual(by_kind["BN fwd"]["dram_gb_per_s"], 28397824 / 30752)
        self.assertAlmostEqual(by_kind["BN fwd"]["memory_sol_pct"], 28.48)
        self.assertAlmostEqual(sum(g["pct_of_time"] for g in groups), 100.0)
        # One kind from two launches of different lengths: weighted by time, not averaged.
        two = benchmarks.group_ncu([
            {"Kernel Name": "threshold_kernel", "gpu__time_duration.sum": 1000.0, "dram__bytes.sum": 0.0,
             benchmarks.NCU_METRICS[4]: 90.0},
            {"Kernel Name": "threshold_kernel", "gpu__time_duration.sum": 3000.0, "dram__bytes.sum": 0.0,
             benchmarks.NCU_METRICS[4]: 50.0}])
        self.assertAlmostEqual(two[0]["dram_pct"], 60.0)


class CompareTableTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="benchmarks_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)

    def run_row(self, name, ips, host_ms=None, window=1000.0):
        return {"name": name, "images_per_s": ips, "no_activity_pct": 2.0, "capture_window_ms": window,
                "batch_wait_total_ms": 1.0, "h2d_submit_total_ms": 2.0, "idle_host_ms": host_ms}

    def test_paired_ratios_match_rounds_by_suffix(self):
        compare = {"runs": [self.run_row("synthetic", 3000), self.run_row("loader", 3000),
                            self.run_row("python", 2000), self.run_row("loader_2", 2900),
                            self.run_row("python_2", 1450), self.run_row("loader_3", 3000)]}
        self.assertEqual(benchmarks.paired_ratios(compare), [1.5, 2.0])  # round 3 has no python run

    def test_table_prints_paired_median_and_host_bound_share(self):
        compare = {"steps": 64, "nvtx": {"on": [], "off": []}, "teardown": [],
                   "runs": [self.run_row("synthetic", 3000, 0.0), self.run_row("loader", 3000, 0.5),
                            self.run_row("python", 2000, 300.0), self.run_row("loader_2", 2900, 0.5),
                            self.run_row("python_2", 1450, 400.0)]}
        with open(os.path.join(self.tmp, "compare.json"), "w") as f:
            json.dump(compare, f)
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            self.assertEqual(benchmarks.main(["table", "--out", self.tmp]), 0)
        text = out.getvalue()
        self.assertIn("paired rounds, (2)/(3): 1.50x, 2.00x; median 1.75x", text)
        self.assertIn("| python | 2000.0 | 66.7% | 1.16x | 2.0% | 30.0% |", text)  # median of 2000, 1450


# Stand-ins for nsys (runs the program, records its own pid), train_resnet50 (records its pid, then
# outlives any time limit), loader_bench (JSON after some noise; stuck with --workers 2) and ncu
# (prints $FAKE_NCU_OUTPUT's file).
FAKE_NSYS = r"""
import os, subprocess, sys
open(os.path.join(os.environ["FAKE_PIDS"], "nsys"), "w").write(str(os.getpid()))
args = sys.argv[1:]
i = 1
while args[i].startswith("--"):
    i += 1
sys.exit(subprocess.call(args[i:]))
"""
FAKE_TRAIN = r"""
import os, time
open(os.path.join(os.environ["FAKE_PIDS"], "train"), "w").write(str(os.getpid()))
time.sleep(30)
"""
FAKE_LOADER_BENCH = r"""
import json, sys, time
workers = int(sys.argv[sys.argv.index("--workers") + 1])
if workers == 2:
    time.sleep(30)
print("loader_bench: warming up", flush=True)
print("note: on stderr", file=sys.stderr, flush=True)
print(json.dumps({"threads": workers, "fused_images_per_s_per_thread": 1000.0,
                  "full_images_per_s_per_thread": 500.0, "decode_only_images_per_s_per_thread": 700.0}))
"""
FAKE_NCU = r"""
import os, sys
sys.stdout.write(open(os.environ["FAKE_NCU_OUTPUT"]).read())
"""


class RunTest(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.mkdtemp(prefix="benchmarks_run_test_")
        self.addCleanup(shutil.rmtree, self.tmp, True)
        self.bin = os.path.join(self.tmp, "bin")
        os.mkdir(self.bin)
        self.pids = {}
        self.addCleanup(self.kill_leftovers)

    def kill_leftovers(self):
        for pid in self.pids.values():
            if alive(pid):
                os.kill(pid, signal.SIGKILL)

    def read_pids(self, *names):
        for name in names:
            with open(os.path.join(self.tmp, name)) as f:
                self.pids[name] = int(f.read())
        return [self.pids[n] for n in names]

    def test_run_direct_stops_at_the_time_limit(self):
        t0 = time.monotonic()
        rc, secs, tail = benchmarks.run_direct(["sleep", "4"], os.path.join(self.tmp, "log"), 1)
        self.assertEqual((rc, tail), (benchmarks.KILLED, None))
        self.assertLess(time.monotonic() - t0, 2.5)
        self.assertLess(secs, 2.5)

    def test_run_direct_times_from_the_report_line(self):
        rc, secs, tail = benchmarks.run_direct(
            ["sh", "-c", "echo step; echo '  report   /tmp/r.json'; sleep 1"], os.path.join(self.tmp, "log"), 30)
        self.assertEqual(rc, 0)
        self.assertGreaterEqual(tail, 0.9)
        self.assertLess(tail, secs)

    def test_profile_timeout_stops_nsys_and_the_program(self):
        write_exe(os.path.join(self.bin, "nsys"), FAKE_NSYS)
        train = write_exe(os.path.join(self.tmp, "train_resnet50"), FAKE_TRAIN)
        env = {"PATH": self.bin + os.pathsep + os.environ["PATH"], "FAKE_PIDS": self.tmp}
        t0 = time.monotonic()
        summary, rc = benchmarks.profile(os.path.join(self.tmp, "out", "run"), ["--binary", train], 2,
                                         extra_env=env)
        self.assertEqual((summary, rc), (None, benchmarks.KILLED))
        self.assertLess(time.monotonic() - t0, 5)
        for name, pid in zip(("nsys", "train"), self.read_pids("nsys", "train")):
            self.assertFalse(alive(pid), name)
        with open(os.path.join(self.tmp, "out", "run.runlog")) as f:
            self.assertIn("profile.sh --prefix", f.readline())

    def test_loader_keeps_going_after_a_timeout(self):
        write_exe(os.path.join(self.bin, "loader_bench"), FAKE_LOADER_BENCH)
        train = write_exe(os.path.join(self.bin, "train_resnet50"), "")
        out = os.path.join(self.tmp, "out")
        with contextlib.redirect_stdout(io.StringIO()) as printed:
            rc = benchmarks.main(["loader", "--data", self.tmp, "--out", out, "--binary", train,
                                  "--workers", "1", "2", "--timeout", "1"])
        self.assertEqual(rc, 0)
        with open(os.path.join(out, "loader.json")) as f:
            self.assertEqual([r["threads"] for r in json.load(f)["rows"]], [1])
        self.assertIn("failed (timeout", printed.getvalue())
        self.assertTrue(os.path.isfile(os.path.join(out, "loader", "workers_2.log")))

    def test_ncu_output_is_kept_and_grouped(self):
        write_exe(os.path.join(self.bin, "ncu"), FAKE_NCU)
        train = write_exe(os.path.join(self.bin, "train_resnet50"), "")
        output = os.path.join(self.tmp, "ncu_output.txt")
        with open(output, "w") as f:
            f.write(NCU_OUTPUT)
        out = os.path.join(self.tmp, "out")
        env = {"PATH": self.bin + os.pathsep + os.environ["PATH"], "FAKE_NCU_OUTPUT": output}
        with mock.patch.dict(os.environ, env), contextlib.redirect_stdout(io.StringIO()):
            self.assertEqual(benchmarks.main(["ncu", "--out", out, "--binary", train]), 0)
        with open(os.path.join(out, "ncu", "ncu.csv")) as f:
            self.assertEqual(f.read(), NCU_OUTPUT)
        with open(os.path.join(out, "ncu.json")) as f:
            doc = json.load(f)
        self.assertEqual((doc["kernels"], [g["kind"] for g in doc["groups"]]), (3, ["ReLU bwd", "BN fwd", "ReLU fwd"]))


if __name__ == "__main__":
    unittest.main()
