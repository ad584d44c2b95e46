"""Generate the student stubs in exercises/ from the reference, the single source of both.

Every `### BEGIN SOLUTION` ... `### END SOLUTION` block becomes a `raise NotImplementedError`
that names the piece and the function, as nbgrader and otter-grader do with their markers.
"""
from __future__ import annotations

import ast
import re
from pathlib import Path

from grader import EXERCISES, REFERENCE
from grader.pieces import PIECES

_BEGIN = re.compile(r"^(\s*)### BEGIN SOLUTION\s*$")
_END = re.compile(r"^\s*### END SOLUTION\s*$")
HEADER = '# Student file, generated from the reference by `grade stubs`: replace each NotImplementedError.\n'


def _functions(source: str) -> list[tuple[int, int, str]]:
    """(first line, last line, qualified name) of every function, innermost last."""
    spans = []

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                name = f"{prefix}{child.name}"
                if not isinstance(child, ast.ClassDef):
                    spans.append((child.lineno, child.end_lineno or child.lineno, name))
                visit(child, name + ".")

    visit(ast.parse(source), "")
    return spans


def stub_source(source: str, piece: str) -> str:
    """The stub text for one reference module."""
    spans = _functions(source)
    out, skipping = [], False
    for number, line in enumerate(source.splitlines(keepends=True), start=1):
        begin = _BEGIN.match(line)
        if begin:
            owner = [name for first, last, name in spans if first <= number <= last][-1]
            out.append(f'{begin.group(1)}raise NotImplementedError("piece \'{piece}\': write {owner}")\n')
            skipping = True
        elif _END.match(line):
            skipping = False
        elif not skipping:
            out.append(line)
    if skipping:
        raise ValueError(f"unclosed ### BEGIN SOLUTION in the reference for {piece}")
    return HEADER + "".join(out)


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
