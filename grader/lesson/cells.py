"""The lesson notebook's prose and its non-graded code cells, in order; `grader.lesson.notebook` assembles them.

The text lives in grader/templates/lesson/: one file per cell, `.md` for markdown and `.ipy` for code
(IPython's extension: the cells hold magics such as `%matplotlib inline`, so they are not Python files
for linters, byte-compilers or test collection). The notebook opens with HEAD, then each piece in the registry's
order: its `lesson` files, then its graded cell (its code comes from the stubs or the reference); TAIL ends it.
A cell's id is made from its file's name (or its piece's), so adding a cell renames no other. A heading written
`## #. Title` is numbered in the notebook's order and `{pieces}` counts the registry's pieces, so a new piece's
lesson renumbers and recounts nothing by hand; `{measured:NAME}` quotes a time from the record
(grader/core/measured.json, `python bench/record.py --notebook`) with where it was measured, so no time is typed.
"""
from __future__ import annotations

import re
from importlib import resources

from grader.core import measured
from grader.core.pieces import PIECES

HEAD = ("intro.md", "setup.ipy")
NUMBERED = "## #. "  # a section heading the notebook numbers in order (a piece's lesson file may add one anywhere)
PIECE_COUNT = "{pieces}"  # the number of pieces, in words, where the prose counts them
_WORDS = "one two three four five six seven eight nine ten eleven twelve".split()
MEASURED = re.compile(r"\{measured:(\w+)\}")  # a recorded time, quoted with its machine and date


def number_word(n: int) -> str:
    """"six" for 6: how the prose writes a count of pieces (the README's too: tests/prose.py); digits past twelve."""
    return _WORDS[n - 1] if 1 <= n <= len(_WORDS) else str(n)
TAIL = ("train.md", "train.ipy", "curve.md", "curve.ipy", "heatmap.md", "heatmap.ipy",
        "luong-train.md", "luong-train.ipy", "compare.md", "compare.ipy", "check.md", "check.ipy")
_KINDS = {"md": "md", "ipy": "code"}  # by file extension


def order() -> list[str]:
    """The notebook's cells in order: a template's file name, or "piece:<name>" for a graded piece's cell."""
    return [*HEAD, *(entry for p in PIECES.values() for entry in (*p.lesson, f"piece:{p.name}")), *TAIL]


def measured_run(name: str) -> str:
    """" (the lab's own run took 62.5 s for 2,100 steps on a 2-core AMD EPYC (AVX-512), torch 2.13.0+cpu,
    2026-12-07; a slower or busier CPU can take many times that)" from the record, or "" where none is recorded."""
    e = measured.record().get(name)
    if not e:
        return ""
    steps = f" for {e['steps']:,} steps" if "steps" in e else ""
    torch = f", torch {e['torch']}" if "torch" in e else ""
    # a time from one machine at one moment, never a bound (issue 49: a student's run of this cell took 6 minutes)
    return (f" (the lab's own run took {measured.seconds(name)}{steps} on {e['machine']}{torch}, {e['date']}; "
            "a slower or busier CPU can take many times that)")


def cell_id(entry: str) -> str:
    """A cell's id, from its template's name or its piece's: "masking.md" -> "cell-masking-md"."""
    return "cell-" + entry.replace(":", "-").replace(".", "-")


def cells() -> list[tuple[str, str, str]]:
    """The cells as (id, kind, text): kind "md" or "code" with the template's text, or "piece" with its name."""
    folder = resources.files("grader") / "templates" / "lesson"
    entries = order()
    # A template named nowhere would silently vanish from the notebook: refuse it instead.
    unlisted = sorted({f.name for f in folder.iterdir() if f.is_file()} - set(entries))
    if unlisted:
        raise RuntimeError(f"grader/templates/lesson/ holds files that neither grader.lesson.cells nor a piece's "
                           f"`lesson` in grader/core/pieces.py names: {', '.join(unlisted)}")
    out, section = [], 0
    count = number_word(len(PIECES)).capitalize()  # it opens a list item
    for entry in entries:
        if entry.startswith("piece:"):
            out.append((cell_id(entry), "piece", entry.removeprefix("piece:")))
            continue
        text = (folder / entry).read_text(encoding="utf-8")
        if entry.endswith(".md"):  # the prose counts what the registry holds: a new piece renumbers nothing by hand
            lines = text.split("\n")
            for i, line in enumerate(lines):
                if line.startswith(NUMBERED):
                    section += 1
                    lines[i] = f"## {section}. {line.removeprefix(NUMBERED)}"
            text = MEASURED.sub(lambda m: measured_run(m.group(1)), "\n".join(lines).replace(PIECE_COUNT, count))
        out.append((cell_id(entry), _KINDS[entry.rsplit(".", 1)[1]], text))
    return out
