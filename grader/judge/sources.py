"""What a piece's worker is given to compile: the student's file, the reference (or stub) modules it imports,
and the lab modules its piece's training needs (grader/pieces.py)."""
from __future__ import annotations

from pathlib import Path


def lab_sources(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The text of the lab's own modules a piece's worker needs (grader/lab/<name>.py, in the order given): workers
    import no lab module of their own, so none holds code that computes another piece's answer."""
    here = Path(__file__).resolve().parent.parent / "lab"
    return [(name, (here / f"{name}.py").read_text(encoding="utf-8")) for name in names]


def relative_imports(source: str) -> set[str]:
    """The lab modules a file imports relatively (`from .additive import ...` -> {"additive"})."""
    import ast

    try:
        tree = ast.parse(source)
    except SyntaxError:
        return set()
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level == 1:
            if node.module:
                found.add(node.module.split(".")[0])
            else:
                found.update(a.name for a in node.names)
    return found


def student_sources(submission: Path, reference: Path | None, stem: str, order: list[str],
                    stubbed: bool = False) -> list[tuple[str, str]]:
    """What a worker loads: the student's file for `stem` last, and before it, in dependency order, only
    the lab modules it imports and what those import in turn: the reference's (their stubs where
    `stubbed`), or the student's own in public mode. Only regular files are read."""
    from grader.lesson.stubs import stub_source

    def read(path: Path) -> str | None:
        if not path.is_file() or path.is_symlink():
            return None
        return path.read_text(encoding="utf-8", errors="replace")

    base = reference if reference is not None else submission
    own = read(submission / f"{stem}.py") or ""
    earlier = order[: order.index(stem)]
    texts: dict[str, str] = {}
    todo = [m for m in relative_imports(own) if m in earlier]
    while todo:
        other = todo.pop()
        if other in texts:
            continue
        text = read(base / f"{other}.py")
        if text is None:
            continue
        texts[other] = text
        todo += [m for m in relative_imports(text) if m in earlier]
    out = [(m, stub_source(texts[m], m) if stubbed and reference is not None else texts[m]) for m in order if m in texts]
    return out + [(stem, own)]
