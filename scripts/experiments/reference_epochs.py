#!/usr/bin/env python3
"""The Python reference trained for epochs: torchvision's ResNet-50 with train_resnet50's default
recipe, evaluated every epoch, for the time-to-accuracy comparison of docs/BENCHMARKS.md.

usage: scripts/experiments/reference_epochs.py ROOT [--epochs 10] [--batch-size 128]
                                               [--workers 12] [--precision fp32|bf16|fp16]
                                               [--lr LR]
                                               [--warmup-share 0.25] [--label-smoothing 0]
                                               [--seed 2026] [--report FILE.json]
       (a CUDA machine with PyTorch and torchvision)

ROOT holds food-101/ (images/, meta/train.json and test.json, as food101_synth writes them). The
recipe is train_resnet50's default one (lib/model/lr_schedule.h): SGD momentum 0.9, weight decay
1e-4, the peak 0.1 x batch / 256 unless --lr, a linear warm-up over 25% of the optimizer steps, then
a cosine to 0, set every step; RandomResizedCrop(224) + RandomHorizontalFlip for training
(drop_last, shuffled each epoch), Resize(256) + CenterCrop(224) for the evaluation on the test split
after every epoch (no grad, eval mode); channels_last, bf16 autocast with --precision bf16, fp16
autocast with torch.amp.GradScaler's defaults with --precision fp16 (the steps it skipped counted in
the report, and which they were: skipped_at, the run's 0-based steps); the DataLoader with --workers
processes, pinned, persistent. Prints one line per epoch and writes --report in train_resnet50's
`training` form (program "reference_epochs"), which scripts/learning_curve.py reads. Wall time
counts from the first training step, evaluations included.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 PyTorch, torchvision or a CUDA device
missing (named on stderr), or the report could not be written; 2 a bad flag; 130 Ctrl-C.
"""

import argparse
import json
import math
import os
import sys
import time

# nsys_analysis is in scripts/, the folder above this one.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from nsys_analysis.common.argtypes import positive_int, unit_fraction  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import (  # noqa: E402
    OutputError,
    UsageError,
    check_output_file,
    write_text,
)


def parse_args(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("root", help="the directory holding food-101/")
    p.add_argument("--epochs", type=positive_int, default=10)
    p.add_argument("--batch-size", type=positive_int, default=128)
    p.add_argument("--workers", type=int, default=12, help="DataLoader processes (default 12)")
    p.add_argument("--precision", choices=("fp32", "bf16", "fp16"), default="fp32")
    p.add_argument("--lr", type=float, help="peak LR (default 0.1 x batch / 256)")
    p.add_argument(
        "--warmup-share",
        type=unit_fraction,
        default=0.25,
        help="share of the steps warming up (default 0.25)",
    )
    p.add_argument("--label-smoothing", type=unit_fraction, default=0.0)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--report", help="write the per-epoch records here (JSON)")
    return p.parse_args(argv)


def warmup_steps(share, total):
    """default_lr_warmup_steps (lib/model/lr_schedule.cpp): share x total rounded half away from
    zero (std::llround), clamped to [1, total]."""
    return min(max(1, int(math.floor(share * total + 0.5))), total)


def lr_factor(step, warmup, total):
    """train_resnet50's cosine schedule as a fraction of the peak (lib/model/lr_schedule.h)."""
    if step < warmup:
        return (step + 1) / warmup
    if step >= total:
        step = total - 1
    return (
        (1 + math.cos(math.pi * (step - warmup) / (total - warmup))) / 2 if total > warmup else 1.0
    )


def train(args):
    try:
        # PyTorch is optional (checked here at run time) and not installed where mypy runs.
        import torch
        import torchvision
        from torchvision import datasets, transforms
    except ImportError as e:
        raise RuntimeError(
            "PyTorch or torchvision is not importable by %s (%s)" % (sys.executable, e)
        ) from None
    if not torch.cuda.is_available():
        raise RuntimeError("no CUDA device for PyTorch %s" % torch.__version__)
    torch.manual_seed(args.seed)
    dev = torch.device("cuda")
    norm = transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225])
    train_tf = transforms.Compose(
        [
            transforms.RandomResizedCrop(224),
            transforms.RandomHorizontalFlip(),
            transforms.ToTensor(),
            norm,
        ]
    )
    eval_tf = transforms.Compose(
        [transforms.Resize(256), transforms.CenterCrop(224), transforms.ToTensor(), norm]
    )
    train_ds = datasets.Food101(root=args.root, split="train", transform=train_tf, download=False)
    test_ds = datasets.Food101(root=args.root, split="test", transform=eval_tf, download=False)
    common = dict(num_workers=args.workers, pin_memory=True, persistent_workers=args.workers > 0)
    train_dl = torch.utils.data.DataLoader(
        train_ds, batch_size=args.batch_size, shuffle=True, drop_last=True, **common
    )
    test_dl = torch.utils.data.DataLoader(
        test_ds, batch_size=args.batch_size, shuffle=False, **common
    )
    model = torchvision.models.resnet50(weights=None, num_classes=len(train_ds.classes))
    model = model.to(dev, memory_format=torch.channels_last)
    peak = args.lr if args.lr is not None else 0.1 * args.batch_size / 256
    opt = torch.optim.SGD(model.parameters(), lr=peak, momentum=0.9, weight_decay=1e-4)
    steps_per_epoch = len(train_dl)
    total = steps_per_epoch * args.epochs
    warmup = warmup_steps(args.warmup_share, total)
    loss_fn = torch.nn.CrossEntropyLoss(label_smoothing=args.label_smoothing)
    amp = {"bf16": torch.bfloat16, "fp16": torch.float16}.get(args.precision)
    scaler = torch.amp.GradScaler("cuda", enabled=args.precision == "fp16")
    skipped_at = []
    epochs, step = [], 0
    started = time.perf_counter()
    for epoch in range(args.epochs):
        t0 = time.perf_counter()
        model.train()
        loss_sum = torch.zeros((), device=dev, dtype=torch.float64)
        for images, labels in train_dl:
            for g in opt.param_groups:
                g["lr"] = peak * lr_factor(step, warmup, total)
            images = images.to(dev, non_blocking=True, memory_format=torch.channels_last)
            labels = labels.to(dev, non_blocking=True)
            with torch.autocast("cuda", dtype=amp or torch.bfloat16, enabled=amp is not None):
                loss = loss_fn(model(images), labels)
            opt.zero_grad(set_to_none=True)
            scaler.scale(loss).backward()
            scale_before = scaler.get_scale() if scaler.is_enabled() else 0.0
            scaler.step(opt)
            scaler.update()
            # GradScaler halves its scale exactly when it skipped the step.
            if scaler.is_enabled() and scaler.get_scale() < scale_before:
                skipped_at.append(step)
            loss_sum += loss.detach()
            step += 1
        train_loss = loss_sum.item() / steps_per_epoch
        train_s = time.perf_counter() - t0
        t1 = time.perf_counter()
        model.eval()
        hits1 = hits5 = seen = 0
        eval_loss = 0.0
        with torch.no_grad():
            for images, labels in test_dl:
                images = images.to(dev, non_blocking=True, memory_format=torch.channels_last)
                labels = labels.to(dev, non_blocking=True)
                with torch.autocast("cuda", dtype=amp or torch.bfloat16, enabled=amp is not None):
                    logits = model(images)
                logits = logits.float()
                eval_loss += torch.nn.functional.cross_entropy(
                    logits, labels, reduction="sum"
                ).item()
                top = logits.topk(min(5, logits.shape[1]), dim=1).indices
                hit = top.eq(labels.unsqueeze(1))
                hits1 += int(hit[:, 0].sum())
                hits5 += int(hit.any(1).sum())
                seen += labels.numel()
        eval_ms = (time.perf_counter() - t1) * 1e3
        record = {
            "epoch": epoch,
            "steps": steps_per_epoch,
            "train_loss": train_loss,
            "train_s": train_s,
            "images_per_s": steps_per_epoch * args.batch_size / train_s,
            "epoch_s": time.perf_counter() - t0,
            "elapsed_s": time.perf_counter() - started,
            "lr": opt.param_groups[0]["lr"],
            "eval": {
                "images": seen,
                "top1": hits1 / seen,
                "top5": hits5 / seen,
                "loss": eval_loss / seen,
                "ms": eval_ms,
                "steps": len(test_dl),
            },
            "checkpoint": None,
        }
        if scaler.is_enabled():
            record["loss_scale"] = scaler.get_scale()
            record["skipped_steps"] = len(skipped_at)
            record["skipped_at"] = list(skipped_at)
        epochs.append(record)
        print(
            "[epoch %d/%d] loss %.4f | top-1 %.2f%% top-5 %.2f%% (eval loss %.4f, %.1f s) | "
            "%.1f images/s | %.1f s"
            % (
                epoch + 1,
                args.epochs,
                train_loss,
                100 * record["eval"]["top1"],
                100 * record["eval"]["top5"],
                record["eval"]["loss"],
                eval_ms / 1e3,
                record["images_per_s"],
                record["epoch_s"],
            ),
            flush=True,
        )
    best = max(epochs, key=lambda e: e["eval"]["top1"])
    return {
        "program": "reference_epochs",
        "config": dict(vars(args), peak_lr=peak, warmup_steps=warmup, total_steps=total),
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
        "training": {
            "epochs_planned": args.epochs,
            "resumed_from": None,
            "best_top1": best["eval"]["top1"],
            "best_top1_epoch": best["epoch"],
            "time_to_best_top1_s": best["elapsed_s"],
            "target_top1": None,
            "target_reached": False,
            "epochs": epochs,
        },
    }


def main(argv=None):
    args = parse_args(argv)
    try:
        if args.report:
            check_output_file("--report", args.report)
    except UsageError as e:
        print("reference_epochs.py: error: %s" % e, file=sys.stderr)
        return USAGE
    try:
        report = train(args)
    except RuntimeError as e:
        print("reference_epochs.py: error: %s" % e, file=sys.stderr)
        return FAILURE
    if args.report:
        try:
            write_text(args.report, json.dumps(report, indent=2) + "\n")
        except OutputError as e:
            print("reference_epochs.py: error: %s" % e, file=sys.stderr)
            return FAILURE
    sys.stdout.flush()
    os._exit(OK)  # skip the DataLoader workers' teardown


if __name__ == "__main__":
    exit_with(main, "reference_epochs.py")
