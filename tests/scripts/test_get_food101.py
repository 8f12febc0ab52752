"""Tests for scripts/get_food101.sh, offline: a small archive in the Food-101 layout, fetched
through file:// URLs (curl takes them). Covers the fresh fetch and its marker, the second run that
does nothing (also in a read-only directory), a wrong MD5, a resumed download, a download that
cannot be written, a truncated archive, an archive without meta/, a tree left without its marker, an
archive and tree behind symlinks, what is never replaced (a FIFO or directory at the archive's path,
a FIFO tree or lock, a .part that is /dev/null), missing tools and usage errors.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_get_food101.py
(all tests: scripts/dev/python_tests.sh)
"""

import glob
import hashlib
import io
import os
import random
import shlex
import shutil
import signal
import socket
import stat
import subprocess
import tarfile
import tempfile
import time
import unittest

from scripts.support.testutil import AS_UNPRIVILEGED, REPO, ScratchCase, alive

SCRIPT = os.path.join(REPO, "scripts", "get_food101.sh")
BASH = shutil.which("bash") or "/bin/bash"
CLASSES = ("apple_pie", "baby_back_ribs", "ramen")
HAVE_TOOLS = all(shutil.which(t) for t in ("curl", "md5sum", "tar", "gzip"))
# Root writes into a read-only directory: as root, the script runs as nobody
# (testutil.AS_UNPRIVILEGED).


def make_archive(path, with_meta=True, per_class=6):
    """Writes a gzipped tar in the Food-101 layout (food-101/images/<class>/<n>.jpg,
    food-101/meta/*.txt, without meta/ when with_meta is false) to path. The images are random
    bytes, so that the archive does not compress to a few bytes and a cut lands inside the gzip
    stream. Returns its MD5."""
    rng = random.Random(101)
    train, test = [], []

    def add(tar, name, data):
        info = tarfile.TarInfo(name)
        info.size = len(data)
        info.mode = 0o644
        tar.addfile(info, io.BytesIO(data))

    with tarfile.open(path, "w:gz") as tar:
        for c in CLASSES:
            for n in range(per_class):
                add(
                    tar,
                    "food-101/images/%s/%d.jpg" % (c, n),
                    bytes(rng.getrandbits(8) for _ in range(4096)),
                )
                (train if n < per_class - 2 else test).append("%s/%d" % (c, n))
        if with_meta:
            add(tar, "food-101/meta/classes.txt", ("\n".join(CLASSES) + "\n").encode())
            add(tar, "food-101/meta/train.txt", ("\n".join(train) + "\n").encode())
            add(tar, "food-101/meta/test.txt", ("\n".join(test) + "\n").encode())
        add(tar, "food-101/README.txt", b"synthetic stand-in for the Food-101 archive\n")
    return md5_of(path)


def md5_of(path):
    with open(path, "rb") as f:
        return hashlib.md5(f.read()).hexdigest()


@unittest.skipUnless(HAVE_TOOLS, "needs curl, md5sum, tar and gzip")
class GetFood101Test(ScratchCase):
    tmp_prefix = "get_food101_"

    @classmethod
    def setUpClass(cls):
        cls.src_dir = tempfile.mkdtemp(prefix="get_food101_src_")
        cls.archive = os.path.join(cls.src_dir, "food-101.tar.gz")
        cls.md5 = make_archive(cls.archive)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.src_dir, ignore_errors=True)

    def setUp(self):
        super().setUp()
        self.out = os.path.join(self.tmp, "data")
        self.tree = os.path.join(self.out, "food-101")
        self.marker = os.path.join(self.tree, ".complete")

    def run_script(self, *args, env=None, prefix=()):
        return subprocess.run(
            list(prefix) + [BASH, SCRIPT] + list(args),
            capture_output=True,
            text=True,
            timeout=60,
            env=env,
            stdin=subprocess.DEVNULL,
        )

    def fetch(self, archive=None, md5=None, *extra, prefix=()):
        return self.run_script(
            "--out",
            self.out,
            "--url",
            "file://" + (archive or self.archive),
            "--md5",
            md5 or self.md5,
            *extra,
            prefix=prefix,
        )

    def assert_complete(self, md5=None):
        with open(self.marker) as f:
            self.assertEqual(f.read().strip(), md5 or self.md5)
        for rel in ("meta/classes.txt", "meta/train.txt", "meta/test.txt", "images/ramen/0.jpg"):
            self.assertTrue(os.path.isfile(os.path.join(self.tree, rel)), rel)
        with open(os.path.join(self.tree, "meta", "classes.txt")) as f:
            self.assertEqual(f.read().split(), list(CLASSES))
        self.assertFalse(os.path.exists(os.path.join(self.out, "food-101.tar.gz.part")))
        self.assert_no_staging()

    def assert_not_installed(self):
        self.assertFalse(
            os.path.exists(self.tree), os.listdir(self.out) if os.path.isdir(self.out) else None
        )
        self.assert_no_staging()

    def assert_no_staging(self):
        self.assertEqual(glob.glob(os.path.join(self.out, ".food-101.*")), [])

    def test_fresh_fetch_extracts_and_writes_the_marker(self):
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_complete()
        self.assertEqual(md5_of(os.path.join(self.out, "food-101.tar.gz")), self.md5)
        self.assertIn("3 classes, 12 train and 6 test images", r.stdout)

    def test_second_run_does_nothing(self):
        self.assertEqual(self.fetch().returncode, 0)
        before = os.stat(self.marker).st_mtime_ns
        # Neither the source nor the downloaded archive is needed once the tree is complete.
        os.remove(os.path.join(self.out, "food-101.tar.gz"))
        r = self.fetch(archive=os.path.join(self.tmp, "gone.tar.gz"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already complete", r.stdout)
        self.assertIn("nothing to do", r.stdout)
        self.assertEqual(os.stat(self.marker).st_mtime_ns, before)
        self.assert_complete()

    @unittest.skipIf(
        AS_UNPRIVILEGED is None, "as root, needs setpriv to run the script unprivileged"
    )
    def test_complete_tree_in_a_read_only_directory_needs_no_write(self):
        self.assertEqual(self.fetch().returncode, 0)
        os.remove(os.path.join(self.out, ".get_food101.lock"))
        # Readable by anyone (nobody, when the test runs as root), writable by no one but root.
        for root, dirs, files in os.walk(self.tmp):
            for name in dirs + files:
                os.chmod(os.path.join(root, name), 0o755 if name in dirs else 0o644)
        os.chmod(self.tmp, 0o755)
        for path in (self.tree, self.out):
            os.chmod(path, 0o555)
        self.addCleanup(os.chmod, self.out, 0o755)
        self.addCleanup(os.chmod, self.tree, 0o755)
        r = self.fetch(prefix=AS_UNPRIVILEGED)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("already complete", r.stdout)
        self.assertEqual(r.stderr, "")
        self.assertFalse(os.path.exists(os.path.join(self.out, ".get_food101.lock")))
        # With nothing complete there, the same directory is a clear error, not the shell's.
        os.chmod(self.tree, 0o755)
        os.remove(self.marker)
        os.chmod(self.tree, 0o555)
        r = self.fetch(None, None, "--replace", prefix=AS_UNPRIVILEGED)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(
            "get_food101.sh: error: cannot write in %s (creating the lock file" % self.out, r.stderr
        )
        self.assertNotIn("Permission denied", r.stderr)

    def test_complete_tree_whatever_blocks_the_lock(self):
        # Root-proof stand-in for an unwritable lock: a directory in its place.
        self.assertEqual(self.fetch().returncode, 0)
        lock = os.path.join(self.out, ".get_food101.lock")
        os.remove(lock)
        os.mkdir(lock)
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("nothing to do", r.stdout)
        os.remove(self.marker)
        r = self.fetch(None, None, "--replace")
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cannot create the lock file %s" % lock, r.stderr)

    def test_a_part_file_that_cannot_be_written_is_not_resumable(self):
        os.makedirs(self.out)
        part = os.path.join(self.out, "food-101.tar.gz.part")
        for name, make in (
            ("full disk", lambda: os.symlink("/dev/full", part)),  # every write: ENOSPC
            ("directory", lambda: os.mkdir(part)),
        ):
            with self.subTest(name):
                make()
                r = self.fetch()
                self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
                self.assertIn(
                    "get_food101.sh: error: cannot write %s (curl exit 23: a full disk, a "
                    "read-only %s" % (part, self.out),
                    r.stderr,
                )
                self.assertIn("nothing was downloaded; fix that and run again", r.stderr)
                self.assertNotIn("resumes", r.stderr)
                self.assert_not_installed()
                (os.rmdir if os.path.isdir(part) and not os.path.islink(part) else os.remove)(part)

    def test_wrong_md5_fails_naming_both_sums_and_installs_nothing(self):
        wrong = "0" * 32
        r = self.fetch(md5=wrong)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("MD5 mismatch", r.stderr)
        self.assertIn(os.path.join(self.out, "food-101.tar.gz"), r.stderr)
        self.assertIn("expected " + wrong, r.stderr)
        self.assertIn("found " + self.md5, r.stderr)
        self.assert_not_installed()
        # The archive stays: with the right sum, a later run needs no download.
        r = self.fetch(archive=os.path.join(self.tmp, "gone.tar.gz"))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("already downloaded", r.stdout)
        self.assert_complete()

    def test_resumes_a_partial_download(self):
        with open(self.archive, "rb") as f:
            data = f.read()
        os.makedirs(self.out)
        part = os.path.join(self.out, "food-101.tar.gz.part")
        with open(part, "wb") as f:
            f.write(data[: len(data) // 2])
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("resuming %s at %d bytes" % (part, len(data) // 2), r.stdout)
        self.assert_complete()

    def test_resume_keeps_the_bytes_already_there(self):
        # A .part whose first half differs from the source: a resume appends the second half to it
        # (a restart would not), and the MD5 check catches the result.
        with open(self.archive, "rb") as f:
            data = f.read()
        os.makedirs(self.out)
        with open(os.path.join(self.out, "food-101.tar.gz.part"), "wb") as f:
            f.write(bytes(b ^ 0xFF for b in data[: len(data) // 2]))
        r = self.fetch()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("MD5 mismatch", r.stderr)
        self.assert_not_installed()

    def test_failed_download_says_what_arrived(self):
        r = self.fetch(archive=os.path.join(self.tmp, "missing.tar.gz"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("download of file://", r.stderr)
        self.assertIn("(curl exit 37); nothing arrived (run again to retry)", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.out, "food-101.tar.gz")))
        self.assert_not_installed()
        # A .part that holds bytes is kept for the next run, which resumes it.
        part = os.path.join(self.out, "food-101.tar.gz.part")
        with open(part, "wb") as f:
            f.write(b"x" * 100)
        r = self.fetch(archive=os.path.join(self.tmp, "missing.tar.gz"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(
            "%s keeps the 100 bytes that arrived and the next run resumes it" % part, r.stderr
        )
        self.assertEqual(os.path.getsize(part), 100)

    def test_truncated_archive_fails_at_extraction(self):
        with open(self.archive, "rb") as f:
            data = f.read()
        truncated = os.path.join(self.tmp, "truncated.tar.gz")
        with open(truncated, "wb") as f:
            f.write(data[: len(data) * 6 // 10])
        r = self.fetch(archive=truncated, md5=md5_of(truncated))  # the checksum passes
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("cannot extract " + os.path.join(self.out, "food-101.tar.gz"), r.stderr)
        self.assertIn("truncated or corrupt archive", r.stderr)
        self.assert_not_installed()

    def test_archive_without_meta_fails_the_layout_check(self):
        no_meta = os.path.join(self.tmp, "no_meta.tar.gz")
        md5 = make_archive(no_meta, with_meta=False)
        r = self.fetch(archive=no_meta, md5=md5)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("not the Food-101 layout", r.stderr)
        for rel in (
            "food-101/meta/classes.txt",
            "food-101/meta/train.txt",
            "food-101/meta/test.txt",
        ):
            self.assertIn(rel, r.stderr)
        self.assertNotIn("food-101/images/", r.stderr)
        self.assert_not_installed()

    def test_tree_without_marker_is_refused_without_replace(self):
        # A food-101/ the script did not make (no marker) may hold the user's files: it is left as
        # it is, before anything is downloaded.
        os.makedirs(os.path.join(self.tree, "images"))
        notes = os.path.join(self.tree, "MY_NOTES.txt")
        with open(notes, "w") as f:
            f.write("notes\n")
        r = self.fetch()
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(
            "get_food101.sh: error: %s exists without the completion marker %s"
            % (self.tree, self.marker),
            r.stderr,
        )
        self.assertIn("--replace", r.stderr)
        with open(notes) as f:
            self.assertEqual(f.read(), "notes\n")
        self.assertFalse(os.path.exists(os.path.join(self.out, "food-101.tar.gz")))
        self.assert_no_staging()

    def test_tree_without_marker_is_replaced_with_replace(self):
        os.makedirs(os.path.join(self.tree, "images"))
        with open(os.path.join(self.tree, "half-extracted.jpg"), "w") as f:
            f.write("x")
        r = self.fetch(None, None, "--replace")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("without the completion marker", r.stdout)
        self.assertFalse(os.path.exists(os.path.join(self.tree, "half-extracted.jpg")))
        self.assert_complete()

    def test_an_empty_tree_directory_is_replaced(self):
        os.makedirs(self.tree)
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assert_complete()

    def test_nothing_is_deleted_through_a_symlinked_tree(self):
        # A food-101 link to a tree without the marker: refused, --replace included; its target
        # is left as it is.
        os.makedirs(self.out)
        target = os.path.join(self.tmp, "mine")
        os.makedirs(os.path.join(target, "images"))
        with open(os.path.join(target, "MY_NOTES.txt"), "w") as f:
            f.write("notes\n")
        os.symlink(target, self.tree)
        for extra in ((), ("--replace",)):
            with self.subTest(extra=extra):
                r = self.fetch(None, None, *extra)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("%s is a symlink to %s" % (self.tree, target), r.stderr)
                self.assertIn("nothing is deleted through a link", r.stderr)
                self.assertEqual(sorted(os.listdir(target)), ["MY_NOTES.txt", "images"])
                self.assertTrue(os.path.islink(self.tree))
        self.assertEqual(glob.glob(os.path.join(self.tmp, ".food-101.*")), [])

    def test_replace_takes_no_value(self):
        r = self.run_script("--replace=yes")
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("--replace: takes no value, got 'yes'", r.stderr)

    def test_marker_of_another_archive_is_replaced(self):
        self.assertEqual(self.fetch().returncode, 0)
        with open(self.marker, "w") as f:
            f.write("f" * 32 + "\n")
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("extracted from another archive", r.stdout)
        self.assert_complete()

    def test_symlinked_archive_and_tree_are_written_at_their_targets(self):
        os.makedirs(self.out)
        big = os.path.join(self.tmp, "big")
        os.mkdir(big)
        archive_link = os.path.join(self.out, "food-101.tar.gz")
        os.symlink(
            os.path.join(big, "f101.tar.gz"), archive_link
        )  # dangling: the download makes the target
        os.symlink(os.path.join(big, "f101"), self.tree)
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertTrue(os.path.islink(archive_link))
        self.assertTrue(os.path.islink(self.tree))
        self.assertEqual(md5_of(os.path.join(big, "f101.tar.gz")), self.md5)
        self.assert_complete()  # through the link
        self.assertTrue(os.path.isfile(os.path.join(big, "f101", "meta", "classes.txt")))
        self.assertEqual(
            sorted(os.listdir(big)), ["f101", "f101.tar.gz"]
        )  # no .part, no staging beside them
        self.assertEqual(
            sorted(os.listdir(self.out)), [".get_food101.lock", "food-101", "food-101.tar.gz"]
        )

    def test_what_is_never_replaced(self):
        os.makedirs(self.out)
        archive = os.path.join(self.out, "food-101.tar.gz")
        os.mkfifo(archive)
        r = self.fetch()
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(
            "%s is a FIFO: expected the Food-101 archive or tree, or nothing (it is never replaced)"
            % archive,
            r.stderr,
        )
        self.assertTrue(stat.S_ISFIFO(os.lstat(archive).st_mode))
        os.remove(archive)
        os.mkdir(archive)
        r = self.fetch()
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn(
            "%s is a directory, expected the Food-101 archive or nothing" % archive, r.stderr
        )
        os.rmdir(archive)
        os.mkfifo(self.tree)
        r = self.fetch()
        self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
        self.assertIn("%s is a FIFO" % self.tree, r.stderr)
        os.remove(self.tree)
        # A .part that is /dev/null takes the download without an error, but never becomes the
        # archive.
        part = archive + ".part"
        os.symlink(os.devnull, part)
        r = self.fetch()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(
            "%s is not a regular file: the download cannot become %s" % (part, archive), r.stderr
        )
        self.assertTrue(stat.S_ISCHR(os.stat(os.devnull).st_mode))
        self.assertFalse(os.path.lexists(archive))
        os.remove(part)
        # A FIFO as the lock file would block its open: refused at once.
        os.remove(os.path.join(self.out, ".get_food101.lock"))
        os.mkfifo(os.path.join(self.out, ".get_food101.lock"))
        r = self.fetch()
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn(
            "cannot create the lock file %s: it is not a regular file"
            % os.path.join(self.out, ".get_food101.lock"),
            r.stderr,
        )
        self.assert_not_installed()

    def test_a_part_larger_than_the_source_starts_over(self):
        # curl cannot resume it (exit 36): every run used to fail until it was deleted by hand.
        os.makedirs(self.out)
        part = os.path.join(self.out, "food-101.tar.gz.part")
        with open(part, "wb") as f:
            f.write(b"x" * (os.path.getsize(self.archive) + 1000))
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertIn("cannot be resumed from file://%s (curl exit 36" % self.archive, r.stdout)
        self.assertIn("downloading it from the start", r.stdout)
        self.assert_complete()

    def test_a_url_that_is_not_a_regular_file_is_refused(self):
        # curl would block on a FIFO forever.
        fifo = os.path.join(self.tmp, "food-101.fifo")
        os.mkfifo(fifo)
        for path in (fifo, self.tmp):
            with self.subTest(path=path):
                r = self.fetch(archive=path)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn("--url: %s is not a regular file" % path, r.stderr)
        self.assert_not_installed()
        self.assertFalse(os.path.exists(os.path.join(self.out, "food-101.tar.gz.part")))

    def stalled_server(self):
        """A listener on 127.0.0.1 that accepts connections (the kernel does) and never answers;
        closed at the end of the test. Returns its URL."""
        listener = socket.socket()
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)
        self.addCleanup(listener.close)
        return "http://127.0.0.1:%d/food-101.tar.gz" % listener.getsockname()[1]

    def children(self, pid):
        """The pids whose parent is pid."""
        found = []
        for entry in os.listdir("/proc"):
            try:
                with open("/proc/%s/stat" % entry) as f:
                    if int(f.read().rsplit(")", 1)[1].split()[1]) == pid:
                        found.append(int(entry))
            except (OSError, ValueError, IndexError):
                pass
        return found

    def test_a_stalled_download_fails_naming_the_url(self):
        # The real curl, its low-speed window shortened (and no retries) by a wrapper that records
        # the script's arguments: a server that never answers fails in seconds, not never.
        real = shutil.which("curl")
        log = os.path.join(self.tmp, "curl_args")
        self.fake(
            "curl",
            "import os, sys\n"
            "args = sys.argv[1:]\n"
            "open(%r, 'w').write(repr(args))\n"
            "for flag, value in (('--speed-time', '1'), ('--retry', '0')):\n"
            "    if flag in args:\n"
            "        args[args.index(flag) + 1] = value\n"
            "os.execv(%r, [%r] + args)\n" % (log, real, real),
        )
        url = self.stalled_server()
        env = dict(os.environ, PATH=self.bin + os.pathsep + os.environ["PATH"])
        r = self.run_script("--out", self.out, "--url", url, "--md5", self.md5, env=env)
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("the download of %s stalled" % url, r.stderr)
        self.assertIn("curl exit 28", r.stderr)
        with open(log) as f:
            args = f.read()
        for pair in (
            "'--connect-timeout', '30'",
            "'--speed-limit', '1024'",
            "'--speed-time', '60'",
        ):
            self.assertIn(pair, args)
        self.assert_not_installed()

    def test_a_signal_ends_a_hanging_download_at_once(self):
        url = self.stalled_server()
        proc = subprocess.Popen(
            [BASH, SCRIPT, "--out", self.out, "--url", url, "--md5", self.md5],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.kill_at_end(proc.pid)
        deadline = time.monotonic() + 30
        curl = []
        while not curl:
            self.assertLess(time.monotonic(), deadline, "curl did not start")
            curl = [
                c
                for c in self.children(proc.pid)
                if open("/proc/%d/comm" % c).read().strip() == "curl"
            ]
            time.sleep(0.05)
        self.kill_at_end(*curl)
        time.sleep(0.3)  # curl is connected and waiting
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)  # it hung until curl's own end
        self.assertEqual(proc.returncode, 143, out + err)
        deadline = time.monotonic() + 10
        while alive(curl[0]) and time.monotonic() < deadline:
            time.sleep(0.05)
        self.assertFalse(alive(curl[0]), "curl outlived the script")
        self.assert_not_installed()

    def archive_with_marker(self, name, add_marker):
        """Copies the archive with a food-101/.complete of its own (add_marker(tar, info))."""
        path = os.path.join(self.tmp, name)
        with tarfile.open(self.archive) as src, tarfile.open(path, "w:gz") as dst:
            for member in src.getmembers():
                dst.addfile(member, src.extractfile(member) if member.isfile() else None)
            info = tarfile.TarInfo("food-101/.complete")
            add_marker(dst, info)
        return path

    def test_a_marker_that_cannot_be_written_is_the_scripts_error(self):
        # A .complete directory in the archive makes the marker's write fail, as a full disk does:
        # the script's message, not bash's, and nothing installed.
        def as_directory(tar, info):
            info.type = tarfile.DIRTYPE
            info.mode = 0o755
            tar.addfile(info)

        archive = self.archive_with_marker("dir_marker.tar.gz", as_directory)
        r = self.fetch(archive, md5_of(archive))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("get_food101.sh: error: cannot write the completion marker", r.stderr)
        self.assertIn("nothing was installed in " + self.tree, r.stderr)
        self.assertNotIn("line ", r.stderr)
        self.assert_not_installed()

    def test_the_archives_own_marker_is_not_written_through(self):
        # A .complete link in the archive (to /dev/full: every write ENOSPC) is replaced by the
        # script's marker, not written through.
        def as_link(tar, info):
            info.type = tarfile.SYMTYPE
            info.linkname = "/dev/full"
            tar.addfile(info)

        archive = self.archive_with_marker("link_marker.tar.gz", as_link)
        md5 = md5_of(archive)
        r = self.fetch(archive, md5)
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        self.assertFalse(os.path.islink(self.marker))
        self.assert_complete(md5)

    def test_the_closing_hint_quotes_the_directory(self):
        self.out = os.path.join(self.tmp, "g 1", "\u00fc's")
        self.tree = os.path.join(self.out, "food-101")
        self.marker = os.path.join(self.tree, ".complete")
        r = self.fetch()
        self.assertEqual(r.returncode, 0, r.stdout + r.stderr)
        hint = [line for line in r.stdout.splitlines() if "scripts/run.sh --data" in line]
        self.assertEqual(len(hint), 1, r.stdout)
        words = shlex.split(hint[0].split(": ", 1)[1])
        self.assertEqual(words[:3], ["scripts/run.sh", "--data", self.out])
        self.assertEqual(words[-3:], ["build/bin/train_resnet50", "--data", self.out])

    def tool_path(self, *tools):
        """A PATH holding only the named programs (links to the real ones)."""
        bin_dir = os.path.join(self.tmp, "bin")
        os.makedirs(bin_dir, exist_ok=True)
        for tool in tools:
            os.symlink(shutil.which(tool), os.path.join(bin_dir, tool))
        return dict(os.environ, PATH=bin_dir)

    def test_missing_download_tool(self):
        r = self.run_script("--out", self.out, env=self.tool_path("md5sum", "tar", "gzip"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("neither curl nor wget is installed", r.stderr)

    def test_missing_md5sum(self):
        r = self.run_script("--out", self.out, env=self.tool_path("curl", "tar", "gzip"))
        self.assertEqual(r.returncode, 1, r.stdout + r.stderr)
        self.assertIn("md5sum is not installed", r.stderr)

    def test_usage_errors_exit_2_naming_the_flag(self):
        cases = [
            (["--bogus"], "unknown argument '--bogus'"),
            (["extra"], "unknown argument 'extra'"),
            (["--out"], "--out: expected a value"),
            (["--url"], "--url: expected a value"),
            (["--md5"], "--md5: expected a value"),
            (["--out", "--md5", self.md5], "--out: expected a value, got the flag '--md5'"),
            (["--out="], "--out: expected a value"),
            (["--md5", "1234"], "--md5: expected 32 hex digits, got '1234'"),
        ]
        for args, message in cases:
            with self.subTest(args=args):
                r = self.run_script(*args)
                self.assertEqual(r.returncode, 2, r.stdout + r.stderr)
                self.assertIn(message, r.stderr)
                self.assertIn("usage: scripts/get_food101.sh", r.stderr)
        self.assertFalse(os.path.exists(self.out))

    def test_help(self):
        r = self.run_script("--help")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertTrue(
            r.stdout.startswith("usage: scripts/get_food101.sh [--out DIR] [--url URL] [--md5 SUM]")
        )
        for text in (
            "--out DIR",
            "default: data",
            "85eeb15f3717b99a5da872d97d918f87",
            "http://data.vision.ee.ethz.ch/cvl/food-101.tar.gz",
            "Exit status",
        ):
            self.assertIn(text, r.stdout)
        self.assertNotIn("set -euo", r.stdout)

    def test_upper_case_md5_and_equals_form(self):
        r = self.run_script(
            "--out=" + self.out, "--url=file://" + self.archive, "--md5=" + self.md5.upper()
        )
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assert_complete()


if __name__ == "__main__":
    unittest.main()
