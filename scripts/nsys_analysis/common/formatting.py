"""The one number formatter behind every table the scripts write (summary.md, sweep.md,
benchmarks.py, kernel_families.py), and the Markdown table they are laid out in."""


def fmt(value, digits=3, missing="n/a", ints_exact=True):
    """value as table text: `missing` for None, "pass" / "FAIL" for a bool, a float with `digits`
    decimals. An int is written as it is when ints_exact (summary.md's counts), else with `digits`
    decimals like a float (the sweep and benchmark tables, whose measurements may come as JSON
    integers). Other values: str(value)."""
    if value is None:
        return missing
    if isinstance(value, bool):
        return "pass" if value else "FAIL"
    if isinstance(value, float) or (isinstance(value, int) and not ints_exact):
        return "%.*f" % (digits, value)
    return str(value)


def table(headers, rows, align=None):
    """A Markdown table; align holds "l" or "r" per column (default: first left, the rest right)."""
    align = align or ["l"] + ["r"] * (len(headers) - 1)
    sep = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(headers) + " |", "| " + " | ".join(sep) + " |"]
    lines += ["| " + " | ".join(_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _cell(value):
    """A table cell's text: a `|` escaped, a line break as a space (a name may hold either)."""
    text = str(value).replace("|", "\\|")
    return text.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
