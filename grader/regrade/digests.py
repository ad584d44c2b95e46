"""What a regrade run was, as digests: the grader's code, its artifacts, the data, the hidden cases, the runtime, the
settings (the seed's digest only: the seed is secret) and each student's inputs. The journal keys finished rows by
them, and a shard's manifest records them, so a rerun or a merge with other settings is told apart."""
from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

from grader import ROOT

def _hash_files(h, paths: list[tuple[str, Path]]):
    """`h` updated with each (name, file) in order of name: its name, size and bytes."""
    for name, path in sorted(paths):
        h.update(f"{name}\0{path.stat().st_size}\0".encode())
        h.update(path.read_bytes())
    return h


def _tree_digest(paths: list[tuple[str, Path]]) -> str:
    return _hash_files(hashlib.sha256(), paths).hexdigest()


def _folder_files(folder: Path, pattern: str = "*") -> list[tuple[str, Path]]:
    """Every regular file under `folder` matching `pattern` (caches aside), named relative to it."""
    if not folder.is_dir():
        return []
    return [(p.relative_to(folder).as_posix(), p) for p in folder.rglob(pattern)
            if "__pycache__" not in p.parts and p.suffix != ".pyc" and p.is_file() and not p.is_symlink()]


def grader_digest() -> str:
    """The grader's own code: every .py file of the package."""
    return _tree_digest(_folder_files(ROOT / "grader", "*.py"))


def artifacts_digest() -> str:
    """The small trained models the cases start from and compare with (grader/artifacts: the warm starts, the
    evaluated model, their checksums): `grade artifacts` retrains them, and a training case's score follows them."""
    from grader.lab import artifacts

    return _tree_digest(_folder_files(artifacts.DIR))


def data_digest() -> str:
    """The toy task's splits the grader trains and tests on (datasets/toy_translation)."""
    from grader.core import datasets

    return _tree_digest(_folder_files(datasets.DATA_DIR))


def runtime() -> dict:
    """The versions a score can follow: Python's, and PyTorch's and NumPy's as this process loaded them (the
    workers fork from it), else as installed."""
    import platform
    from importlib.metadata import PackageNotFoundError, version

    found = {"python": platform.python_version()}
    for name in ("torch", "numpy"):
        loaded = sys.modules.get(name)
        try:
            found[name] = str(getattr(loaded, "__version__", None) or version(name))
        except PackageNotFoundError:
            found[name] = "none"
    return found


def cases_digest() -> str:
    """What a grade is measured against: the hidden cases, their manifest and the reference."""
    from grader.runner import layout

    where = layout.current()
    files = [(f"cases/{p.name}", p) for p in where.cases.glob("*.py")] + [("manifest.json", where.manifest)]
    if where.reference:
        files += [(f"reference/{p.name}", p) for p in where.reference.glob("*.py")]
    return _tree_digest(files)


def seed_digest(seed: str) -> str:
    """What a run's files say of its seed: its SHA-256, which tells two runs apart; the seed itself is secret (with it a
    student computes every hidden input and the context case's probe shapes)."""
    return hashlib.sha256(seed.encode()).hexdigest()


def settings(*, seed: str, quick: bool, limits: dict, before: str | None, release: str | None,
             pieces: list[str]) -> dict:
    """Everything besides a student's own files that decides their row: two runs with equal settings give a
    student with the same files the same row. That is the grader (its code, artifacts, data and the Python,
    PyTorch and NumPy versions), the hidden cases with their manifest and the reference, the seed, the mode, the
    limits, the pieces, the deadline and the release."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        release_version = version("attention-lab")
    except PackageNotFoundError:
        release_version = "unknown"
    return {
        # the grader's code, the artifacts it starts the training cases from, its data and the versions it runs
        # on: a rerun after `grade artifacts`, with other data or another torch regrades (the merge compares it whole)
        "grader": {"version": release_version, "digest": grader_digest(), "artifacts": artifacts_digest(),
                   "data": data_digest(), "runtime": runtime()},
        "cases": cases_digest(),
        "seed": seed_digest(seed),
        "mode": "quick" if quick else "full",
        "limits": limits,
        "pieces": pieces,
        "before": before,
        "release": release,
    }


def inputs_digest(setting: dict, folder: Path, extra: list[str]) -> str:
    """One student's inputs: the settings, every file staged for grading and what was said of them."""
    h = _hash_files(hashlib.sha256(json.dumps(setting, sort_keys=True).encode()),
                    [(p.relative_to(folder).as_posix(), p) for p in folder.rglob("*") if p.is_file() and not p.is_symlink()])
    for note in extra:
        h.update(f"\0{note}".encode())
    return h.hexdigest()
