"""What a piece's worker is given to compile: the student's file, the reference (or stub) modules it imports,
and the lab modules its piece's training needs (grader/core/pieces.py)."""
from __future__ import annotations

from pathlib import Path


def lab_sources(names: tuple[str, ...]) -> list[tuple[str, str]]:
    """The text of the lab's own modules a piece's worker needs (grader/lab/<name>.py, in the order given): workers
    import no lab module of their own, so none holds code that computes another piece's answer. A student release
    seals the ones that hold an answer (grader.lab.SEALED): they are read from the opened bundle (grader.lab.find)."""
    from grader import lab

    found = []
    for name in names:
        path = lab.find(name)
        if path is None:
            raise FileNotFoundError(f"grader/lab/{name}.py is sealed in this release (grader/sealed.bin); "
                                    "it opens with the seal key")
        found.append((name, Path(path).read_text(encoding="utf-8")))
    return found


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


def registry_imports(stem: str) -> list[str]:
    """The modules a piece's module imports by its registry entry (grader/core/pieces.py `imports`), and what those import
    in turn, in the order the pieces run: the only siblings its worker is given, whatever the student's file imports."""
    from grader.core.pieces import PIECES, run_order

    by_module = {p.module: p for p in PIECES.values()}
    found: set[str] = set()
    todo = [stem]
    while todo:
        for other in by_module[todo.pop()].imported:
            if other not in found:
                found.add(other)
                todo.append(other)
    return [PIECES[name].module for name in run_order(list(PIECES)) if PIECES[name].module in found]


def student_sources(submission: Path, reference: Path | None, stem: str, order: list[str],
                    stubbed: bool = False) -> list[tuple[str, str]]:
    """What a worker loads: the student's file for `stem` last, and before it, in dependency order, exactly the
    modules the piece's registry entry imports (`registry_imports`): the reference's (their stubs where `stubbed`),
    or the student's own in public mode. An import the registry does not list (a decoder's `from .luong import`)
    finds nothing in the worker. Only regular files are read."""
    from grader.core.files import MAX_PIECE, read_untrusted, untrusted_text
    from grader.judge.stub_source import stub_source

    def read(path: Path) -> str | None:
        return untrusted_text(read_untrusted(path, MAX_PIECE))  # staging refused a larger piece already

    base = reference if reference is not None else submission
    own = read(submission / f"{stem}.py") or ""
    earlier = order[: order.index(stem)]
    texts = {m: read(base / f"{m}.py") for m in registry_imports(stem) if m in earlier}
    out = [(m, stub_source(texts[m], m) if stubbed and reference is not None else texts[m])
           for m in order if texts.get(m) is not None]
    return out + [(stem, own)]




def withheld(piece: str, graded: bool, part: str = "all") -> str:
    """Why what a piece's workers print, warn and raise reaches no report, or "" where it is shown.

    A worker that holds reference code (the modules its registry entry imports; not their stubs, which the
    evaluation piece gets) or lab code that holds an answer (grader.lab.ANSWERS, given only where a training case runs:
    `part` is not "units") could copy it into its prints or exception messages. In public mode (`graded` False)
    a worker holds only the student's own files."""
    from grader.lab import ANSWERS
    from grader.core.pieces import PIECES

    if not graded:
        return ""
    stem = PIECES[piece].module
    held = [] if PIECES[piece].stubbed else registry_imports(stem)
    lab = [ANSWERS[m] for m in PIECES[piece].lab if m in ANSWERS] if part != "units" else []
    if not held and not lab:
        return ""
    names = ([f"the reference's {_listed(held)} code"] if held else []) + lab
    return f"its worker holds {_listed(names)}, which they could copy"


def _listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]
