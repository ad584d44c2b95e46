"""Helpers for the project's own tests: build submissions from the reference and grade them.

Test modules import these from here (`from helpers import ...`); tests/conftest.py holds the fixtures.
"""
from __future__ import annotations

import atexit
import shutil
import tempfile
from pathlib import Path

from grader import ROOT
from grader.runner.schedule import grade
from grader.runner.stage import stage
from grader.pieces import MODULES
from grader.runner.report import as_dict
from grader.runner.launch import Zygote
from grader.runner.results import Limits

REFERENCE = ROOT / "reference"
EXERCISES = ROOT / "exercises"
QUICK = Limits(case_timeout=30, piece_timeout=120, memory_gb=6, quick=True)


def make_submission(where: Path, edits: dict[str, list[tuple[str, str]]] | None = None,
                    files: dict[str, str] | None = None, base: Path = REFERENCE) -> Path:
    """A copy of `base` with text replacements (each must match) and whole files swapped in."""
    where.mkdir(parents=True, exist_ok=True)
    for m in MODULES:
        if (base / f"{m}.py").exists():
            shutil.copyfile(base / f"{m}.py", where / f"{m}.py")
    for name, pairs in (edits or {}).items():
        path = where / f"{name}.py"
        text = path.read_text()
        for old, new in pairs:
            assert old in text, f"edit target not found in {name}.py: {old!r}"
            text = text.replace(old, new)
        path.write_text(text)
    for name, text in (files or {}).items():
        (where / f"{name}.py").write_text(text)
    return where


_zygote: list[Zygote] = []


def shared_zygote() -> Zygote:
    """One fork server for the whole test session: each piece still runs in its own fresh child."""
    if not _zygote or not _zygote[0].alive():
        _zygote[:] = [Zygote()]
        atexit.register(_zygote[0].close)
    return _zygote[0]


def grade_dict(submission: Path, pieces: list[str], limits: Limits = QUICK, seed: str = "0", lanes: bool = False) -> dict:
    """Grade on the session's fork server, or (lanes=True) as `grade` does: on fork servers of its own, two
    pieces at a time when one trains."""
    with tempfile.TemporaryDirectory(prefix="attnlab-test-") as tmp:
        staged = stage(submission, Path(tmp))
        zygote = None if lanes else shared_zygote()
        return as_dict(grade(submission=staged, pieces=pieces, seed=seed, limits=limits, zygote=zygote))


def scores(report: dict) -> dict[str, tuple[int, int]]:
    return {p["name"]: (p["score"], p["max_score"]) for p in report["pieces"]}


def at_import(code: str) -> list[tuple[str, str]]:
    """An edit (for make_submission) that runs `code` when encoder.py is imported."""
    return [("import torch.nn as nn\n", f"import torch.nn as nn\n{code}\n")]
