"""The lesson notebook's kernel side: what its cells call in a running Jupyter kernel.

- `check` grades one piece from inside a running kernel, as otter's `Notebook.check` does: the last
  run cell marked `# piece: <name>` (or the notebook file's cell), written to a temporary module and graded there.
- `lab_evaluator`, `lab_luong` and `unfinished` are the lab code the lesson's cells use; where a student release
  seals part of the lab, they say so in one line (SEALED_EVALUATOR, SEALED_LUONG) and the lesson runs on.

A notebook's setup cell imports these from grader.lesson.notebook (students' saved notebooks keep that import).
"""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import TYPE_CHECKING

from grader.lesson.ipynb import NotebookError, module_text, piece_cells, read
from grader.core.pieces import PIECES

if TYPE_CHECKING:
    from grader.runner.results import PieceRun


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
