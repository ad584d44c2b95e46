"""The lab's pieces: the one place that names them, with every fact about each that its own files do not hold.

A piece is its reference file (reference/<module>.py), its hidden cases (grader/cases/test_<module>.py), its
notebook text (grader/templates/lesson/, `lesson` below) and its entry here; its place in `PIECES` sets the
gradebook's columns, the notebook's order and, with its imports, the order the pieces run. What can be derived is:
the relative imports and the stub's digest come from `grade stubs` (written to grader/core/piece_facts.json, which a
student release ships because it has no reference/), the points and the cases from the manifests.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

FACTS = Path(__file__).with_name("piece_facts.json")  # written by `grade stubs` (grader.lesson.stubs.facts)


@dataclass(frozen=True)
class Piece:
    name: str
    summary: str  # what a student writes, in a line
    module: str = ""  # file stem under exercises/ and reference/; the name when empty
    lesson: tuple[str, ...] = ()  # grader/templates/lesson/ files shown before its cell; (<name>.md,) when empty
    # the lab's own modules (grader/lab/<name>.py) its worker needs for a training case, in dependency order
    lab: tuple[str, ...] = ()
    stubbed: bool = False  # its worker gets the stubs of the modules it imports, not the reference's
    plots: tuple[str, ...] = ()  # the models `grade --plots` trains that are built from its module
    timed: bool = False  # its unit cases time the student's code: no other piece runs beside them

    def __post_init__(self) -> None:
        object.__setattr__(self, "module", self.module or self.name)
        object.__setattr__(self, "lesson", self.lesson or (f"{self.name}.md",))

    @property
    def imports(self) -> tuple[str, ...]:
        """The module's `from .x import y` lines, in the reference's order (a notebook cell gets them back)."""
        return tuple(_facts()[self.name]["imports"])

    @property
    def imported(self) -> tuple[str, ...]:
        """The modules those lines import: ("context",) for `from .context import attention_context`."""
        return tuple(line.split()[1].lstrip(".") for line in self.imports)

    @property
    def stub_digest(self) -> str:
        """notebook.digest() of the generated stub: a `.py` still equal to it is untouched."""
        return _facts()[self.name]["stub_digest"]


@lru_cache(maxsize=1)
def _facts() -> dict:
    try:
        facts = json.loads(FACTS.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        facts = {}
    missing = [name for name in PIECES if name not in facts]
    if missing:
        raise RuntimeError(f"grader/core/piece_facts.json has no entry for {', '.join(missing)}: run `grade stubs`")
    return facts


PIECES: dict[str, Piece] = {
    p.name: p
    for p in (
        Piece("encoder", "EncoderAll.forward: every LSTM output and the final (h, c)", lesson=("bottleneck.md",),
              plots=("Bahdanau",)),
        Piece("additive", "BahdanauAttention.forward: masked additive scores and alpha",
              lesson=("additive.md", "additive-worked.ipy", "masking.md"), plots=("Bahdanau",)),
        Piece("context", "attention_context: the alpha-weighted sum as one bmm", plots=("Bahdanau", "Luong"),
              timed=True),  # its no-loop case
        Piece("luong", "LuongDotAttention.forward: scaled dot-product attention",
              lab=("toy", "train", "baseline", "luong_model"), plots=("Luong",)),  # its training case: Luong's decoder
        Piece("decoder", "AttnDecoder.forward_step and Seq2SeqAttn.forward", lab=("toy", "train"),
              plots=("Bahdanau",)),  # its training case
        Piece("evaluation", "greedy_decode and accuracy_by_length", stubbed=True),
    )
}
MODULES = [p.module for p in PIECES.values()]


def holds(name: str) -> list[str]:
    """The pieces whose reference a unit-case worker of `name` holds: those its module imports, directly or not,
    where it gets their reference (the evaluation piece gets their stubs, which hold no answer)."""
    if PIECES[name].stubbed:
        return []
    by_module = {p.module: p.name for p in PIECES.values()}
    found: list[str] = []
    todo = [name]
    while todo:
        for module in PIECES[todo.pop()].imported:
            if by_module[module] not in found:
                found.append(by_module[module])
                todo.append(by_module[module])
    return found


def run_order(names: list[str]) -> list[str]:
    """`names` with each piece after the pieces whose modules it imports, otherwise in the registry's order.

    A piece's worker holds the reference of what its module imports (the decoder's: the encoder and the
    attentions), and state the machine keeps (the page cache) outlives a worker; so a piece's unit cases run
    before any worker that holds its answer exists.
    """
    by_module = {p.module: p.name for p in PIECES.values()}
    order: list[str] = []

    def visit(name: str) -> None:
        if name in order:
            return
        for module in PIECES[name].imported:
            visit(by_module[module])
        order.append(name)

    for name in PIECES:
        visit(name)
    return [n for n in order if n in names]
