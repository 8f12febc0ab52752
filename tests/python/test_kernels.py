"""Tests for scripts/nsys_analysis/kernels.py: which kernel names are layout conversions, and short labels.

Run: /usr/bin/python3 -m pytest -q tests/python   or   python3 -m unittest discover -s tests/python
"""

import unittest

# nsys_exports first: it puts scripts/ on sys.path.
from nsys_exports import RealFixtureCase
from nsys_analysis.kernels import is_layout_conversion, kernel_labels


class LayoutPatternTest(unittest.TestCase):
    def test_patterns(self):
        yes = ["void cudnn::ops::nchwToNhwcKernel<float>()", "void cudnn::ops::nhwcToNchwKernel<__half>()",
               "nchw2nhwc_kernel", "NHWC2NCHW", "genericReformat::NCHWToNHWC", "nhwc_to_nchw_f16",
               "void transpose_nchw_nhwc<float>()"]
        no = ["void cudnn::engines_precompiled::convertTensor_kernel<float, float, float, (cudnnKernelDataType_t)2>()",
              "void nhwcAddPaddingKernel<float, float, float, (bool)1, (cudnnKernelDataType_t)2>()",
              "sm90_xmma_fprop_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc_tilesize128x128x32",
              "void cudnn::batchnorm_fwtr_nhwc_semiPersist<float>()", "void transpose_readWrite_alignment_kernel<float>()"]
        for name in yes:
            self.assertTrue(is_layout_conversion(name), name)
        for name in no:
            self.assertFalse(is_layout_conversion(name), name)

    def test_labels(self):
        names = ["void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)0>()",
                 "void at::native::vectorized_elementwise_kernel<(int)4, at::native::CUDAFunctor_add<float>>()",
                 "void cudnn::batchnorm_bwtr_nhwc_semiPersist<float, (int)1>()",
                 "sm90_xmma_dgrad_implicit_gemm_f32f32_tf32f32_f32_nhwckrsc_nhwc",
                 "void at::native::<unnamed>::multi_tensor_apply_kernel<TensorListMetadata<3>>()",
                 "void foo::my_custom_kernel<int>(int)"]
        self.assertEqual(kernel_labels(names),
                         ["BN bwd #1", "elementwise add", "BN bwd #2", "conv dgrad", "SGD", "my_custom_kernel"])


class RealFixtureKernelTest(RealFixtureCase):
    def test_channels_last_cudnn_conversions_are_not_layout_mismatches(self):
        names = {k.name for k in self.ex.kernels}
        self.assertTrue(any("convertTensor_kernel" in n for n in names))
        self.assertEqual(self.s["layout_conversion_kernels"], 0)
        self.assertEqual(self.s["layout_conversion_names"], {})


if __name__ == "__main__":
    unittest.main()
