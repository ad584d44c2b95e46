"""Generate the student stubs in exercises/ from the reference, the single source of both.

Every `### BEGIN SOLUTION` ... `### END SOLUTION` block becomes a `raise NotImplementedError`
that names the piece and the function, as nbgrader and otter-grader do with their markers.
"""
from __future__ import annotations

from pathlib import Path

from grader import EXERCISES, REFERENCE
from grader.judge.stubs import stub_source
from grader.pieces import PIECES


def expected() -> dict[Path, str]:
    """What exercises/ must hold: one stub per piece plus the package marker."""
    files = {EXERCISES / "__init__.py": '"""Your attention lab: one file per piece. Grade it with `grade`."""\n'}
    for piece in PIECES.values():
        src = (REFERENCE / f"{piece.module}.py").read_text()
        files[EXERCISES / f"{piece.module}.py"] = stub_source(src, piece.name)
    return files


def main() -> list[Path]:
    """Write exercises/<piece>.py for every piece (the notebook is built from these by grader.lesson.notebook)."""
    EXERCISES.mkdir(exist_ok=True)
    written = []
    for path, text in expected().items():
        path.write_text(text)
        written.append(path)
    return written
