"""The lesson notebook: generated from the stubs (or the reference), extracted back to files, graded in Jupyter.

- `build` / `write` make exercises/lesson.ipynb from the same sources as exercises/*.py, so the two
  cannot drift; every piece is one code cell tagged `piece:<name>` whose first line is `# piece: <name>`.
- `extract` turns a notebook's piece cells back into `<module>.py` files laid out like exercises/.
- `combine` is what `grade` grades in a folder that holds lesson.ipynb (exercises/): per piece its `.py`
  file, unless that file is still the untouched generated stub, in which case the notebook's cell, so a
  student who works only in the notebook gets the same grade as one who edits the files.
- `check` grades one piece from inside a running kernel, the way otter's `grader.verbs.grade` does.

Building needs reference/ (an instructor's checkout); extracting, combining and checking do not: what
they need about a piece comes from the registry in grader/pieces.py, as in a student release.
"""
from __future__ import annotations

import json
import os
import re
import stat
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from grader.lesson.cells import cells
from grader.pieces import PIECES
from grader.judge.stubs import HEADER as STUB_HEADER, digest, normal, stub_source
from grader import EXERCISES, REFERENCE

if TYPE_CHECKING:
    import nbformat

    from grader.runner.results import PieceRun

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
    """A piece's cell code as a module: the fixed header, the piece's relative imports (from the registry,
    which a student release has; never from reference/, which it has not), then the cell."""
    relative = list(PIECES[piece].imports)
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


# --- the notebook or the files: what `grade` grades in exercises/ ----------------------------------

def _regular_text(path: Path) -> str | None:
    """A regular file's text (never through a link; None for anything else, or unreadable, or too big)."""
    from grader.runner.stage import MAX_FILE

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
            return None
        data = f.read(MAX_FILE + 1)
    try:
        return data.decode("utf-8") if len(data) <= MAX_FILE else None
    except UnicodeDecodeError:
        return None


def _carry(src: Path, dest: Path) -> None:
    """Put `src` at `dest` as grading would find it: a regular file copied, a link or anything else kept
    as something that is not a regular file, so staging refuses it with the same reason."""
    try:
        info = os.lstat(src)
    except FileNotFoundError:
        return
    if stat.S_ISLNK(info.st_mode):
        os.symlink(os.readlink(src), dest)
    elif stat.S_ISREG(info.st_mode):
        from grader.runner.stage import MAX_FILE

        fd = os.open(src, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        with os.fdopen(fd, "rb") as f:
            dest.write_bytes(f.read(MAX_FILE + 1))  # staging refuses one over the limit, as it would the original
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


# --- grading from a kernel ----------------------------------------------------------------------

class Runs(list):
    """The PieceRun list check() returns, shown in a notebook as one short line instead of a long repr."""

    def __repr__(self) -> str:
        from grader.runner.report import piece_score

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
    from grader.runner import layout
    from grader.runner.schedule import grade
    from grader.runner.display import DEFAULT_SEED, PUBLIC_NOTE, TrainingDisplay, left_out
    from grader.runner.report import to_text
    from grader.runner.results import Limits

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
        limits = Limits(quick=quick)
        runs = grade(submission=folder, pieces=[piece], seed=DEFAULT_SEED, limits=limits,
                     training=TrainingDisplay(lambda line: print(line, flush=True), every=3.0))
    table = to_text(runs, "<notebook cell>", quick=left_out([piece], limits))  # says what a quick run left out
    print(PUBLIC_NOTE + "\n\n" + table if layout.current().public else table)
    return Runs(runs)


# --- the lab code the lesson's cells use in the kernel ------------------------------------------

SEALED_EVALUATOR = ("This release seals the lab's evaluator with the hidden cases (it would answer the evaluation piece): "
                    "the training, curves and heat maps below decode with your own greedy_decode and accuracy_by_length.")
SEALED_LUONG = ("This release seals Luong's model (grader/lab/luong_model.py) with the hidden cases (its encoder and "
                "decoding loop would answer the encoder and decoder pieces): Classroom's luong case trains it around "
                "your LuongDotAttention; below, Luong's curve is the lab's own run (grader/artifacts).")


def _open_sealed() -> None:
    """Open the release's sealed bundle where the kernel has the seal key (the sealed lab modules import from it)."""
    from grader.runner import layout

    try:
        layout.current()
    except layout.SealError as e:
        print(e)


class OwnEvaluator:
    """The two calls the lesson makes of the lab's evaluator (`greedy`, `accuracy_by_length`), made with the student's
    own evaluation piece: `greedy_decode` and `accuracy_by_length` as the kernel last defined them. A student release
    seals the lab's evaluator; this code is the student's, run in their own kernel."""

    def __init__(self, namespace: dict) -> None:
        self.namespace = namespace

    def _own(self, name: str):
        fn = self.namespace.get(name)
        if not callable(fn):
            raise NotebookError(f"run your evaluation cell first: in this release the notebook decodes with your own {name}")
        return fn

    def _call(self, name: str, *args):
        try:
            return self._own(name)(*args)
        except NotImplementedError:
            raise NotebookError(f"your {name} is not written yet, and this release decodes with it (the lab's evaluator "
                                "is sealed): finish the evaluation piece first") from None

    def greedy(self, model, batch) -> tuple:
        """(tokens (B, T_tgt - 1), alpha (B, T_tgt - 1, T_src)) from <sos>, with the student's greedy_decode."""
        return self._call("greedy_decode", model, batch.src, batch.src_mask, batch.tgt[:, :1], batch.tgt.size(1) - 1)

    def accuracy_by_length(self, model, pairs: list, batch_size: int = 256) -> dict[int, float]:
        """Pooled greedy token accuracy for each source length of `pairs`, with the student's accuracy_by_length
        (one length per batch; batches of a length pooled by their real target tokens)."""
        from grader.lab import toy

        mode = model.training
        model.eval()
        device = next(model.parameters()).device
        pooled: dict[int, float] = {}
        try:
            for n, same_length in toy.by_length(pairs).items():
                right = tokens = 0.0
                for start in range(0, len(same_length), batch_size):
                    batch = toy.encode(same_length[start : start + batch_size]).to(device)
                    got = self._call("accuracy_by_length", model, batch.src, batch.src_mask, batch.tgt)
                    if not isinstance(got, dict) or n not in got:
                        raise NotebookError(f"your accuracy_by_length gave no accuracy for source length {n} "
                                            "(its keys are the batch's real source lengths)")
                    real = int(batch.tgt[:, 1:].ne(0).sum())
                    right, tokens = right + float(got[n]) * real, tokens + real
                pooled[n] = right / tokens
        finally:
            model.train(mode)
        return pooled


def lab_evaluator(namespace: dict):
    """What the lesson decodes with: the lab's evaluator (grader.lab.evaluate) where this checkout holds it (an
    instructor's, or a release opened with the seal key); else, saying so in one line, the student's own evaluation
    piece (`OwnEvaluator` over the kernel's `namespace`)."""
    from grader import lab

    _open_sealed()
    if "evaluate" not in lab.missing():
        from grader.lab import evaluate

        return evaluate
    print(SEALED_EVALUATOR)
    return OwnEvaluator(namespace)


def lab_luong():
    """The lab's Seq2SeqLuong where this checkout holds it; else None, saying so in one line."""
    from grader import lab

    _open_sealed()
    if "luong_model" in lab.missing():
        print(SEALED_LUONG)
        return None
    from grader.lab.luong_model import Seq2SeqLuong

    return Seq2SeqLuong


class unfinished:  # noqa: N801 - used as a statement: `with unfinished():`
    """A lesson cell that needs pieces you may not have written yet: where one is still a stub, the cell says so in
    one line and the notebook runs on (a cell after it that needs its results says the same)."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is NotImplementedError:
            print(f"not run yet: {exc or 'a piece is still a stub'}; write it, then run this cell again")
            return True
        if kind is NameError:  # a result of a cell above that did not run
            print(f"not run yet: it needs {getattr(exc, 'name', None) or 'a result'} from a cell above that did "
                  "not run (a piece still to write)")
            return True
        return False
