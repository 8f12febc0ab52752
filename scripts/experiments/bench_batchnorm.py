#!/usr/bin/env python3
"""cuDNN's batch norm against ATen's own channels_last kernels, in the GPU-bound ResNet-50 step.

usage: scripts/experiments/bench_batchnorm.py [--steps N] [--warmup N] [--rounds N]
                                              [--batch-size N] [--no-kernels]
       (a CUDA machine with PyTorch and torchvision)

The training step of the Python reference (ResNet-50, 101 classes, channels_last, SGD lr 0.1 /
momentum 0.9 / wd 1e-4, data already on the GPU) timed with torch.nn.functional.batch_norm as it is
(cuDNN's NHWC kernels) and replaced by torch.native_batch_norm (ATen's batch_norm_*_channels_last
kernels), --rounds alternating runs of --steps steps after --warmup, in one process (defaults: 3
rounds of 30 steps after 5, batch 128); then, unless --no-kernels, the top kernels of one
forward+backward with ATen's batch norm. This measured the "tried and rejected" row of
docs/BENCHMARKS.md (ATen's batch norm 4.5% slower).

Exit status (nsys_analysis.common.exit_status): 0 done; 1 PyTorch, torchvision or a CUDA device
missing (named on stderr); 2 a bad flag; 130 Ctrl-C.
"""

import argparse
import os
import sys
import time

# nsys_analysis is in scripts/, the folder above this one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nsys_analysis.common.argtypes import positive_int  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, exit_with  # noqa: E402


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--steps", type=positive_int, default=30, help="timed steps a run (default 30)")
    p.add_argument(
        "--warmup", type=positive_int, default=5, help="untimed steps before them (default 5)"
    )
    p.add_argument(
        "--rounds",
        type=positive_int,
        default=3,
        help="rounds, each a cuDNN run then an ATen run (default 3; the median is reported)",
    )
    p.add_argument(
        "--batch-size", type=positive_int, default=128, help="images a step (default 128)"
    )
    p.add_argument("--no-kernels", action="store_true", help="skip the profile of ATen's kernels")
    return p.parse_args(argv)


def import_torch():
    """torch, torchvision and F, or a message naming what is missing."""
    try:
        # PyTorch is optional (checked here at run time) and not installed where mypy runs.
        import torch
        import torch.nn.functional as F
    except ImportError as e:
        raise RuntimeError("PyTorch is not importable by %s (%s)" % (sys.executable, e)) from None
    try:
        import torchvision
    except ImportError as e:
        raise RuntimeError(
            "torchvision is not importable by %s (%s)" % (sys.executable, e)
        ) from None
    if not torch.cuda.is_available():
        raise RuntimeError(
            "no CUDA device for PyTorch %s: this benchmark times GPU kernels" % torch.__version__
        )
    return torch, torchvision, F


def model_and_batch(torch, torchvision, batch_size):
    m = torchvision.models.resnet50(weights=None, num_classes=101).to(
        "cuda", memory_format=torch.channels_last
    )
    x = torch.randn(batch_size, 3, 224, 224, device="cuda").contiguous(
        memory_format=torch.channels_last
    )
    y = torch.randint(0, 101, (batch_size,), device="cuda")
    return m, x, y


def timed_run(torch, torchvision, F, args):
    """Images/s and the last loss of one run with the batch norm F.batch_norm is now."""
    torch.manual_seed(0)
    m, x, y = model_and_batch(torch, torchvision, args.batch_size)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)

    def step():
        loss = F.cross_entropy(m(x), y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    t = time.perf_counter()
    for _ in range(args.steps):
        loss = step()
    torch.cuda.synchronize()
    return args.steps * args.batch_size / (time.perf_counter() - t), loss.item()


def main(argv=None):
    args = parse_args(sys.argv[1:] if argv is None else argv)
    try:
        torch, torchvision, F = import_torch()
    except RuntimeError as e:
        print("bench_batchnorm.py: error: %s" % e, file=sys.stderr)
        return FAILURE
    torch.backends.cudnn.benchmark = False
    cudnn_bn = F.batch_norm

    def native_bn(
        input,
        running_mean,
        running_var,
        weight=None,
        bias=None,
        training=False,
        momentum=0.1,
        eps=1e-5,
    ):
        return torch.native_batch_norm(
            input, weight, bias, running_mean, running_var, training, momentum, eps
        )[0]

    results: dict[str, list[float]] = {"cudnn": [], "native": []}
    try:
        for _ in range(args.rounds):
            for mode, bn in (("cudnn", cudnn_bn), ("native", native_bn)):
                F.batch_norm = bn
                ips, loss = timed_run(torch, torchvision, F, args)
                results[mode].append(ips)
                print(mode, round(ips, 1), round(loss, 4), flush=True)
        median = {k: sorted(v)[len(v) // 2] for k, v in results.items()}
        for k, v in median.items():
            print(k, "median", round(v, 1))
        print("native/cudnn", round(median["native"] / median["cudnn"], 4))
        if not args.no_kernels:  # which kernels ATen's batch norm runs
            F.batch_norm = native_bn
            from torch.profiler import (
                ProfilerActivity,
                profile,
            )

            m, x, _ = model_and_batch(torch, torchvision, args.batch_size)
            with profile(activities=[ProfilerActivity.CUDA]) as p:
                m(x).sum().backward()
                torch.cuda.synchronize()
            print(
                p.key_averages().table(
                    sort_by="cuda_time_total", row_limit=12, max_name_column_width=70
                )
            )
    finally:
        F.batch_norm = cudnn_bn
    return OK


if __name__ == "__main__":
    exit_with(main, "bench_batchnorm.py")
