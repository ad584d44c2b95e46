"""Import the reference into the judge (never a submission: that happens only in grader.worker).

A worker loads the piece under test with the reference's modules as its siblings, so its relative
imports (`from .additive import BahdanauAttention`) resolve to the reference and a bug in one piece
can never cost another piece its points (see grader.judge.sources.student_sources).
"""
from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

from grader.core.pieces import PIECES, run_order

SUB_PKG = "attnlab_submission"
REF_PKG = "attnlab_reference"


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
    return types.SimpleNamespace(**{m: _load(REF_PKG, m, reference_dir / f"{m}.py") for m in ORDER})


# dependencies first (context <- additive, luong <- decoder <- evaluation): the order the pieces' units run in
ORDER = run_order(list(PIECES))
