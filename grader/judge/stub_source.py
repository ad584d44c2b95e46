"""A reference module's stub: every `### BEGIN SOLUTION` ... `### END SOLUTION` block becomes a
`raise NotImplementedError` that names the piece and the function (grader.lesson.stubs writes them to exercises/;
the judge gives a worker the stubs of the modules it may not hold).
"""
from __future__ import annotations

import ast
import hashlib
import re

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


def normal(text: str) -> str:
    """Text compared as a file's or a cell's content: line endings, trailing spaces and blank edges aside."""
    return "\n".join(line.rstrip() for line in text.splitlines()).strip("\n") + "\n"


def digest(text: str) -> str:
    """A short digest of normal(text): how the registry recognises a piece's untouched stub."""
    return hashlib.sha256(normal(text).encode()).hexdigest()[:16]
