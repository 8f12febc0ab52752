#!/usr/bin/env python3
"""A Food-101-shaped dataset made of real photos: each photo a class, each image a random
view of it.

usage: photo_dataset.py OUT PHOTO.jpg [PHOTO.jpg ...] [--per-class 200] [--test-fraction 0.25]
                        [--seed 7] [--replace]

Writes OUT/food-101/{images/<class>/<n>.jpg, meta/classes.txt, train.txt, test.txt, train.json,
test.json}, which train_resnet50 --data OUT and torchvision's Food101 read. Class k is the k-th
photo (named after its file); each of its images is a crop of 30% to 100% of the photo's area at an
aspect ratio in [3/4, 4/3], flipped half the time, its brightness, contrast and saturation jittered
by up to 30%, scaled so its longer side is 512 pixels (Food-101's) and saved as a JPEG of quality 60
to 95. The training and test images are drawn from separate random streams: no test image is a copy
of a training one, though both show the same photo. With the photos of a machine (matplotlib's and
scikit-learn's sample images, say) this is the "held-out-like real photos" check of
docs/BENCHMARKS.md: natural-image statistics and real JPEGs, where food101_synth's are drawn shapes;
the task (which photo is this view of?) is easier than Food-101's. Deterministic for a seed.

The tree is written beside OUT/food-101 and renamed into place once whole: a photo that cannot be
decoded, Ctrl-C or SIGTERM leaves nothing behind. An existing OUT/food-101 is refused, so that no
dataset is overwritten; --replace replaces one that this script made (it leaves
meta/photo_dataset.json), never another, nor one that holds a photo it is made from. --per-class is
at most 100,000.

Exit status (nsys_analysis.common.exit_status): 0 done; 1 a photo that cannot be decoded or an
output that cannot be written; 2 a bad flag, a missing photo, two photos of one name or fewer than
two, a split with no image, or an OUT/food-101 already there; 130 Ctrl-C; 143 SIGTERM.
"""

import argparse
import json
import os
import random
import shutil
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nsys_analysis.common.argtypes import positive_int  # noqa: E402
from nsys_analysis.common.exit_status import FAILURE, OK, USAGE, exit_with  # noqa: E402
from nsys_analysis.common.files import (  # noqa: E402
    UsageError,
    check_input_file,
    check_output_dir,
)


def fraction_below_one(text):
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not 0.0 < value < 1.0:
        raise argparse.ArgumentTypeError("expected a number in (0, 1), got %r" % text)
    return value


def class_name(path):
    """The class of a photo: its file name without the extension, lower case, [a-z0-9_] only."""
    stem = os.path.splitext(os.path.basename(path))[0].lower()
    return "".join(c if c.isalnum() else "_" for c in stem)


def view(photo, rng):
    """One random view of the PIL image photo (RGB), as a PIL image."""
    from PIL import ImageEnhance, ImageOps

    w, h = photo.size
    for _ in range(20):
        area = w * h * rng.uniform(0.3, 1.0)
        ratio = rng.uniform(0.75, 4 / 3)
        cw, ch = int(round((area * ratio) ** 0.5)), int(round((area / ratio) ** 0.5))
        if 0 < cw <= w and 0 < ch <= h:
            break
    else:
        cw, ch = w, h
    x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
    img = photo.crop((x, y, x + cw, y + ch))
    if rng.random() < 0.5:
        img = ImageOps.mirror(img)
    for enhance in (ImageEnhance.Brightness, ImageEnhance.Contrast, ImageEnhance.Color):
        img = enhance(img).enhance(rng.uniform(0.7, 1.3))
    scale = 512.0 / max(img.size)
    return img.resize(
        (max(1, int(round(img.size[0] * scale))), max(1, int(round(img.size[1] * scale))))
    )


# The most images a class may have: Food-101 has 1,000; a typo's extra digits would fill a disk.
MAX_PER_CLASS = 100000
# The file that marks a tree as this script's (--replace replaces no other).
MARKER = os.path.join("meta", "photo_dataset.json")


def test_images(per_class, test_fraction):
    """Images a class puts in the test split."""
    return max(1, int(round(per_class * test_fraction)))


def check_out(out, replace, photos=()):
    """Raises UsageError unless OUT/food-101 can be written: absent, or (--replace) this script's,
    holding none of the photos it is made from."""
    root = os.path.join(out, "food-101")
    if os.path.lexists(root):
        if not replace:
            raise UsageError(
                "%s already exists: give another OUT, or --replace to replace a tree this "
                "script made" % root
            )
        if not os.path.isfile(os.path.join(root, MARKER)):
            raise UsageError(
                "--replace: %s was not made by photo_dataset.py (no %s): it is left as it "
                "is; give another OUT" % (root, MARKER)
            )
        tree = os.path.realpath(root)
        for p in photos:
            if os.path.commonpath([tree, os.path.realpath(p)]) == tree:
                raise UsageError(
                    "--replace: the photo %s is inside %s, which the new tree replaces: copy "
                    "the photos elsewhere first" % (p, root)
                )
    check_output_dir("OUT", out)


def write(out, photos, per_class, test_fraction, seed):
    """Writes the tree into a temporary sibling of OUT/food-101 and renames it into place."""
    os.makedirs(out, exist_ok=True)
    final = os.path.join(out, "food-101")
    root = os.path.join(out, ".food-101.tmp-%d" % os.getpid())
    try:
        counts = _write_tree(root, photos, per_class, test_fraction, seed)
        if os.path.lexists(final):  # --replace, checked: this script's own tree
            shutil.rmtree(final)
        os.rename(root, final)
        return counts
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _write_tree(root, photos, per_class, test_fraction, seed):
    from PIL import Image

    names = [class_name(p) for p in photos]
    splits: dict[str, dict[str, list[str]]] = {"train": {}, "test": {}}
    n_test = test_images(per_class, test_fraction)
    for k, (path, name) in enumerate(zip(photos, names)):
        try:
            with Image.open(path) as opened:
                photo = opened.convert("RGB")
        except (OSError, ValueError, MemoryError, Image.DecompressionBombError) as e:
            raise RuntimeError("%s: cannot decode it (%s)" % (path, e))
        folder = os.path.join(root, "images", name)
        os.makedirs(folder, exist_ok=True)
        for split, first, count in (
            ("train", 0, per_class - n_test),
            ("test", per_class - n_test, n_test),
        ):
            rng = random.Random(
                "%d/%s/%d" % (seed, split, k)
            )  # separate streams per split and class
            ids = []
            for i in range(first, first + count):
                img_id = "%s/%d" % (name, i)
                view(photo, rng).save(
                    os.path.join(root, "images", img_id + ".jpg"), quality=rng.randint(60, 95)
                )
                ids.append(img_id)
            splits[split][name] = ids
    meta = os.path.join(root, "meta")
    os.makedirs(meta, exist_ok=True)
    with open(os.path.join(meta, "classes.txt"), "w") as f:
        f.write("".join(n + "\n" for n in names))
    with open(os.path.join(meta, "labels.txt"), "w") as f:
        f.write("".join(n.replace("_", " ").title() + "\n" for n in names))
    for split, by_class in splits.items():
        with open(os.path.join(meta, split + ".txt"), "w") as f:
            f.write("".join(i + "\n" for n in names for i in by_class[n]))
        with open(os.path.join(meta, split + ".json"), "w") as f:
            json.dump(by_class, f)
    with open(os.path.join(root, MARKER), "w") as f:
        json.dump(
            {
                "photos": [os.path.abspath(p) for p in photos],
                "per_class": per_class,
                "test_fraction": test_fraction,
                "seed": seed,
            },
            f,
        )
    return len(names) * (per_class - n_test), len(names) * n_test


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the directory to hold food-101/")
    ap.add_argument("photos", nargs="+", metavar="PHOTO.jpg")
    ap.add_argument(
        "--per-class", type=positive_int, default=200, help="images a class (default 200)"
    )
    ap.add_argument(
        "--test-fraction",
        type=fraction_below_one,
        default=0.25,
        help="share of each class in meta/test.txt (default 0.25)",
    )
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument(
        "--replace",
        action="store_true",
        help="replace an OUT/food-101 that this script made (never another)",
    )
    args = ap.parse_args(argv)
    try:
        if len(args.photos) < 2:
            raise UsageError(
                "expected at least two photos (one class each), got %d" % len(args.photos)
            )
        for p in args.photos:
            check_input_file("photo", p, "an image file")
        names = [class_name(p) for p in args.photos]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise UsageError("two photos make the class %s: rename one" % dupes[0])
        if not 2 <= args.per_class <= MAX_PER_CLASS:
            raise UsageError(
                "--per-class: expected 2 (a training and a test image) to %d, got %d"
                % (MAX_PER_CLASS, args.per_class)
            )
        n_test = test_images(args.per_class, args.test_fraction)
        if n_test >= args.per_class:
            raise UsageError(
                "--per-class %d --test-fraction %g: puts all %d images of a class in the test "
                "split, none in training; give more images or a smaller fraction"
                % (args.per_class, args.test_fraction, args.per_class)
            )
        check_out(args.out, args.replace, args.photos)
    except UsageError as e:
        print("photo_dataset.py: error: %s" % e, file=sys.stderr)
        return USAGE
    try:
        train, test = write(args.out, args.photos, args.per_class, args.test_fraction, args.seed)
    except (RuntimeError, OSError) as e:
        print("photo_dataset.py: error: %s" % e, file=sys.stderr)
        return FAILURE
    print(
        "photo_dataset.py: %d classes, %d training and %d test images in %s"
        % (len(args.photos), train, test, os.path.join(args.out, "food-101"))
    )
    return OK


if __name__ == "__main__":
    exit_with(main, "photo_dataset.py")
