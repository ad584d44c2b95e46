"""Generate the student stubs in exercises/ from the reference, the single source of both, and the pieces' facts.

Every `### BEGIN SOLUTION` ... `### END SOLUTION` block becomes a `raise NotImplementedError`
that names the piece and the function, as nbgrader and otter-grader do with their markers. The facts a student
release needs about each piece and cannot read from reference/ (which it does not have) are derived here too
and written to grader/core/piece_facts.json: the module's relative imports and its stub's digest.
"""
from __future__ import annotations

import ast
import json
from pathlib import Path

from grader import EXERCISES, REFERENCE
from grader.judge.stub_source import digest, stub_source
from grader.core.pieces import FACTS, PIECES


def expected() -> dict[Path, str]:
    """What exercises/ must hold: one stub per piece plus the package marker."""
    files = {EXERCISES / "__init__.py": '"""Your attention lab: one file per piece. Grade it with `grade`."""\n'}
    for piece in PIECES.values():
        src = (REFERENCE / f"{piece.module}.py").read_text()
        files[EXERCISES / f"{piece.module}.py"] = stub_source(src, piece.name)
    return files


def relative_import_lines(source: str) -> list[str]:
    """The module's top-level `from .x import y` lines, as written, in order."""
    return [ast.get_source_segment(source, node) for node in ast.parse(source).body
            if isinstance(node, ast.ImportFrom) and node.level == 1]


def facts() -> str:
    """grader/core/piece_facts.json's text: {piece: {"imports": [...], "stub_digest": "..."}} from reference/."""
    out = {}
    for piece in PIECES.values():
        src = (REFERENCE / f"{piece.module}.py").read_text()
        out[piece.name] = {"imports": relative_import_lines(src), "stub_digest": digest(stub_source(src, piece.name))}
    return json.dumps(out, indent=1) + "\n"


def main() -> list[Path]:
    """Write grader/core/piece_facts.json and exercises/<piece>.py for every piece (the notebook is built from these
    by grader.lesson.notebook)."""
    from grader.core import pieces

    FACTS.write_text(facts(), encoding="utf-8")
    pieces._facts.cache_clear()
    EXERCISES.mkdir(exist_ok=True)
    written = [FACTS]
    for path, text in expected().items():
        path.write_text(text)
        written.append(path)
    return written
