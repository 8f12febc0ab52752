"""Kernel names: NCHW <-> NHWC layout conversions and short labels for demangled names."""

import re
from collections import defaultdict


# NCHW <-> NHWC layout conversions. Patterns are deliberately narrow, from real kernel names:
#  * cuDNN's legacy transposes are `cudnn::ops::nchwToNhwcKernel` / `nhwcToNchwKernel`; TensorRT and
#    other libraries spell them `nchw2nhwc`, `NCHWToNHWC`, `nhwc_to_nchw`: the first pattern matches
#    an explicit direction between the two layouts, any case, with `to`, `2` or `_` between them.
#  * a generic transpose/reformat/permute/convert kernel counts only when its name also names both
#    layouts (e.g. `transpose_nchw_nhwc`).
# Deliberately NOT matched: the channels_last Python reference (tests/fixtures/nsys/py_reuse8) runs
# `cudnn::engines_precompiled::convertTensor_kernel<float, float, float, 2>` 3x and
# `nhwcAddPaddingKernel` 2x per step, all inside the first convolution (3 input channels padded for
# the tensor-core engine), with no layout mismatch anywhere in the model; counting them would fail a
# run that is fully channels_last. The ATen copy kernel that a `.contiguous(channels_last)` would
# use (`direct_copy_kernel_cuda`) is an ordinary elementwise copy and cannot be told apart by name
# either.
LAYOUT_DIRECT = re.compile(r"nchw_?(?:to|2)_?nhwc|nhwc_?(?:to|2)_?nchw", re.IGNORECASE)
LAYOUT_GENERIC = re.compile(r"transpose|reformat|permute|convert", re.IGNORECASE)
_NCHW = re.compile(r"nchw", re.IGNORECASE)
_NHWC = re.compile(r"nhwc", re.IGNORECASE)


def is_layout_conversion(name):
    """True for kernels whose demangled name marks an NCHW <-> NHWC conversion (see
    LAYOUT_DIRECT)."""
    if LAYOUT_DIRECT.search(name):
        return True
    return bool(LAYOUT_GENERIC.search(name) and _NCHW.search(name) and _NHWC.search(name))


# (pattern on the demangled name, short label), first match wins. Written for the ATen, cuDNN,
# cuBLAS and CUTLASS kernels a ResNet-50 training step launches (cuBLAS's nvJet GEMMs too: the bf16
# step on the H200, cuDNN 9.19, launches nvjet_sm90_* kernels for 3.2 ms of its 20.7 ms of kernels).
# cuDNN's fused batch norm (--fused-bn) names its operation in the backward kernel
# (batchnorm_relu_bwtr_..., batchnorm_add_relu_bwtr_...), the forward only in template flags
# (_fused_bn_forward).
# The convolutions fused with their batch norms (--fuse-conv-bn, fp16, cuDNN 9.19 on an H100) run
# as cuDNN's precompiled fusion kernels (implicit_gemm::fprop/dgrad/wgrad_indexed::..._bn_stat_ or
# _bn_apply_: the convolution patterns below take them), as runtime-compiled convolutions with a
# pointwise epilogue (cudnn_generated_fort_native_sm90_convBwdData_pointwise_...), and as
# runtime-compiled pointwise graphs (cudnn_generated_pointwise_..._cutlass_sm80_...: each batch
# norm's dBNApply in backward and the block's output in forward). The last name holds "cutlass" but
# is no GEMM, so its pattern comes first. The batch norm's own statistics and gradient coefficients
# are the workload's small per-channel kernels (bn_finalize, bn_grad_coefficients).
_KERNEL_LABEL_PATTERNS = [
    (r"^cudnn_generated_pointwise", "cuDNN pointwise"),
    (r"batchnorm_add_relu_bwtr", "BN+add+ReLU bwd"),
    (r"batchnorm_relu_bwtr", "BN+ReLU bwd"),
    (r"batchnorm_bwtr|batch_norm_backward|bn_bw|BatchNormBwd|\bbn_grad_coefficients", "BN bwd"),
    (
        r"batchnorm_fwtr|batch_norm_(?:collect|elemt|transform)|bn_fw|BatchNormFwd"
        r"|batch_norm_forward|\bbn_finalize",
        "BN fwd",
    ),
    (r"nchw_?(?:to|2)_?nhwc", "NCHW->NHWC"),
    (r"nhwc_?(?:to|2)_?nchw", "NHWC->NCHW"),
    (r"wgrad|Conv2dWgrad|convBwdFilter", "conv wgrad"),
    (r"dgrad|Conv2dDgrad|convBwdData", "conv dgrad"),
    (r"fprop|Conv2dFprop|implicit_convolve|convFwd", "conv fprop"),
    # cuDNN's other convolution algorithms (NCHW or older GPUs): Winograd transforms and FFT passes.
    (r"winograd", "conv winograd"),
    (r"fft2d_|fft_rt_|flip_filter", "conv FFT"),
    (r"threshold_kernel", "ReLU bwd"),
    (r"clamp_scalar|clamp_min", "ReLU fwd"),
    (r"multi_tensor_apply|_foreach|sgd", "SGD"),
    (r"amp_update_scale|non_finite_check_and_unscale", "loss scaler"),
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
    (r"gemm|gemv|cublas|cutlass|nvjet", "GEMM"),
    (r"elementwise", "elementwise"),
]
_KERNEL_LABELS: list[tuple[re.Pattern[str], str]] = [
    (re.compile(p, re.IGNORECASE), label) for p, label in _KERNEL_LABEL_PATTERNS
]


# cuDNN's NHWC batch-norm forward: batchnorm_fwtr_nhwc_semiPersist<T, Tparam, T, six ints,
# (bool)RELU, (bool)ADD_RELU, (bool)..., (int)...>, as read off cuDNN 9.19's kernels on the H200
# (tests/scripts' names): BN alone (0, 0, 1), BN+ReLU (1, 0, 1), BN+add+ReLU (0, 1, 1).
_BN_FWD_FLAGS = re.compile(
    r"batchnorm_fwtr_nhwc\w*<.*\(bool\)([01]), \(bool\)([01]), \(bool\)[01], \(int\)\d+>"
)


def _fused_bn_forward(name):
    """ "BN+ReLU fwd" / "BN+add+ReLU fwd" for cuDNN's fused batch-norm forward kernels, else
    None."""
    m = _BN_FWD_FLAGS.search(name)
    if not m:
        return None
    relu, add_relu = m.groups()
    return "BN+add+ReLU fwd" if add_relu == "1" else "BN+ReLU fwd" if relu == "1" else None


def short_kernel_label(name):
    """A readable short label for a demangled kernel name ("BN fwd", "conv dgrad", "SGD", ...)."""
    fused = _fused_bn_forward(name)
    if fused:
        return fused
    for pattern, label in _KERNEL_LABELS:
        if pattern.search(name):
            return label
    base = re.sub(r"^void\s+", "", name)
    # An anonymous namespace (`<unnamed>::` as nsys demangles it, `(anonymous namespace)::` as
    # c++filt does) is no template: dropped first, or `<.*` below would cut the name there.
    base = re.sub(r"<unnamed>::|\(anonymous namespace\)::", "", base)
    base = re.sub(r"<.*", "", base).split("(")[0].split("::")[-1]
    return base[:28] + ("..." if len(base) > 28 else "")


def kernel_labels(names):
    """Short labels for ranked kernel groups; a label shared by several groups gets its rank among
    them (#1 the largest), since the groups are distinct implementations."""
    shorts = [short_kernel_label(n) for n in names]
    seen: defaultdict[str, int] = defaultdict(int)
    out: list[str] = []
    for sh in shorts:
        seen[sh] += 1
        out.append("%s #%d" % (sh, seen[sh]) if shorts.count(sh) > 1 else sh)
    return out


# Kernel families, in table order: what a fused batch norm removes (ReLU, the residual add's
# forward) and what it merges (batch norm with them), and the pointwise passes that apply a batch
# norm fused into the convolutions; then what neither touches. "copies and casts"
# is mostly autocast's per-step casts of the weights to bf16 (ATen's copy kernels).
KERNEL_FAMILIES = (
    "batch norm",
    "BN+ReLU (fused)",
    "BN+add+ReLU (fused)",
    "BN apply (cuDNN pointwise)",
    "ReLU",
    "add",
    "convolution",
    "GEMM",
    "optimizer",
    "pooling",
    "copies and casts",
    "other",
)
# How many of the largest labels kernel_family_table names inside "other".
OTHER_PARTS = 4
_FAMILY_OF_LABEL = {
    "BN fwd": "batch norm",
    "BN bwd": "batch norm",
    "BN+ReLU fwd": "BN+ReLU (fused)",
    "BN+ReLU bwd": "BN+ReLU (fused)",
    "BN+add+ReLU fwd": "BN+add+ReLU (fused)",
    "BN+add+ReLU bwd": "BN+add+ReLU (fused)",
    "cuDNN pointwise": "BN apply (cuDNN pointwise)",
    "ReLU fwd": "ReLU",
    "ReLU bwd": "ReLU",
    # Forward residual adds and, in backward, autograd's sum of the two gradients of a block's
    # input.
    "elementwise add": "add",
    "conv fprop": "convolution",
    "conv dgrad": "convolution",
    "conv wgrad": "convolution",
    "conv winograd": "convolution",
    "conv FFT": "convolution",
    "cuDNN convert": "convolution",
    "NHWC pad": "convolution",
    "GEMM": "GEMM",
    "split-K reduce": "GEMM",
    "SGD": "optimizer",
    "loss scaler": "optimizer",
    "max-pool fwd": "pooling",
    "max-pool bwd": "pooling",
    "avg-pool": "pooling",
    "copy": "copies and casts",
}


def kernel_family(name):
    """The family (one of KERNEL_FAMILIES) of a demangled kernel name."""
    return _FAMILY_OF_LABEL.get(short_kernel_label(name), "other")


def kernel_family_table(durations, steps=None):
    """Kernel time by family from (demangled name, ns) pairs: a list of dicts (family, launches,
    total_ms, pct of all kernel time, and ms_per_step when `steps` is given), in KERNEL_FAMILIES
    order, families without kernels left out. The "other" row also has `parts`: its OTHER_PARTS
    largest short labels (label, launches, total_ms, pct of all kernel time), so that what no family
    names is still named.
    """
    total: defaultdict[str, float] = defaultdict(float)
    count: defaultdict[str, int] = defaultdict(int)
    other: defaultdict[str, list[float]] = defaultdict(lambda: [0, 0.0])  # label: [launches, ns]
    for name, ns in durations:
        label = short_kernel_label(name)
        fam = _FAMILY_OF_LABEL.get(label, "other")
        total[fam] += ns
        count[fam] += 1
        if fam == "other":
            other[label][0] += 1
            other[label][1] += ns
    grand = sum(total.values()) or 1.0
    rows = []
    for fam in KERNEL_FAMILIES:
        if count[fam]:
            row = {
                "family": fam,
                "launches": count[fam],
                "total_ms": round(total[fam] / 1e6, 3),
                "pct": round(100.0 * total[fam] / grand, 2),
            }
            if steps:
                row["ms_per_step"] = round(total[fam] / 1e6 / steps, 3)
            if fam == "other":
                largest = sorted(other.items(), key=lambda kv: (-kv[1][1], kv[0]))[:OTHER_PARTS]
                row["parts"] = [
                    {
                        "label": label,
                        "launches": n,
                        "total_ms": round(ns / 1e6, 3),
                        "pct": round(100.0 * ns / grand, 2),
                    }
                    for label, (n, ns) in largest
                ]
            rows.append(row)
    return rows
