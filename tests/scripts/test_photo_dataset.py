"""Tests for scripts/photo_dataset.py: the Food-101 layout it writes from photos, determinism, train and test
drawn apart, and the inputs it refuses.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_photo_dataset.py   (all tests: scripts/python_tests.sh)
"""

import contextlib
import hashlib
import io
import json
import os
import unittest

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
        a, b = self.photo("Red Apple.jpg", (200, 30, 30)), self.photo("sky.jpg", (30, 60, 220), (200, 320))
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
            self.assertEqual(json.load(f), {"red_apple": ["red_apple/6", "red_apple/7"], "sky": ["sky/6", "sky/7"]})
        for i in train + test:
            img = Image.open(os.path.join(out1, "food-101", "images", i + ".jpg"))
            self.assertEqual(max(img.size), 512)
        # Views differ from one another; the same seed writes the same bytes, another seed others.
        with open(os.path.join(out1, "food-101", "images", "sky", "0.jpg"), "rb") as f0, \
                open(os.path.join(out1, "food-101", "images", "sky", "1.jpg"), "rb") as f1:
            self.assertNotEqual(f0.read(), f1.read())
        self.assertEqual(self.run_main(out2, a, b, "--per-class", "8")[0], 0)
        self.assertEqual(self.digest(out1), self.digest(out2))
        out3 = os.path.join(self.tmp, "d3")
        self.assertEqual(self.run_main(out3, a, b, "--per-class", "8", "--seed", "8")[0], 0)
        self.assertNotEqual(self.digest(out1), self.digest(out3))

    def test_refused_inputs(self):
        a = self.photo("a.jpg", (10, 200, 10))
        cases = [((a,), "at least two photos"),
                 ((a, os.path.join(self.tmp, "missing.jpg")), "no such file"),
                 ((a, a), "two photos make the class a"),
                 ((a, self.photo("b.jpg", (1, 2, 3)), "--per-class", "1"), "--per-class"),
                 ((a, self.photo("c.jpg", (1, 2, 3)), "--test-fraction", "1"), None)]
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


if __name__ == "__main__":
    unittest.main()
