#!/usr/bin/env python3
"""cuDNN's batch norm against ATen's own channels_last kernels, in the GPU-bound ResNet-50 step.

usage: python3 scripts/bench_batchnorm.py        (a CUDA machine with PyTorch and torchvision)

The training step of the Python reference (ResNet-50, 101 classes, channels_last, batch 128, SGD
lr 0.1 / momentum 0.9 / wd 1e-4, data already on the GPU) timed with torch.nn.functional.batch_norm
as it is (cuDNN's NHWC kernels) and replaced by torch.native_batch_norm (ATen's
batch_norm_*_channels_last kernels), three alternating runs of 30 steps after 5 of warm-up, in one
process; then the top kernels of one forward+backward with ATen's batch norm. This measured the
"tried and rejected" row of docs/BENCHMARKS.md (ATen's batch norm 4.5% slower).
"""
import time, torch, torchvision, torch.nn.functional as F
torch.backends.cudnn.benchmark = False
dev = "cuda"
orig = F.batch_norm
def native_bn(input, running_mean, running_var, weight=None, bias=None, training=False, momentum=0.1, eps=1e-5):
    return torch.native_batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps)[0]
def run(mode, n=30, warm=5):
    F.batch_norm = native_bn if mode == "native" else orig
    torch.manual_seed(0)
    m = torchvision.models.resnet50(weights=None, num_classes=101).to(dev, memory_format=torch.channels_last)
    opt = torch.optim.SGD(m.parameters(), lr=0.1, momentum=0.9, weight_decay=1e-4)
    x = torch.randn(128, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
    y = torch.randint(0, 101, (128,), device=dev)
    def step():
        loss = F.cross_entropy(m(x), y); opt.zero_grad(set_to_none=True); loss.backward(); opt.step(); return loss
    for _ in range(warm): step()
    torch.cuda.synchronize(); t = time.perf_counter()
    for _ in range(n): l = step()
    torch.cuda.synchronize(); dt = time.perf_counter() - t
    return n * 128 / dt, l.item()
res = {"cudnn": [], "native": []}
for r in range(3):
    for mode in ("cudnn", "native"):
        ips, l = run(mode); res[mode].append(ips); print(mode, round(ips, 1), round(l, 4), flush=True)
for k, v in res.items(): print(k, "median", round(sorted(v)[1], 1))
print("native/cudnn", round(sorted(res["native"])[1] / sorted(res["cudnn"])[1], 4))
# which kernels does native use
F.batch_norm = native_bn
from torch.profiler import profile, ProfilerActivity
m = torchvision.models.resnet50(weights=None, num_classes=101).to(dev, memory_format=torch.channels_last)
x = torch.randn(128, 3, 224, 224, device=dev).contiguous(memory_format=torch.channels_last)
with profile(activities=[ProfilerActivity.CUDA]) as p:
    m(x).sum().backward(); torch.cuda.synchronize()
print(p.key_averages().table(sort_by="cuda_time_total", row_limit=12, max_name_column_width=70))
