"""Kernel names: NCHW <-> NHWC layout conversions and short labels for demangled names."""

import re
from collections import defaultdict


# NCHW <-> NHWC layout conversions. Patterns are deliberately narrow, from real kernel names:
#  * cuDNN's legacy transposes are `cudnn::ops::nchwToNhwcKernel` / `nhwcToNchwKernel`; TensorRT and
#    other libraries spell them `nchw2nhwc`, `NCHWToNHWC`, `nhwc_to_nchw`: the first pattern matches an
#    explicit direction between the two layouts, any case, with `to`, `2` or `_` between them.
#  * a generic transpose/reformat/permute/convert kernel counts only when its name also names both
#    layouts (e.g. `transpose_nchw_nhwc`).
# Deliberately NOT matched: the channels_last Python reference (tests/fixtures/nsys/py_reuse8) runs
# `cudnn::engines_precompiled::convertTensor_kernel<float, float, float, 2>` 3x and
# `nhwcAddPaddingKernel` 2x per step, all inside the first convolution (3 input channels padded for
# the tensor-core engine), with no layout mismatch anywhere in the model; counting them would fail a
# run that is fully channels_last. The ATen copy kernel that a `.contiguous(channels_last)` would use
# (`direct_copy_kernel_cuda`) is an ordinary elementwise copy and cannot be told apart by name either.
LAYOUT_DIRECT = re.compile(r"nchw_?(?:to|2)_?nhwc|nhwc_?(?:to|2)_?nchw", re.IGNORECASE)
LAYOUT_GENERIC = re.compile(r"transpose|reformat|permute|convert", re.IGNORECASE)
_NCHW = re.compile(r"nchw", re.IGNORECASE)
_NHWC = re.compile(r"nhwc", re.IGNORECASE)


def is_layout_conversion(name):
    """True for kernels whose demangled name marks an NCHW <-> NHWC conversion (see LAYOUT_DIRECT)."""
    if LAYOUT_DIRECT.search(name):
        return True
    return bool(LAYOUT_GENERIC.search(name) and _NCHW.search(name) and _NHWC.search(name))


# (pattern on the demangled name, short label), first match wins. Written for the ATen, cuDNN, cuBLAS
# and CUTLASS kernels a ResNet-50 training step launches.
_KERNEL_LABELS = [
    (r"batchnorm_bwtr|batch_norm_backward|bn_bw|BatchNormBwd", "BN bwd"),
    (r"batchnorm_fwtr|batch_norm_(?:collect|elemt|transform)|bn_fw|BatchNormFwd|batch_norm_forward", "BN fwd"),
    (r"nchw_?(?:to|2)_?nhwc", "NCHW->NHWC"),
    (r"nhwc_?(?:to|2)_?nchw", "NHWC->NCHW"),
    (r"wgrad|Conv2dWgrad", "conv wgrad"),
    (r"dgrad|Conv2dDgrad", "conv dgrad"),
    (r"fprop|Conv2dFprop|implicit_convolve", "conv fprop"),
    (r"threshold_kernel", "ReLU bwd"),
    (r"clamp_scalar|clamp_min", "ReLU fwd"),
    (r"multi_tensor_apply|_foreach|sgd", "SGD"),
    (r"max_pool_backward", "max-pool bwd"),
    (r"max_pool_forward", "max-pool fwd"),
    (r"avg_pool|adaptive_avg", "avg-pool"),
    (r"MeanOps|mean_kernel", "mean"),
    (r"softmax_warp_backward|log_softmax_backward|softmax_backward", "softmax bwd"),
    (r"softmax", "softmax fwd"),
    (r"nll_loss_backward", "NLL loss bwd"),
    (r"nll_loss", "NLL loss fwd"),
    (r"splitKreduce|ReduceSplitK", "split-K reduce"),
    (r"convertTensor", "cuDNN convert"),
    (r"nhwcAddPadding", "NHWC pad"),
    (r"init_device_workspace", "cuDNN init"),
    (r"direct_copy_kernel|copy_kernel", "copy"),
    (r"CUDAFunctor_add|AddFunctor", "elementwise add"),
    (r"MulFunctor", "elementwise mul"),
    (r"reduce_kernel|sum_functor", "reduce"),
    (r"gemm|cublas|cutlass", "GEMM"),
    (r"elementwise", "elementwise"),
]
_KERNEL_LABELS = [(re.compile(p, re.IGNORECASE), label) for p, label in _KERNEL_LABELS]


def short_kernel_label(name):
    """A readable short label for a demangled kernel name ("BN fwd", "conv dgrad", "SGD", ...)."""
    for pattern, label in _KERNEL_LABELS:
        if pattern.search(name):
            return label
    base = re.sub(r"^void\s+", "", name)
    base = re.sub(r"<.*", "", base).split("(")[0].split("::")[-1]
    return base[:28] + ("..." if len(base) > 28 else "")


def kernel_labels(names):
    """Short labels for ranked kernel groups; a label shared by several groups gets its rank among
    them (#1 the largest), since the groups are distinct implementations."""
    shorts = [short_kernel_label(n) for n in names]
    seen, out = defaultdict(int), []
    for sh in shorts:
        seen[sh] += 1
        out.append("%s #%d" % (sh, seen[sh]) if shorts.count(sh) > 1 else sh)
    return out
