"""Tests of the documentation's links: every relative link of README.md and docs/**/*.md points to a
file that exists, and an `#anchor` to a heading of its page (GitHub's slugs); every page under docs/
is reachable from README.md by links (the folders of data and generated pages excepted); README.md
stays a front door of at most 220 lines; the reader pages' sentences stay short (a guard on the
median and the longest, not a goal; BENCHMARKS.md, the record of every round, is left out).
Self-tests on a temporary tree show that the checker catches a broken link, a missing anchor, an
unreachable page and a long sentence.

Run: /usr/bin/python3 -m pytest -q tests/scripts/test_docs.py
(all tests: scripts/dev/python_tests.sh)
"""

import glob
import os
import re
import tempfile
import unittest

from scripts.support.testutil import REPO

README_MAX_LINES = 220
# Words a sentence of README.md and the reader pages: the median at most, and the longest.
# Measured with sentence_lengths() when set (2026-12-05): medians 10 to 14, the longest 42
# (docs/architecture.md).
SENTENCE_MEDIAN_MAX = 20
SENTENCE_LONGEST_MAX = 50
# Folders under docs/ that hold data and generated output (JSON, CSV, figures, sweep.py's table),
# not pages a reader is sent to: their Markdown need not be reachable, though its links are checked.
DATA_FOLDERS = ("benchmarks", "figures", "sweep", "training")

_FENCE = re.compile(r"^\s*(```|~~~)")
_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_CODE_SPAN = re.compile(r"`+[^`]*`+")
# [text](target) and ![alt](target); the target may carry a "title" after a space.
_LINK = re.compile(r"!?\[(?:[^\[\]]|\[[^\]]*\])*\]\(\s*<?([^)\s>]*)>?(?:\s+\"[^\"]*\")?\s*\)")


def prose_lines(path):
    """(line number, text) of every line of a Markdown file outside fenced code blocks."""
    fenced = False
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if _FENCE.match(line):
                fenced = not fenced
                continue
            if not fenced:
                yield number, line.rstrip("\n")


def slug(heading):
    """GitHub's anchor for a heading's text: its rendered text lower-cased, every character but
    letters, digits, '_', '-' and spaces dropped, spaces turned into '-'."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", heading)
    text = text.replace("`", "").replace("*", "")
    text = re.sub(r"<[^>]+>", "", text)
    return re.sub(r"[^\w\- ]", "", text.lower()).replace(" ", "-")


def anchors(path):
    """The anchors of a Markdown file's headings, with GitHub's -1, -2 ... for repeated ones."""
    seen: dict = {}
    out = set()
    for _, line in prose_lines(path):
        m = _HEADING.match(line)
        if not m:
            continue
        base = slug(m.group(2))
        n = seen.get(base, 0)
        seen[base] = n + 1
        out.add(base if n == 0 else "%s-%d" % (base, n))
    return out


def links(path):
    """(line number, target) of every link of a Markdown file, code spans and blocks left out."""
    for number, line in prose_lines(path):
        for m in _LINK.finditer(_CODE_SPAN.sub("", line)):
            yield number, m.group(1)


def is_relative(target):
    return bool(target) and not re.match(r"^[a-zA-Z][a-zA-Z0-9+.-]*:", target)


def resolve(page, target):
    """(the file a relative link names, its anchor or None); the page itself for '#anchor'."""
    path, _, anchor = target.partition("#")
    name = os.path.normpath(os.path.join(os.path.dirname(page), path)) if path else page
    return name, (anchor or None)


def broken_links(root, pages):
    """One message per relative link of `pages` (paths under root) whose file does not exist, or
    whose anchor is no heading of its Markdown file."""
    problems = []
    cache = {}
    for page in pages:
        for number, target in links(page):
            if not is_relative(target):
                continue
            name, anchor = resolve(page, target)
            where = "%s:%d: %s" % (os.path.relpath(page, root), number, target)
            if not os.path.exists(name):
                problems.append("%s: no such file" % where)
            elif anchor is not None and name.endswith(".md"):
                if name not in cache:
                    cache[name] = anchors(name)
                if anchor not in cache[name]:
                    problems.append("%s: no heading with anchor #%s" % (where, anchor))
    return problems


def reachable(start):
    """Every Markdown file reachable from `start` by relative links, start included."""
    seen = {os.path.normpath(start)}
    todo = [os.path.normpath(start)]
    while todo:
        page = todo.pop()
        for _, target in links(page):
            if not is_relative(target):
                continue
            name, _ = resolve(page, target)
            if name.endswith(".md") and os.path.isfile(name) and name not in seen:
                seen.add(name)
                todo.append(name)
    return seen


def doc_pages(root):
    """README.md and every Markdown file under docs/."""
    found = glob.glob(os.path.join(root, "docs", "**", "*.md"), recursive=True)
    return [os.path.join(root, "README.md")] + sorted(os.path.normpath(p) for p in found)


def reader_pages(root):
    """The pages under docs/ a reader is sent to: all but those in the data folders."""
    docs = os.path.join(root, "docs")
    out = []
    for page in doc_pages(root)[1:]:
        first = os.path.relpath(page, docs).split(os.sep)[0]
        if first not in DATA_FOLDERS:
            out.append(page)
    return out


def unreachable(root):
    """The reader pages under docs/ that README.md does not lead to, relative to root."""
    seen = reachable(os.path.join(root, "README.md"))
    return [os.path.relpath(p, root) for p in reader_pages(root) if p not in seen]


_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[A-Z(*`\[])")
_LIST_MARK = re.compile(r"^\s*(?:[-*+]|\d+\.)\s+")


def sentence_lengths(path):
    """Words per sentence of a Markdown file's prose: fenced code, headings, tables, HTML and
    images left out; a list item or a paragraph ends a sentence; inline code counts as one word
    and a link as its text."""
    paragraphs, current = [], []
    for _, line in prose_lines(path):
        text = line.strip()
        if not text or text.startswith(("#", "|", "<", "![")):
            paragraphs.append(" ".join(current))
            current = []
            continue
        if _LIST_MARK.match(text):
            paragraphs.append(" ".join(current))
            current = [_LIST_MARK.sub("", text)]
            continue
        current.append(text)
    paragraphs.append(" ".join(current))
    out = []
    for p in paragraphs:
        p = _CODE_SPAN.sub("X", p)
        p = re.sub(r"!?\[((?:[^\[\]]|\[[^\]]*\])*)\]\([^)]*\)", r"\1", p)
        for sentence in _SENTENCE_END.split(p):
            words = len(sentence.split())
            if words >= 3:
                out.append(words)
    return out


def long_prose(root):
    """The reader pages (and README.md) whose median or longest sentence is over the guard."""
    problems = []
    pages = [os.path.join(root, "README.md")] + [
        p for p in reader_pages(root) if os.path.basename(p) != "BENCHMARKS.md"
    ]
    for page in pages:
        n = sorted(sentence_lengths(page))
        if not n:
            continue
        median = n[len(n) // 2]
        if median > SENTENCE_MEDIAN_MAX or n[-1] > SENTENCE_LONGEST_MAX:
            problems.append(
                "%s: median %d words a sentence (at most %d), longest %d (at most %d)"
                % (
                    os.path.relpath(page, root),
                    median,
                    SENTENCE_MEDIAN_MAX,
                    n[-1],
                    SENTENCE_LONGEST_MAX,
                )
            )
    return problems


class DocsTest(unittest.TestCase):
    def test_every_relative_link_and_anchor_resolves(self):
        problems = broken_links(REPO, doc_pages(REPO))
        self.assertEqual(problems, [], "broken links:\n" + "\n".join(problems))

    def test_every_page_is_reachable_from_the_readme(self):
        self.assertEqual(unreachable(REPO), [], "pages README.md does not lead to")

    def test_the_readme_is_a_front_door(self):
        with open(os.path.join(REPO, "README.md"), encoding="utf-8") as f:
            lines = f.read().count("\n")
        self.assertLessEqual(lines, README_MAX_LINES, "README.md: %d lines" % lines)

    def test_sentences_stay_short(self):
        self.assertEqual(long_prose(REPO), [])

    def test_there_are_pages_to_check(self):
        self.assertIn(os.path.join(REPO, "docs", "README.md"), reader_pages(REPO))


class SlugTest(unittest.TestCase):
    def test_github_rules(self):
        self.assertEqual(slug("Flags of `train_resnet50`"), "flags-of-train_resnet50")
        self.assertEqual(
            slug("Decoding on the GPU (`--decode gpu`)"), "decoding-on-the-gpu---decode-gpu"
        )
        self.assertEqual(
            slug("Architecture: where a change goes"), "architecture-where-a-change-goes"
        )
        self.assertEqual(slug("The article's sweep on the H200"), "the-articles-sweep-on-the-h200")
        self.assertEqual(slug("**Bold** and [a link](x.md)"), "bold-and-a-link")


class CheckerSelfTest(unittest.TestCase):
    """The checker on a small tree of its own: it must fail where the tree is broken."""

    def setUp(self):
        self._tmp = tempfile.TemporaryDirectory()
        self.addCleanup(self._tmp.cleanup)
        self.root = self._tmp.name
        os.makedirs(os.path.join(self.root, "docs", "sweep"))
        self.write("README.md", "# Front\n\n[Pages](docs/README.md)\n")
        self.write("docs/README.md", "# Pages\n\n- [One](one.md#a-section): one page.\n")
        self.write("docs/one.md", "# One\n\n## A section\n\n[back](../README.md#front)\n")
        self.write("docs/sweep/sweep.md", "# Generated\n")

    def write(self, rel, text):
        with open(os.path.join(self.root, rel), "w", encoding="utf-8") as f:
            f.write(text)

    def test_a_sound_tree_passes(self):
        self.assertEqual(broken_links(self.root, doc_pages(self.root)), [])
        self.assertEqual(unreachable(self.root), [])

    def test_a_link_to_a_missing_file_is_caught(self):
        self.write("docs/one.md", "# One\n\n## A section\n\nSee [two](two.md).\n")
        problems = broken_links(self.root, doc_pages(self.root))
        self.assertEqual(problems, ["docs/one.md:5: two.md: no such file"])

    def test_a_missing_anchor_is_caught(self):
        self.write("docs/README.md", "# Pages\n\n- [One](one.md#no-such-section)\n")
        problems = broken_links(self.root, doc_pages(self.root))
        self.assertEqual(
            problems,
            [
                "docs/README.md:3: one.md#no-such-section: no heading with "
                "anchor #no-such-section"
            ],
        )

    def test_links_in_code_are_not_links(self):
        self.write(
            "docs/one.md", "# One\n\n## A section\n\n`[x](gone.md)`\n\n```\n[y](gone.md)\n```\n"
        )
        self.assertEqual(broken_links(self.root, doc_pages(self.root)), [])

    def test_an_unreachable_page_is_caught(self):
        self.write("docs/orphan.md", "# Orphan\n\n[home](../README.md)\n")
        self.assertEqual(unreachable(self.root), [os.path.join("docs", "orphan.md")])

    def test_a_long_sentence_is_caught(self):
        self.assertEqual(long_prose(self.root), [])
        long = " ".join(["Word"] + ["word"] * 59) + "."
        self.write("docs/one.md", "# One\n\n## A section\n\nShort one here. %s\n" % long)
        self.assertEqual(
            long_prose(self.root),
            [
                os.path.join("docs", "one.md")
                + ": median 60 words a sentence (at most 20), longest 60 (at most 50)"
            ],
        )

    def test_sentences_are_split_as_a_reader_reads_them(self):
        self.write(
            "docs/one.md",
            "# One\n\nThe `--flag x` runs [the page](x.md) fast. Then it stops here.\n\n"
            "- a list item of five words\n- another item, four\n\n```\nnot prose at all here\n```\n"
            "| a | table row |\n",
        )
        self.assertEqual(sentence_lengths(os.path.join(self.root, "docs", "one.md")), [6, 4, 6, 3])

    def test_data_folders_need_not_be_reachable(self):
        self.assertNotIn(os.path.join("docs", "sweep", "sweep.md"), unreachable(self.root))


if __name__ == "__main__":
    unittest.main()
