"""Tests for scripts/nsys_analysis/bench/ncu.py: reading `ncu --csv --page raw` output as it comes
on stdout, and grouping its kernels by kind with time-weighted percentages.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/bench/test_ncu.py
(all tests: scripts/dev/python_tests.sh)
"""

import unittest

from nsys_analysis.bench.ncu import NCU_METRICS, group_ncu, parse_ncu_csv

# Three records of a real `ncu --csv --page raw --print-units base --print-kernel-base demangled`
# run on the H200 (Nsight Compute 2025.3.1; columns trimmed), between the program's own output and
# ncu's notes, as they come on stdout (a backslash at a line's end continues that line: the string
# holds each line unbroken).
NCU_OUTPUT = """==WARNING== Note: Running with unmodified GPU clocks. If not controlled otherwise, \
profiling results may be inconsistent.
==PROF== Connected to process 772 (/work/main/build-gpu/bin/train_resnet50)
train_resnet50 0.1.0: cuda, batch 128, 224 px, 1 warm-up + 2 captured steps, \
synthetic batches (no loader)
summary (2 captured steps of batch 128, after 1 warm-up)
==PROF== Disconnected from process 772
"ID","Process ID","Kernel Name","Block Size","gpu__time_duration.sum","dram__bytes.sum",\
"gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",\
"sm__throughput.avg.pct_of_peak_sustained_elapsed",\
"dram__throughput.avg.pct_of_peak_sustained_elapsed"
"","","","","ns","byte","%","%","%"
"0","772",\
"void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, 512, 16, 2, 4, 1, 1, 0, 0, 1, 2>\
(cudnn::NhwcBatchNormFwdParams<T1, T2>)","(512, 1, 1)","30,752","28,397,824","28.48","22.15","19.21"
"1","772",\
"void at::vectorized_elementwise_kernel<4, at::<unnamed>::launch_clamp_scalar(\
at::TensorIteratorBase &, c10::Scalar, c10::Scalar, detail::ClampLimits)::[lambda() (instance 1)]\
::operator ()() const::[lambda() (instance 7)]::operator ()() const::[lambda(float) (instance 1)], \
std::array<char *, 2>>(int, T2, T3)","(128, 1, 1)","13,184","29,985,280","47.34","19.48","47.34"
"93","772",\
"void at::elementwise_kernel<128, 2, void at::gpu_kernel_impl_nocast<at::BinaryFunctor<float, \
float, float, void at::<unnamed>::threshold_kernel_impl<float>(at::TensorIteratorBase &, T1, T1)\
::[lambda(float, float) (instance 1)]>>(at::TensorIteratorBase &, const T1 &)\
::[lambda(int) (instance 1)]>(int, T3)","(128, 1, 1)","95,488","144,306,432","95.29","28.98","31.42"
"""


class NcuTest(unittest.TestCase):
    def test_parse_skips_program_output_and_units_and_reads_grouped_digits(self):
        rows = parse_ncu_csv(NCU_OUTPUT)
        self.assertEqual([r["ID"] for r in rows], ["0", "1", "93"])
        self.assertEqual(rows[0]["gpu__time_duration.sum"], 30752.0)
        self.assertEqual(rows[2]["dram__bytes.sum"], 144306432.0)
        self.assertEqual(rows[1]["sm__throughput.avg.pct_of_peak_sustained_elapsed"], 19.48)

    def test_parse_of_no_records(self):
        self.assertEqual(parse_ncu_csv("==ERROR== the application returned an error\n"), [])

    def test_groups_by_kernel_kind_with_time_weighted_percentages(self):
        groups = group_ncu(
            parse_ncu_csv(
                NCU_OUTPUT + NCU_OUTPUT.splitlines()[-1].replace('"93"', '"94"', 1) + "\n"
            )
        )
        by_kind = {g["kind"]: g for g in groups}
        self.assertEqual([g["kind"] for g in groups], ["ReLU bwd", "BN fwd", "ReLU fwd"])
        self.assertEqual(by_kind["ReLU bwd"]["launches"], 2)
        self.assertAlmostEqual(by_kind["ReLU bwd"]["total_ms"], 2 * 0.095488)
        self.assertAlmostEqual(by_kind["BN fwd"]["dram_gb_per_s"], 28397824 / 30752)
        self.assertAlmostEqual(by_kind["BN fwd"]["memory_sol_pct"], 28.48)
        self.assertAlmostEqual(sum(g["pct_of_time"] for g in groups), 100.0)
        # One kind from two launches of different lengths: weighted by time, not averaged.
        two = group_ncu(
            [
                {
                    "Kernel Name": "threshold_kernel",
                    "gpu__time_duration.sum": 1000.0,
                    "dram__bytes.sum": 0.0,
                    NCU_METRICS[4]: 90.0,
                },
                {
                    "Kernel Name": "threshold_kernel",
                    "gpu__time_duration.sum": 3000.0,
                    "dram__bytes.sum": 0.0,
                    NCU_METRICS[4]: 50.0,
                },
            ]
        )
        self.assertAlmostEqual(two[0]["dram_pct"], 60.0)


if __name__ == "__main__":
    unittest.main()
