"""The lesson notebook: generated from the stubs (or the reference), extracted back to files, graded in Jupyter.

- `build` / `write` make exercises/lesson.ipynb from the same sources as exercises/*.py, so the two
  cannot drift; every piece is one code cell tagged `piece:<name>` whose first line is `# piece: <name>`.
- `extract` turns a notebook's piece cells back into `<module>.py` files laid out like exercises/.
- `check` grades one piece from inside a running kernel, the way otter's `grader.check` does.
"""
from __future__ import annotations

import json
import re
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from .lesson_cells import CELLS
from .pieces import PIECES
from .stubs import EXERCISES, HEADER as STUB_HEADER, REFERENCE, stub_source

if TYPE_CHECKING:
    import nbformat

    from .sandbox import PieceRun

NOTEBOOK = EXERCISES / "lesson.ipynb"
TAG = "piece:"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
_MARKER = re.compile(r"^# piece: ([a-z_]+)\s*$", re.MULTILINE)
_SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
_RELATIVE = re.compile(r"^from \.\w* import ")
# Notebook-only lines that are not Python in a file: magics, shell escapes, their IPython
# translations, and check() calls typed into a piece cell.
_NOTEBOOK_ONLY = re.compile(r"^(%|!|get_ipython\(\)|check\()")
FIXED_HEADER = (
    "from __future__ import annotations\n\n"
    "import torch\n"
    "import torch.nn as nn\n"
    "import torch.nn.functional as F\n"
)


class NotebookError(Exception):
    """A notebook cannot be read or holds no piece cells; str() is one line for the student."""


def _nbformat():
    try:
        import nbformat
    except ModuleNotFoundError:
        raise NotebookError("the lesson notebook needs nbformat: pip install -e '.[notebook]'") from None
    return nbformat


# --- building -----------------------------------------------------------------------------------

def cell_code(piece: str, source: str = "stubs") -> str:
    """A piece's cell: its module without the future import and relative imports (cells share a namespace)."""
    module = PIECES[piece].module
    text = (REFERENCE / f"{module}.py").read_text()
    if source == "stubs":
        text = stub_source(text, piece).removeprefix(STUB_HEADER)
    elif source == "reference":
        text = "".join(ln for ln in text.splitlines(keepends=True) if not _SOLUTION_MARKER.match(ln))
    else:
        raise ValueError(f"source must be 'stubs' or 'reference', not {source!r}")
    kept = [ln for ln in text.splitlines() if not ln.startswith("from __future__") and not _RELATIVE.match(ln)]
    body = re.sub(r"\n{4,}", "\n\n\n", "\n".join(kept)).strip("\n")  # removed lines leave gaps
    return f"# piece: {piece}\n{body}\n"


def build(source: str = "stubs") -> nbformat.NotebookNode:
    """The lesson notebook with the pieces' stubs ("stubs") or their solutions ("reference"); no outputs."""
    nbformat = _nbformat()
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}})
    for index, (kind, text) in enumerate(CELLS):
        if kind == "md":
            cell = v4.new_markdown_cell(text.strip("\n"))
        elif kind == "piece":
            cell = v4.new_code_cell(cell_code(text, source).rstrip("\n"), metadata={"tags": [f"{TAG}{text}"]})
        else:
            cell = v4.new_code_cell(text.strip("\n"))
        cell.id = f"cell-{index:02d}"  # stable ids: regenerating gives the same bytes
        nb.cells.append(cell)
    return nb


def dumps(nb: nbformat.NotebookNode) -> str:
    """The notebook's file text: nbformat's sorted, indented JSON plus a final newline."""
    return _nbformat().writes(nb) + "\n"


def write(path: Path = NOTEBOOK, source: str = "stubs") -> Path:
    """Write the generated notebook (stubs by default) and return its path."""
    path.write_text(dumps(build(source)), encoding="utf-8")
    return path


# --- extracting ---------------------------------------------------------------------------------

def read(nb_path: Path) -> nbformat.NotebookNode:
    """Read a notebook, turning every way it can be broken into a one-line NotebookError."""
    nbformat = _nbformat()
    nb_path = Path(nb_path)
    if not nb_path.is_file():
        raise NotebookError(f"{nb_path} does not exist")
    try:
        data = json.loads(nb_path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        raise NotebookError(f"{nb_path.name} is not a valid notebook: it is not UTF-8 text") from None
    except json.JSONDecodeError as exc:
        raise NotebookError(f"{nb_path.name} is not a valid notebook: not JSON ({exc.msg} at line {exc.lineno}, "
                            f"column {exc.colno})") from None
    if not isinstance(data, dict) or not isinstance(data.get("cells"), list) or "nbformat" not in data:
        raise NotebookError(f"{nb_path.name} is not a valid notebook: no 'nbformat' version or 'cells' list")
    # Only what extraction relies on is checked here, before nbformat sees it (its errors on broken
    # cells are cryptic); full schema validation would turn away notebooks other editors save with
    # a harmless field missing.
    for number, cell in enumerate(data["cells"], start=1):
        if not isinstance(cell, dict) or not isinstance(cell.get("cell_type"), str):
            raise NotebookError(f"{nb_path.name} is not a valid notebook: cell {number} has no cell_type")
        source = cell.get("source", "")
        if not (isinstance(source, str) or isinstance(source, list) and all(isinstance(s, str) for s in source)):
            raise NotebookError(f"{nb_path.name} is not a valid notebook: cell {number}'s source is not text")
        if not isinstance(cell.get("metadata", {}), dict):
            raise NotebookError(f"{nb_path.name} is not a valid notebook: cell {number}'s metadata is not a mapping")
    try:
        nb = nbformat.reads(json.dumps(data), as_version=4)
    except Exception as exc:  # nbformat raises many types for malformed notebooks
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
        raise NotebookError(f"{nb_path.name} is not a valid notebook: {reason}") from None
    return nb


def _piece_of(cell) -> str | None:
    """The piece a code cell holds: its `piece:<name>` tag, or else a first line `# piece: <name>`."""
    if cell.get("cell_type") != "code":
        return None
    tags = cell.get("metadata", {}).get("tags", [])
    named = [t[len(TAG):] for t in tags if isinstance(t, str) and t.startswith(TAG)] if isinstance(tags, list) else []
    if not named:  # a student's editor may drop tags; the marker line survives copy and paste
        first = cell.get("source", "").lstrip().split("\n", 1)[0]
        named = _MARKER.findall(first)
    return next((n for n in named if n in PIECES), None)


def piece_cells(nb: nbformat.NotebookNode) -> dict[str, str]:
    """{piece: cell source}; where a piece has several cells the last one wins, as when run top to bottom."""
    return {piece: cell.source for cell in nb.cells if (piece := _piece_of(cell))}


def module_text(piece: str, code: str) -> str:
    """A piece's cell code as a module: the fixed header, the reference's relative imports, then the cell."""
    module = PIECES[piece].module
    relative = [ln for ln in (REFERENCE / f"{module}.py").read_text().splitlines() if ln.startswith("from .")]
    lines = [f"# {ln}  (notebook-only line, left out)" if _NOTEBOOK_ONLY.match(ln) else ln for ln in code.splitlines()]
    header = FIXED_HEADER + ("\n" + "\n".join(relative) + "\n" if relative else "")
    return header + "\n\n" + "\n".join(lines).strip("\n") + "\n"


def extract(nb_path: Path, into: Path) -> Path:
    """Write one `<module>.py` per piece cell of the notebook into `into` (created); returns `into`."""
    nb = read(nb_path)
    cells = piece_cells(nb)
    if not cells:
        raise NotebookError(f"{Path(nb_path).name} has no piece cells: each piece's cell starts with "
                            "'# piece: <name>' and carries the tag 'piece:<name>'")
    into = Path(into)
    into.mkdir(parents=True, exist_ok=True)
    for piece, code in cells.items():
        (into / f"{PIECES[piece].module}.py").write_text(module_text(piece, code), encoding="utf-8")
    return into


# --- grading from a kernel ----------------------------------------------------------------------

class Runs(list):
    """The PieceRun list check() returns, shown in a notebook as one short line instead of a long repr."""

    def __repr__(self) -> str:
        from .report import piece_score

        return "Runs(" + ", ".join("{} {}/{}".format(r.name, *piece_score(r)) for r in self) + ")"


def _from_history(piece: str) -> str | None:
    """The most recently run input that contains the line `# piece: <piece>`, if we are in IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    shell = get_ipython()
    if shell is None:
        return None
    marker = f"# piece: {piece}"
    for text in reversed(shell.user_ns.get("In") or []):
        if any(line.strip() == marker for line in text.splitlines()):
            return text
    return None


def check(piece: str, *, quick: bool = True, notebook: str | Path | None = None) -> list[PieceRun]:
    """Grade the current code of one piece (the last run cell marked `# piece: <piece>`) and print the report.

    Outside IPython, or before such a cell has run, the piece's cell is read from `notebook`.
    The code is only written to a temporary file: grade() runs it in child processes, never here.
    """
    from .check import DEFAULT_SEED, TrainingDisplay, grade
    from .report import to_text
    from .sandbox import Limits

    if piece not in PIECES:
        raise NotebookError(f"there is no piece {piece!r}; the pieces are {', '.join(PIECES)}")
    code = _from_history(piece)
    if code is None and notebook is not None:
        code = piece_cells(read(Path(notebook))).get(piece)
    if code is None:
        hint = f"and {notebook} has no such cell" if notebook is not None else "(or pass notebook='lesson.ipynb')"
        raise NotebookError(f"no cell containing the line '# piece: {piece}' has been run yet {hint}")
    with tempfile.TemporaryDirectory(prefix="attnlab-nb-") as tmp:
        folder = Path(tmp) / "submission"
        folder.mkdir()
        (folder / f"{PIECES[piece].module}.py").write_text(module_text(piece, code), encoding="utf-8")
        # with quick=False a model trains for half a minute: a line every few seconds shows how far it got
        runs = grade(submission=folder, pieces=[piece], seed=DEFAULT_SEED, limits=Limits(quick=quick),
                     training=TrainingDisplay(lambda line: print(line, flush=True), every=3.0))
    print(to_text(runs, "<notebook cell>"))
    return Runs(runs)
