"""Reading a lesson notebook file: its piece cells, and a piece's cell as the module it stands for.

Every piece is one code cell tagged `piece:<name>` whose first line is `# piece: <name>`. What a piece's module
needs besides its cell comes from the registry in grader/core/pieces.py, as in a student release (never reference/).
Both grader.lesson.notebook (building, extracting, combining) and grader.lesson.kernel (`check`) read with this.
"""
from __future__ import annotations

import json
import re
from pathlib import Path
from typing import TYPE_CHECKING

from grader.core.pieces import PIECES

if TYPE_CHECKING:
    import nbformat

TAG = "piece:"
_MARKER = re.compile(r"^# piece: ([a-z_]+)\s*$", re.MULTILINE)
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
    except Exception as exc:  # noqa: BLE001 - nbformat raises many types for malformed notebooks
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
