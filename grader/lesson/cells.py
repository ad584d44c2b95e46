"""The lesson notebook's prose and its non-graded code cells, in order; `grader.lesson.notebook` assembles them.

The text lives in grader/templates/lesson/: one file per cell, `.md` for markdown and `.ipy` for code
(IPython's extension: the cells hold magics such as `%matplotlib inline`, so they are not Python files
for linters, byte-compilers or test collection). A file's number is its cell's id in the notebook
(`cell-NN`). A piece has no file: its code comes from the stubs or the reference when the notebook is built.
"""
from __future__ import annotations

from importlib import resources

# The notebook's cells in order: a template's file name, or "piece:<name>" for a graded piece's cell.
ORDER = (
    "00-intro.md", "01-setup.ipy",
    "02-bottleneck.md", "piece:encoder",
    "04-additive.md", "05-worked.ipy", "06-masking.md", "piece:additive",
    "08-context.md", "piece:context",
    "10-luong.md", "piece:luong",
    "12-decoder.md", "piece:decoder",
    "14-evaluation.md", "piece:evaluation",
    "16-train.md", "17-train.ipy",
    "18-curve.md", "19-curve.ipy",
    "20-heatmap.md", "21-heatmap.ipy",
    "22-luong-train.md", "23-luong-train.ipy",
    "24-compare.md", "25-compare.ipy",
    "26-check.md", "27-check.ipy",
)
_KINDS = {"md": "md", "ipy": "code"}  # by file extension


def cells() -> list[tuple[str, str]]:
    """The cells as ("md", text), ("code", text) or ("piece", name), read from the templates."""
    folder = resources.files("grader") / "templates" / "lesson"
    # A template left out of ORDER would silently vanish from the notebook: refuse it instead.
    unlisted = sorted({f.name for f in folder.iterdir() if f.is_file()} - set(ORDER))
    if unlisted:
        raise RuntimeError(f"grader/templates/lesson/ holds files not in grader.lesson.cells.ORDER: {', '.join(unlisted)}")
    out = []
    for entry in ORDER:
        if entry.startswith("piece:"):
            out.append(("piece", entry.removeprefix("piece:")))
        else:
            out.append((_KINDS[entry.rsplit(".", 1)[1]], (folder / entry).read_text(encoding="utf-8")))
    return out
