"""A public check of a piece that imports other pieces' modules: the point is earned on the piece's file alone.

The graded run gives a piece's worker the reference's sibling modules, so a bug or a stub in one piece never costs
another. A release has no reference, so its public checks used the student's own siblings, and a correct additive.py
scored 0 until context.py was written. Now:

- `alone`: the piece's file in a worker whose sibling modules are the stand-ins of grader/public/standin (none of
  them an answer); the piece's point-earning check runs there, and only the piece's own work passes it.
- `with_your_own`: the same check with the student's own sibling files (the plugin's `sub`), worth no points. While
  one of them is still a stub it is skipped, saying in one line which file it waits for; when they do not work
  together, it fails (0 points) saying so.
"""
from __future__ import annotations

import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Callable

import pytest

from grader.core.pieces import PIECES

if TYPE_CHECKING:
    from grader.judge.state import JudgeState

STANDIN = Path(__file__).parent / "standin"
_STUB = re.compile(r"piece '([a-z_]+)': write ")  # a generated stub's NotImplementedError (grader.lesson.stubs)


def siblings(piece: str) -> list[str]:
    """The modules `piece`'s worker is given besides its own (grader.judge.sources.registry_imports), in load order."""
    from grader.judge.sources import registry_imports

    return registry_imports(PIECES[piece].module)


def listed(words: list[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


def _state(request: pytest.FixtureRequest) -> JudgeState:
    from grader.judge.state import judge_state

    st = judge_state(request.config)
    if st is None:
        pytest.skip("the attention lab plugin is not grading (no --attnlab-submission)")
    return st


def _own_file(st: JudgeState) -> Path:
    path = st.submission / f"{PIECES[st.piece].module}.py"
    if not path.is_file() or path.is_symlink():
        from grader.judge.verdicts import CaseFailure

        raise CaseFailure(f"{path.name} is missing from the submission folder; restore it from the lab.")
    return path


@pytest.fixture(scope="session")
def _standin_slot(request: pytest.FixtureRequest):
    """The piece's worker with the stand-ins as its siblings: started on first use, kept for the piece's cases."""
    from grader.judge.remote import PieceWorker
    from grader.judge.servers import worker_server
    from grader.worker.limits import worker_cpu_seconds

    st = _state(request)
    made: list[PieceWorker] = []

    def get() -> PieceWorker:
        if not made:
            path = _own_file(st)
            if st.server is None:  # shared with the plugin's `sub`, which closes it
                st.server = worker_server(st.worker_fd)
            sources = [(m, (STANDIN / f"{m}.py").read_text(encoding="utf-8")) for m in siblings(st.piece)]
            sources.append((path.stem, path.read_text(encoding="utf-8", errors="replace")))
            made.append(PieceWorker(st.server, sources, path.stem, path.name, st.output, st.memory_gb,
                             worker_cpu_seconds(st.piece_timeout)))
        return made[0]

    yield get
    for slot in made:
        slot.close()


@pytest.fixture
def alone(request: pytest.FixtureRequest, _standin_slot):
    """Like the plugin's `sub`, but the piece's file imports the stand-ins (grader/public/standin), not the
    student's other files: what it earns is its own."""
    from grader.judge.remote import CaseHandle
    from grader.judge.state import case_seed, case_timeout

    st = _state(request)
    handle = CaseHandle(_standin_slot(), case_seed(st, request.node.name),
                        time.monotonic() + case_timeout(request.node))
    try:
        yield handle
    finally:
        handle.close()
        st.jail.update(handle.jail)


def stubbed(submission: Path, modules: list[str]) -> list[str]:
    """The files among `modules` that still raise a generated stub's NotImplementedError (or are missing)."""
    out = []
    for m in modules:
        path = submission / f"{m}.py"
        text = path.read_text(encoding="utf-8", errors="replace") if path.is_file() and not path.is_symlink() else ""
        if not text or f"raise NotImplementedError(\"piece '{m}': write " in text:
            out.append(path.name)
    return out


@pytest.fixture
def with_your_own(request: pytest.FixtureRequest, sub) -> Callable[[Callable], None]:
    """with_your_own(check): run check(sub) on the piece's file with the student's own sibling files; skipped, in one
    line, while one of them is a stub; a failure says it came with their files."""
    from grader.judge.verdicts import CaseFailure

    st = _state(request)
    piece = st.piece
    files = [f"{m}.py" for m in siblings(piece)]

    def run(check: Callable) -> None:
        try:
            check(sub)
        except NotImplementedError as e:
            other = _STUB.search(str(e))
            if other is None or other.group(1) == piece:
                raise  # the piece's own stub: the same message as its other case
            waiting = stubbed(st.submission, siblings(piece)) or [f"{PIECES[other.group(1)].module}.py"]
            many = len(files) > 1
            pytest.skip(f"{piece} with your own {listed(files)}: not checked until {listed(waiting)} "
                        f"{'are' if len(waiting) > 1 else 'is'} written; {PIECES[piece].module}.py alone was checked "
                        f"with the lab's stand-in{'s' if many else ''} for {'them' if many else 'it'}")
        except CaseFailure as e:
            raise CaseFailure(f"with your own {listed(files)}: {e}") from None

    return run
