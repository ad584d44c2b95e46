"""Load a submission for one piece, with every other piece taken from the reference.

The piece under test is the only submission file imported: its relative imports
(`from .additive import BahdanauAttention`) resolve to the reference's modules, so a bug in one
piece can never cost another piece its points.
"""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from .pieces import PIECES

SUB_PKG = "attnlab_submission"
REF_PKG = "attnlab_reference"


class SubmissionError(Exception):
    """The submission's file for a piece is missing or failed to import; str() is the student message."""


def _package(name: str, path: Path) -> types.ModuleType:
    pkg = types.ModuleType(name)
    pkg.__path__ = [str(path)]
    pkg.__package__ = name
    sys.modules[name] = pkg
    return pkg


def _load(pkg: str, stem: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(f"{pkg}.{stem}", path)
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    try:
        spec.loader.exec_module(mod)
    except BaseException:
        del sys.modules[spec.name]
        raise
    setattr(sys.modules[pkg], stem, mod)
    return mod


def load_reference(reference_dir: Path) -> types.SimpleNamespace:
    """Import the reference modules under a private package name (never `reference`)."""
    _package(REF_PKG, reference_dir)
    return types.SimpleNamespace(**{m: _load(REF_PKG, m, reference_dir / f"{m}.py") for m in _ordered()})


def _ordered() -> list[str]:
    # dependencies first: context <- additive, luong <- decoder <- evaluation
    return ["encoder", "context", "additive", "luong", "decoder", "evaluation"]


def load_piece(piece: str, submission_dir: Path, reference_dir: Path | None) -> types.ModuleType:
    """Import the submission's file for `piece`, with reference copies of its sibling modules.

    Without a reference (a release's public checks) the siblings are the submission's own files.
    """
    stem = PIECES[piece].module
    path = submission_dir / f"{stem}.py"
    if not path.is_file():
        raise SubmissionError(f"{path.name} is missing from the submission folder; restore it from the lab.")
    _package(SUB_PKG, submission_dir)
    order = _ordered()
    for other in order[: order.index(stem)] if reference_dir else []:  # what the piece may import, nothing more
        _load(SUB_PKG, other, reference_dir / f"{other}.py")
    try:
        return _load(SUB_PKG, stem, path)
    except SyntaxError as e:
        raise SubmissionError(f"{path.name} has a syntax error at line {e.lineno}: {e.msg}") from None
    except SystemExit as e:
        raise SubmissionError(f"importing {path.name} called sys.exit({e.code!r}); remove top-level exits") from None
    except Exception as e:  # noqa: BLE001 - any import-time failure is the student's to see
        line = _submission_line(e, path)
        raise SubmissionError(f"importing {path.name} raised {type(e).__name__}: {e}{line}") from None


def _submission_line(exc: BaseException, path: Path) -> str:
    tb, where = exc.__traceback__, ""
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == str(path):
            where = f" (line {tb.tb_lineno})"
        tb = tb.tb_next
    return where
