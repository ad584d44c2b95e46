"""The lab's own model code: the toy task, the trusted training loop and evaluator, the baseline and Luong models, the artifacts.

Three of these modules hold a piece's answer, so a student release does not ship them in clear but seals them in
grader/sealed.bin with the hidden cases (grader/release/build.py): the baseline's `Encoder.forward` is
`EncoderAll.forward` and its `decode_teacher_forced` the loop of `Seq2SeqAttn.forward`; the evaluator's `greedy`
and `batch_accuracy_by_length` are `greedy_decode` and `accuracy_by_length`; Luong's model is built from the
baseline's encoder and loop. toy, train and artifacts answer no piece and ship as they are. Where the bundle is
opened (`grader.runner.layout.current()` with the seal key, or a judge given the opened reference folder),
`attach` puts its lab folder on this package's path, so `from grader.lab import evaluate` finds them there.
"""
from __future__ import annotations

import os

# The modules that hold a piece's answer, with how a report names them: sealed in a student release (the others
# ship in clear), and a worker given one (a piece's `lab` in grader/core/pieces.py) has its output withheld.
ANSWERS = {"baseline": "the lab's baseline encoder", "evaluate": "the lab's evaluator", "luong_model": "Luong's decoder"}
SEALED = tuple(ANSWERS)
SEALED_DIR = "attnlab_lab"  # their folder in the opened bundle, beside reference/ and attnlab_cases/


def attach(opened: str | os.PathLike) -> bool:
    """Let this package import the lab modules of an opened bundle (`opened` holds SEALED_DIR); False if it has none."""
    folder = os.path.join(os.fspath(opened), SEALED_DIR)
    if not os.path.isdir(folder):
        return False
    if folder not in __path__:
        __path__.append(folder)
    return True


def find(name: str) -> str | None:
    """The file this process would import as `grader.lab.<name>`: the clear one, else an attached bundle's; None."""
    for folder in __path__:
        path = os.path.join(folder, f"{name}.py")
        if os.path.isfile(path):
            return path
    return None


def missing() -> list[str]:
    """The sealed modules this process cannot import: a student release whose bundle is not opened (no key)."""
    return [name for name in SEALED if find(name) is None]
