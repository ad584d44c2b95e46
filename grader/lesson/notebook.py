"""The lesson notebook file: generated from the stubs (or the reference), extracted back to files, combined.

- `build` / `write` make exercises/lesson.ipynb from the same sources as exercises/*.py, so the two
  cannot drift; every piece is one code cell tagged `piece:<name>` whose first line is `# piece: <name>`
  (grader.lesson.ipynb reads them back).
- `extract` turns a notebook's piece cells back into `<module>.py` files laid out like exercises/.
- `combine` is what `grade` grades in a folder that holds lesson.ipynb (exercises/): per piece its `.py`
  file, unless that file is still the untouched generated stub, in which case the notebook's cell, so a
  student who works only in the notebook gets the same grade as one who edits the files.
- The kernel side (`check` and the lab code the lesson's cells use) is grader.lesson.kernel; the notebook's
  setup cell imports it from here, as students' saved notebooks do.

Building needs reference/ (an instructor's checkout); extracting and combining do not: what they need
about a piece comes from the registry in grader/core/pieces.py, as in a student release.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import TYPE_CHECKING

from grader.lesson.cells import cells
from grader.lesson.ipynb import TAG, NotebookError, _nbformat, module_text, piece_cells, read
# The setup cell of lesson.ipynb imports these from here, and students' saved notebooks keep that line.
from grader.lesson.kernel import check, lab_evaluator, lab_luong, unfinished  # noqa: F401
from grader.core.files import LINK, MAX_PIECE, MISSING, TOO_BIG, read_untrusted
from grader.core.pieces import PIECES
from grader.judge.stub_source import HEADER as STUB_HEADER, digest, normal, stub_source
from grader import EXERCISES, REFERENCE

if TYPE_CHECKING:
    import nbformat

NOTEBOOK = EXERCISES / "lesson.ipynb"
KERNELSPEC = {"name": "python3", "display_name": "Python 3", "language": "python"}
_SOLUTION_MARKER = re.compile(r"^\s*### (BEGIN|END) SOLUTION\s*$")
_RELATIVE = re.compile(r"^from \.\w* import ")


# --- building -----------------------------------------------------------------------------------

def as_cell(piece: str, module_source: str) -> str:
    """A module's text as the piece's cell: without the stub header, the future import and the relative
    imports (cells share one namespace), under the `# piece: <name>` marker."""
    text = module_source.removeprefix(STUB_HEADER)
    kept = [ln for ln in text.splitlines() if not ln.startswith("from __future__") and not _RELATIVE.match(ln)]
    body = re.sub(r"\n{4,}", "\n\n\n", "\n".join(kept)).strip("\n")  # removed lines leave gaps
    return f"# piece: {piece}\n{body}\n"


def cell_code(piece: str, source: str = "stubs") -> str:
    """A piece's cell from the reference (an instructor's checkout): its stub ("stubs") or its solution."""
    module = PIECES[piece].module
    text = (REFERENCE / f"{module}.py").read_text()
    if source == "stubs":
        text = stub_source(text, piece)
    elif source == "reference":
        text = "".join(ln for ln in text.splitlines(keepends=True) if not _SOLUTION_MARKER.match(ln))
    else:
        raise ValueError(f"source must be 'stubs' or 'reference', not {source!r}")
    return as_cell(piece, text)


def build(source: str = "stubs") -> nbformat.NotebookNode:
    """The lesson notebook with the pieces' stubs ("stubs") or their solutions ("reference"); no outputs."""
    nbformat = _nbformat()
    v4 = nbformat.v4
    nb = v4.new_notebook()
    nb.metadata = nbformat.from_dict({"kernelspec": dict(KERNELSPEC), "language_info": {"name": "python"}})
    for cell_id, kind, text in cells():  # read here, not at import: grading never needs the prose
        if kind == "md":
            cell = v4.new_markdown_cell(text.strip("\n"))
        elif kind == "piece":
            cell = v4.new_code_cell(cell_code(text, source).rstrip("\n"), metadata={"tags": [f"{TAG}{text}"]})
        else:
            cell = v4.new_code_cell(text.strip("\n"))
        cell.id = cell_id  # stable ids: regenerating gives the same bytes
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


# --- the notebook or the files: what `grade` grades in exercises/ ----------------------------------

def _regular_text(path: Path) -> str | None:
    """A regular file's text (never through a link; None for anything else, or unreadable, or too big)."""
    data = read_untrusted(path, MAX_PIECE).data
    try:
        return data.decode("utf-8") if data is not None else None
    except UnicodeDecodeError:
        return None


def _carry(src: Path, dest: Path) -> None:
    """Put `src` at `dest` as grading would find it: a regular file copied, a link or anything else kept
    as something that is not a regular file, so staging refuses it with the same reason."""
    got = read_untrusted(src, MAX_PIECE)
    if got.refused == MISSING:
        return
    if got.data is not None:
        dest.write_bytes(got.data)
    elif got.refused == TOO_BIG:
        dest.write_bytes(b"#" * (MAX_PIECE + 1))  # staging refuses it as "over", as it would the original
    elif got.refused == LINK:
        try:
            os.symlink(os.readlink(src), dest)
        except OSError:  # Windows makes a link only with a right (Developer Mode) a student may lack
            dest.mkdir()  # refused as not a regular file, then
    else:
        dest.mkdir()


def graded_files(folder: Path) -> dict[str, str]:
    """{piece: the file `grade` grades for it} in a folder holding lesson.ipynb: `<module>.py`, unless that
    file is still the untouched generated stub (or missing) and the notebook's cell for the piece is not."""
    folder = Path(folder)
    files = {piece: f"{p.module}.py" for piece, p in PIECES.items()}
    nb_path = folder / NOTEBOOK.name
    if not nb_path.is_file():
        return files
    cells = piece_cells(read(nb_path))
    for piece, p in PIECES.items():
        code = cells.get(piece)
        if code is None:
            continue
        py = folder / f"{p.module}.py"
        if not os.path.lexists(py):
            files[piece] = nb_path.name
            continue
        text = _regular_text(py)
        if text is not None and digest(text) == p.stub_digest and normal(code) != normal(as_cell(piece, text)):
            files[piece] = nb_path.name
    return files


def combine(folder: Path, into: Path) -> tuple[Path, dict[str, str]]:
    """The folder to grade for `folder` and {piece: file graded} (see graded_files): `folder` itself when
    every piece is graded from its .py file, else `into` (created) with the notebook's cells written as
    modules beside the other pieces' files."""
    folder = Path(folder)
    files = graded_files(folder)
    if all(f.endswith(".py") for f in files.values()):
        return folder, files
    into = Path(into)
    into.mkdir(parents=True)
    cells = piece_cells(read(folder / NOTEBOOK.name))
    for piece, p in PIECES.items():
        dest = into / f"{p.module}.py"
        if files[piece].endswith(".py"):
            _carry(folder / files[piece], dest)
        else:
            dest.write_text(module_text(piece, cells[piece]), encoding="utf-8")
    return into, files


def describe(files: dict[str, str]) -> str:
    """One line saying which file was graded for which piece."""
    nb = sorted({f for f in files.values() if not f.endswith(".py")})
    from_nb = [piece for piece, f in files.items() if not f.endswith(".py")]
    from_py = [f for f in files.values() if f.endswith(".py")]
    if not from_nb:
        return (f"graded: the .py files ({', '.join(from_py)}); {NOTEBOOK.name} counts only for a piece whose "
                ".py file is still the untouched stub")
    said = f"graded from {', '.join(nb)} (their .py files are untouched stubs or absent): {', '.join(from_nb)}"
    return said + (f"; from the .py files: {', '.join(from_py)}" if from_py else "")
