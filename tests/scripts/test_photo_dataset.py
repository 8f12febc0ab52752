"""Tests for scripts/photo_dataset.py: the Food-101 layout it writes from photos, determinism, train
and test drawn apart, and the inputs it refuses.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_photo_dataset.py
(all tests: scripts/dev/python_tests.sh)
"""

import contextlib
import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import time
import unittest
from unittest import mock

from scripts.support.nsys_exports import TempDirCase
import photo_dataset

try:
    from PIL import Image
except ImportError:  # pragma: no cover - Debian's python3-pil is a test dependency
    Image = None


@unittest.skipIf(Image is None, "needs Pillow (python3-pil)")
class PhotoDatasetTest(TempDirCase):
    def photo(self, name, colour, size=(300, 200)):
        path = os.path.join(self.tmp, name)
        img = Image.new("RGB", size, colour)
        for x in range(0, size[0], 20):  # some structure for the crops to move over
            for y in range(size[1]):
                img.putpixel((x, y), (255 - colour[0], 255 - colour[1], 255 - colour[2]))
        img.save(path, quality=90)
        return path

    def run_main(self, *argv):
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = photo_dataset.main(list(argv))
        return rc, out.getvalue(), err.getvalue()

    def digest(self, root):
        h = hashlib.sha256()
        for d, _, files in sorted(os.walk(root)):
            for f in sorted(files):
                with open(os.path.join(d, f), "rb") as fh:
                    h.update(f.encode() + fh.read())
        return h.hexdigest()

    def test_layout_split_and_determinism(self):
        a, b = self.photo("Red Apple.jpg", (200, 30, 30)), self.photo(
            "sky.jpg", (30, 60, 220), (200, 320)
        )
        out1, out2 = os.path.join(self.tmp, "d1"), os.path.join(self.tmp, "d2")
        rc, out, err = self.run_main(out1, a, b, "--per-class", "8")
        self.assertEqual(rc, 0, err)
        self.assertIn("2 classes, 12 training and 4 test images", out)
        meta = os.path.join(out1, "food-101", "meta")
        with open(os.path.join(meta, "classes.txt")) as f:
            self.assertEqual(f.read().split(), ["red_apple", "sky"])
        with open(os.path.join(meta, "train.txt")) as f:
            train = f.read().split()
        with open(os.path.join(meta, "test.txt")) as f:
            test = f.read().split()
        self.assertEqual(len(train), 12)
        self.assertEqual(test, ["red_apple/6", "red_apple/7", "sky/6", "sky/7"])
        self.assertFalse(set(train) & set(test))
        with open(os.path.join(meta, "test.json")) as f:
            self.assertEqual(
                json.load(f),
                {"red_apple": ["red_apple/6", "red_apple/7"], "sky": ["sky/6", "sky/7"]},
            )
        for i in train + test:
            img = Image.open(os.path.join(out1, "food-101", "images", i + ".jpg"))
            self.assertEqual(max(img.size), 512)
        # Views differ from one another; the same seed writes the same bytes, another seed others.
        with open(os.path.join(out1, "food-101", "images", "sky", "0.jpg"), "rb") as f0, open(
            os.path.join(out1, "food-101", "images", "sky", "1.jpg"), "rb"
        ) as f1:
            self.assertNotEqual(f0.read(), f1.read())
        self.assertEqual(self.run_main(out2, a, b, "--per-class", "8")[0], 0)
        self.assertEqual(self.digest(out1), self.digest(out2))
        out3 = os.path.join(self.tmp, "d3")
        self.assertEqual(self.run_main(out3, a, b, "--per-class", "8", "--seed", "8")[0], 0)
        self.assertNotEqual(self.digest(out1), self.digest(out3))

    def test_refused_inputs(self):
        a = self.photo("a.jpg", (10, 200, 10))
        cases = [
            ((a,), "at least two photos"),
            ((a, os.path.join(self.tmp, "missing.jpg")), "no such file"),
            ((a, a), "two photos make the class a"),
            ((a, self.photo("b.jpg", (1, 2, 3)), "--per-class", "1"), "--per-class"),
            ((a, self.photo("c.jpg", (1, 2, 3)), "--test-fraction", "1"), None),
        ]
        for args, why in cases:
            if why is None:
                with self.assertRaises(SystemExit) as e, contextlib.redirect_stderr(io.StringIO()):
                    photo_dataset.main([os.path.join(self.tmp, "o")] + list(args))
                self.assertEqual(e.exception.code, 2)
                continue
            rc, _, err = self.run_main(os.path.join(self.tmp, "o"), *args)
            self.assertEqual(rc, 2, args)
            self.assertIn(why, err)
        bad = os.path.join(self.tmp, "bad.jpg")
        with open(bad, "w") as f:
            f.write("not a jpeg")
        rc, _, err = self.run_main(os.path.join(self.tmp, "o2"), a, bad)
        self.assertEqual(rc, 1)
        self.assertIn("bad.jpg: cannot decode it", err)
        self.assertEqual(
            os.listdir(os.path.join(self.tmp, "o2")), [], "a failure leaves no tree behind"
        )
        # A test fraction that leaves no training image.
        rc, _, err = self.run_main(
            os.path.join(self.tmp, "o3"),
            a,
            self.photo("d.jpg", (1, 2, 3)),
            "--per-class",
            "2",
            "--test-fraction",
            "0.9",
        )
        self.assertEqual(rc, 2)
        self.assertIn(
            "--per-class 2 --test-fraction 0.9: puts all 2 images of a class in the test split", err
        )
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "o3")))

    def test_a_decompression_bomb_is_a_photo_that_cannot_be_decoded(self):
        a = self.photo("a.jpg", (10, 200, 10))
        bomb = self.photo("bomb.jpg", (200, 10, 10), (400, 300))
        with mock.patch.object(
            Image, "MAX_IMAGE_PIXELS", 50000
        ):  # 120,000 pixels: over twice the limit
            rc, _, err = self.run_main(os.path.join(self.tmp, "o"), a, bomb, "--per-class", "4")
        self.assertEqual(rc, 1, err)
        self.assertIn("bomb.jpg: cannot decode it", err)
        self.assertNotIn("Traceback", err)
        self.assertEqual(os.listdir(os.path.join(self.tmp, "o")), [])

    def test_no_tree_it_did_not_make_is_written_into(self):
        a, b = self.photo("a.jpg", (10, 200, 10)), self.photo("b.jpg", (200, 10, 10))
        data = os.path.join(self.tmp, "data")
        meta = os.path.join(data, "food-101", "meta")
        os.makedirs(meta)
        with open(os.path.join(meta, "train.txt"), "w") as f:
            f.write("apple_pie/1\n")
        for extra, message in (
            ((), "already exists"),
            (("--replace",), "was not made by photo_dataset.py"),
        ):
            rc, _, err = self.run_main(data, a, b, "--per-class", "4", *extra)
            self.assertEqual(rc, 2, err)
            self.assertIn(message, err)
        with open(os.path.join(meta, "train.txt")) as f:
            self.assertEqual(f.read(), "apple_pie/1\n")
        self.assertEqual(os.listdir(data), ["food-101"])
        self.assertEqual(os.listdir(meta), ["train.txt"])
        # Its own tree: refused again without --replace, replaced whole with it.
        mine = os.path.join(self.tmp, "mine")
        self.assertEqual(self.run_main(mine, a, b, "--per-class", "8")[0], 0)
        rc, _, err = self.run_main(mine, a, b, "--per-class", "4")
        self.assertEqual(rc, 2)
        self.assertIn("already exists", err)
        rc, out, err = self.run_main(mine, a, b, "--per-class", "4", "--replace")
        self.assertEqual(rc, 0, err)
        self.assertIn("2 classes, 6 training and 2 test images", out)
        self.assertEqual(
            sorted(os.listdir(os.path.join(mine, "food-101", "images", "a"))),
            ["0.jpg", "1.jpg", "2.jpg", "3.jpg"],
            "no image of the tree it replaced is left",
        )
        self.assertEqual(os.listdir(mine), ["food-101"])
        # Its own tree made from photos inside it: --replace would delete its own inputs.
        inside = [
            os.path.join(mine, "food-101", "images", c, "%d.jpg" % i)
            for i, c in ((0, "a"), (1, "b"))
        ]
        rc, _, err = self.run_main(mine, *inside, "--per-class", "4", "--replace")
        self.assertEqual(rc, 2, err)
        self.assertIn(
            "--replace: the photo %s is inside %s, which the new tree replaces"
            % (inside[0], os.path.join(mine, "food-101")),
            err,
        )
        self.assertTrue(all(os.path.isfile(p) for p in inside))

    def test_sigterm_leaves_no_temporary_tree(self):
        a, b = self.photo("a.jpg", (10, 200, 10)), self.photo("b.jpg", (200, 10, 10))
        out = os.path.join(self.tmp, "t")
        script = os.path.join(os.path.dirname(photo_dataset.__file__), "photo_dataset.py")
        proc = subprocess.Popen(
            [sys.executable, script, out, a, b, "--per-class", "100000"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            deadline = time.monotonic() + 60
            while not (os.path.isdir(out) and os.listdir(out)) and time.monotonic() < deadline:
                time.sleep(0.05)  # until the temporary tree is there
            self.assertTrue(os.listdir(out), "no temporary tree appeared")
            proc.send_signal(signal.SIGTERM)
            _, err = proc.communicate(timeout=60)
        finally:
            proc.kill()
            proc.wait()
        self.assertEqual(proc.returncode, 143, err)
        self.assertIn("photo_dataset.py: terminated", err)
        self.assertEqual(os.listdir(out), [])

    def test_out_and_per_class_bounds(self):
        a, b = self.photo("a.jpg", (10, 200, 10)), self.photo("b.jpg", (200, 10, 10))
        # A missing OUT a few levels down is made, not called unwritable.
        deep = os.path.join(self.tmp, "x", "y", "z")
        rc, _, err = self.run_main(deep, a, b, "--per-class", "2")
        self.assertEqual(rc, 0, err)
        self.assertTrue(os.path.isdir(os.path.join(deep, "food-101", "meta")))
        afile = os.path.join(self.tmp, "afile")
        with open(afile, "w") as f:
            f.write("x")
        for out, message in (
            (afile, "OUT %s: is a regular file, expected a directory" % afile),
            (os.path.join(afile, "sub"), "OUT %s:" % os.path.join(afile, "sub")),
        ):
            rc, _, err = self.run_main(out, a, b, "--per-class", "2")
            self.assertEqual(rc, 2, err)
            self.assertIn(message, err)
        rc, _, err = self.run_main(
            os.path.join(self.tmp, "big"), a, b, "--per-class", "99999999999999999999"
        )
        self.assertEqual(rc, 2)
        self.assertIn("--per-class: expected 2 (a training and a test image) to 100000", err)
        self.assertFalse(os.path.exists(os.path.join(self.tmp, "big")))


if __name__ == "__main__":
    unittest.main()
