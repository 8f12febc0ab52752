"""Tests for scripts/nsys_analysis/capture/kernels.py: which kernel names are layout conversions,
and short labels.

Run: /usr/bin/python3 -m pytest -q tests/scripts/nsys_analysis/capture/test_kernels.py
"""

import unittest

from scripts.support.nsys_exports import RealFixtureCase
from nsys_analysis.capture.kernels import (
    KERNEL_FAMILIES,
    OTHER_PARTS,
    is_layout_conversion,
    kernel_family,
    kernel_family_table,
    kernel_labels,
    short_kernel_label,
)


class LayoutPatternTest(unittest.TestCase):
    def test_patterns(self):
        yes = [
            "void cudnn::ops::nchwToNhwcKernel<float>()",
            "void cudnn::ops::nhwcToNchwKernel<__half>()",
            "nchw2nhwc_kernel",
            "NHWC2NCHW",
            "genericReformat::NCHWToNHWC",
            "nhwc_to_nchw_f16",
            "void transpose_nchw_nhwc<float>()",
        ]
        no = [
            "void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, "
            "(cudnnKernelDataType_t)2>()",
            "void nhwcAddPaddingKernel<float, float, float, (bool)1, (cudnnKernelDataType_t)2>()",
            "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
            "void cudnn::batchnorm_fwtr_nhwc_semiPersist<float>()",
            "void transpose_readWrite_alignment_kernel<float>()",
        ]
        for name in yes:
            self.assertTrue(is_layout_conversion(name), name)
        for name in no:
            self.assertFalse(is_layout_conversion(name), name)

    def test_labels(self):
        names = [
            "void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)0>()",
            "void at::native::vectorized_elementwise_kernel<(int)4, "
            "at::native::CUDAFunctor_add<float>>()",
            "void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)1>()",
            "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
            "void at::native::<unnamed>::multi_tensor_apply_kernel<TensorListMetadata<3>>()",
            "void foo::my_custom_kernel<int>(int)",
        ]
        self.assertEqual(
            kernel_labels(names),
            ["BN bwd #1", "elementwise add", "BN bwd #2", "conv dgrad", "SGD", "my_custom_kernel"],
        )


# cuDNN 9.19's NHWC batch-norm kernels on the H200 (train_resnet50 with and without --fused-bn).
_P = "(int)512, (int)16, (int)%d, (int)4, (int)1, (int)%d, "
BN_FWD = (
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, "
    + _P % (2, 0)
    + "(bool)0, (bool)0, (bool)1, (int)2>(cudnn::NhwcBatchNormFwdParams<T1, T2>)"
)
BN_BWD = (
    "void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, float, float, "
    + _P % (3, 1)
    + "(bool)1, (int)2>(cudnn::NhwcBatchNormBwdParams<T1, T2>)"
)
BN_RELU_FWD = (
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<__nv_bfloat16, float, __nv_bfloat16, "
    + _P % (5, 1)
    + "(bool)1, (bool)0, (bool)1, (int)2>(cudnn::NhwcBatchNormFwdParams<T1, T2>)"
)
BN_RELU_BWD = (
    "void cudnn::batchnorm_relu_bwtr_nhwc_semiPersist<float, float, float, "
    + _P % (3, 0)
    + "(bool)1, (int)2>(cudnn::NhwcBatchNormBwdParams<T1, T2>)"
)
BN_ADD_RELU_FWD = (
    "void cudnn::batchnorm_fwtr_nhwc_semiPersist<float, float, float, "
    + _P % (2, 0)
    + "(bool)0, (bool)1, (bool)1, (int)2>(cudnn::NhwcBatchNormFwdParams<T1, T2>)"
)
BN_ADD_RELU_BWD = (
    "void cudnn::batchnorm_add_relu_bwtr_nhwc_semiPersist<__nv_bfloat16, float, __nv_bfloat16, "
    + _P % (3, 1)
    + "(bool)1, (int)2>(cudnn::NhwcBatchNormBwdParams<T1, T2>)"
)
RELU_BWD = (
    "void at::native::vectorized_elementwise_kernel<(int)4, "
    "at::native::BinaryFunctor<float, float, float, "
    "void at::native::threshold_kernel_impl<float>(at::TensorIteratorBase &, T1, T1)"
    "::[lambda(float, float) (instance 1)]>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
)
ADD = (
    "void at::native::vectorized_elementwise_kernel<(int)8, "
    "at::native::CUDAFunctor_add<c10::BFloat16>, std::array<char *, (unsigned long)3>>(int, T2, T3)"
)
MAXPOOL_BWD = (
    "void at::native::<unnamed>::max_pool_backward_nhwc<c10::BFloat16, float>("
    "const T1 *, const long *, "
    "int, long, long, int, int, int, int, int, int, int, int, int, int, int, int, int, int, T1 *)"
)
CAST = (
    "void at::native::vectorized_elementwise_kernel<(int)4, "
    "at::native::<unnamed>::direct_copy_kernel_cuda(at::TensorIteratorBase &)"
    "::[lambda() (instance 3)]::operator ()() const::[lambda() (instance 12)]::operator ()"
    "() const::[lambda(float) (instance 1)], std::array<char *, (unsigned long)2>>(int, T2, T3)"
)
NVJET = "nvjet_sm90_tst_256x128_64x4_"
WGRAD = (
    "sm90_xmma_wgrad_indexed_implicit_gemm_bf16bf16_bf16f32_f32_nhwckrsc_nhwc_tilesize128x128x64_"
    "warpgroupsize1x1x1_g1_execute_segment_k_on_kernel__5x_cudnn"
)


class FusedBatchNormKernelTest(unittest.TestCase):
    def test_each_fused_kernel_has_its_label(self):
        self.assertEqual(
            [
                short_kernel_label(n)
                for n in (
                    BN_FWD,
                    BN_BWD,
                    BN_RELU_FWD,
                    BN_RELU_BWD,
                    BN_ADD_RELU_FWD,
                    BN_ADD_RELU_BWD,
                )
            ],
            [
                "BN fwd",
                "BN bwd",
                "BN+ReLU fwd",
                "BN+ReLU bwd",
                "BN+add+ReLU fwd",
                "BN+add+ReLU bwd",
            ],
        )

    def test_families(self):
        self.assertEqual(
            [
                kernel_family(n)
                for n in (
                    BN_FWD,
                    BN_RELU_BWD,
                    BN_ADD_RELU_FWD,
                    RELU_BWD,
                    ADD,
                    WGRAD,
                    "void foo::my_custom_kernel<int>(int)",
                )
            ],
            [
                "batch norm",
                "BN+ReLU (fused)",
                "BN+add+ReLU (fused)",
                "ReLU",
                "add",
                "convolution",
                "other",
            ],
        )

    def test_pooling_and_casts_have_their_own_families(self):
        self.assertEqual(
            [kernel_family(n) for n in (MAXPOOL_BWD, CAST)], ["pooling", "copies and casts"]
        )

    def test_other_convolution_algorithms_and_gemv(self):
        names = {
            "void cudnn::winograd_nonfused::winogradForwardData4x4<float, float>"
            "(cudnn::winograd_nonfused::WinogradDataParams<float, float>)": (
                "conv winograd",
                "convolution",
            ),
            "void fft2d_r2c_32x32<float, false, 1u, false>(float2 *, const float *, "
            "int, int, int, int, int, int, int, int, int, "
            "cudnn::reduced_divisor, bool, int2, int, int)": (
                "conv FFT",
                "convolution",
            ),
            "void gemv2T_kernel_val<int, int, float, float, float, float, 128, 16, 4, 4, "
            "false, false, cublasGemvParamsEx<int, cublasGemvTensorStridedBatched<const float>, "
            "cublasGemvTensorStridedBatched<const float>, cublasGemvTensorStridedBatched<float>, "
            "float>>(T13, T6, T6)": ("GEMM", "GEMM"),
        }
        for name, (label, family) in names.items():
            self.assertEqual((short_kernel_label(name), kernel_family(name)), (label, family), name)

    def test_cublas_nvjet_kernels_are_gemms(self):
        # The bf16 step on the H200 (cuDNN 9.19) launches cuBLAS nvJet GEMMs named so at the start
        # (the rest of the name was cut by the short label that capture was read with).
        self.assertEqual(short_kernel_label(NVJET), "GEMM")
        self.assertEqual(kernel_family(NVJET), "GEMM")

    def test_other_names_its_largest_parts(self):
        custom = "void foo::my_custom_kernel<int>(int)"
        loss = (
            "void at::native::nll_loss_forward_reduce_cuda_kernel_2d<float, float, long>(float *)"
        )
        rows = kernel_family_table(
            [(custom, 1e6), (custom, 2e6), (loss, 0.5e6), (WGRAD, 6.5e6)], steps=2
        )
        other = next(r for r in rows if r["family"] == "other")
        self.assertEqual(
            other["parts"],
            [
                {"label": "my_custom_kernel", "launches": 2, "total_ms": 3.0, "pct": 30.0},
                {"label": "NLL loss fwd", "launches": 1, "total_ms": 0.5, "pct": 5.0},
            ],
        )
        self.assertNotIn("parts", next(r for r in rows if r["family"] == "convolution"))
        many = [("void k%d(int)" % i, (i + 1) * 1e6) for i in range(OTHER_PARTS + 2)]
        parts = kernel_family_table(many)[0]["parts"]
        self.assertEqual(
            [p["label"] for p in parts], ["k%d" % i for i in range(OTHER_PARTS + 1, 1, -1)]
        )

    def test_family_table_in_family_order_with_shares_and_per_step_times(self):
        rows = kernel_family_table(
            [(WGRAD, 3e6), (BN_FWD, 1e6), (BN_BWD, 2e6), (RELU_BWD, 4e6)], steps=2
        )
        self.assertEqual([r["family"] for r in rows], ["batch norm", "ReLU", "convolution"])
        self.assertEqual([r["launches"] for r in rows], [2, 1, 1])
        self.assertEqual([r["total_ms"] for r in rows], [3.0, 4.0, 3.0])
        self.assertEqual([r["pct"] for r in rows], [30.0, 40.0, 30.0])
        self.assertEqual([r["ms_per_step"] for r in rows], [1.5, 2.0, 1.5])
        self.assertNotIn("ms_per_step", kernel_family_table([(ADD, 1e6)])[0])
        self.assertEqual(kernel_family_table([]), [])
        self.assertEqual(len(set(KERNEL_FAMILIES)), len(KERNEL_FAMILIES))


# The fused step (--fused-bn --precision fp16 --fuse-conv-bn --cuda-graph, batch 400) on an H100,
# cuDNN 9.19, as nsys's kernel summary names its kernels (cut where noted: the rest is long template
# arguments).
CUDNN_POINTWISE = (
    "cudnn_generated_pointwise_pointwise_pointwise_pointwise_cutlass_sm80_"
    "knob_37_32x64x1_16x64x1_1_kernel0_0"
)
CUDNN_DGRAD_EPILOGUE = (
    "cudnn_generated_fort_native_sm90_convBwdData_pointwise_pointwise_knob_40_128x128x64_5_0"
)
FUSED_FPROP_STATS = (
    "void xmma__5x_cudnn::gemm::warp_specialized_kernel_gmma_utmaldg<"
    "xmma__5x_cudnn::implicit_gemm::fprop::"
    "Warp_specialized_gmma_fprop_bn_stat_kernel_traits<"  # cut
)
FUSED_WGRAD_PROLOGUE = (
    "void xmma__5x_cudnn::gemm::warp_specialized_kernel_gmma_utmaldg<"
    "xmma__5x_cudnn::implicit_gemm::wgrad_indexed::"
    "Warp_specialized_gmma_bn_apply_kernel_traits<"  # cut
)
ATEN_BN_REDUCE = (
    "void at::native::batch_norm_backward_reduce_channels_last_kernel<(int)4, c10::Half, float, "
    "float>(const T2 *, const T2 *, const T3 *, const T3 *, T3 *)"  # cut
)
BN_FINALIZE = "workload::<unnamed>::bn_finalize(workload::BnFinalizeArgs)"
BN_GRAD_COEFFICIENTS = "workload::<unnamed>::bn_grad_coefficients(workload::BnGradCoefficientArgs)"
GRAPH_MEMSET = (
    "workload::<unnamed>::graph_memset(unsigned char *, unsigned long, unsigned int, unsigned int, "
    "unsigned long, unsigned long)"
)
SCALER = (
    "at::native::amp_update_scale_cuda_kernel(float *, int *, const float *, double, double, int)"
)


class FusedConvBnKernelTest(unittest.TestCase):
    def test_fused_step_kernels_have_their_families(self):
        expected = {
            # 13.1 of the step's 55.2 ms of kernels: elementwise passes, no GEMM despite "cutlass".
            CUDNN_POINTWISE: ("cuDNN pointwise", "BN apply (cuDNN pointwise)"),
            CUDNN_DGRAD_EPILOGUE: ("conv dgrad", "convolution"),
            FUSED_FPROP_STATS: ("conv fprop", "convolution"),
            FUSED_WGRAD_PROLOGUE: ("conv wgrad", "convolution"),
            ATEN_BN_REDUCE: ("BN bwd", "batch norm"),
            BN_FINALIZE: ("BN fwd", "batch norm"),
            BN_GRAD_COEFFICIENTS: ("BN bwd", "batch norm"),
            SCALER: ("loss scaler", "optimizer"),
        }
        for name, (label, family) in expected.items():
            self.assertEqual((short_kernel_label(name), kernel_family(name)), (label, family), name)

    def test_anonymous_namespaces_keep_the_function_name(self):
        self.assertEqual(short_kernel_label(GRAPH_MEMSET), "graph_memset")
        self.assertEqual(
            short_kernel_label(
                "void at::native::<unnamed>::indexSelectSmallIndex<float, long, unsigned int, "
                "(int)1, (int)1, (int)-2>(at::cuda::detail::TensorInfo<T1, T3>)"
            ),
            "indexSelectSmallIndex",
        )
        self.assertEqual(short_kernel_label("void (anonymous namespace)::halo<int>(int)"), "halo")
        parts = kernel_family_table([(GRAPH_MEMSET, 2e6), (CUDNN_POINTWISE, 1e6)])[-1]["parts"]
        self.assertEqual([p["label"] for p in parts], ["graph_memset"])

    def test_pointwise_family_sits_with_the_batch_norms(self):
        i = KERNEL_FAMILIES.index("BN apply (cuDNN pointwise)")
        self.assertEqual(KERNEL_FAMILIES[i - 1], "BN+add+ReLU (fused)")
        self.assertEqual(KERNEL_FAMILIES[i + 1], "ReLU")


class RealFixtureKernelTest(RealFixtureCase):
    def test_channels_last_cudnn_conversions_are_not_layout_mismatches(self):
        names = {k.name for k in self.ex.kernels}
        self.assertTrue(any("convertTensor_kernel" in n for n in names))
        self.assertEqual(self.s["layout_conversion_kernels"], 0)
        self.assertEqual(self.s["layout_conversion_names"], {})

    def test_the_python_references_families(self):
        fams = {r["family"]: r for r in self.s["kernel_families"]}
        self.assertEqual(sum(r["launches"] for r in fams.values()), len(self.ex.kernels))
        self.assertAlmostEqual(sum(r["pct"] for r in fams.values()), 100.0, delta=0.05)
        for fam in ("batch norm", "ReLU", "add", "convolution", "optimizer"):
            self.assertIn(fam, fams)  # an unfused PyTorch step has them all
        self.assertNotIn("BN+ReLU (fused)", fams)
        self.assertIn("pooling", fams)  # the stem's max pool, forward and backward
        other = fams.get("other")
        if other:  # what is left is named, largest first, and is part of other
            parts = other["parts"]
            self.assertTrue(0 < len(parts) <= OTHER_PARTS)
            self.assertEqual(parts, sorted(parts, key=lambda p: -p["total_ms"]))
            self.assertLessEqual(sum(p["total_ms"] for p in parts), other["total_ms"] + 1e-6)


if __name__ == "__main__":
    unittest.main()
