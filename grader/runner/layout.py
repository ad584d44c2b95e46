"""Where the hidden cases and the reference live: in the instructor's repository, sealed in a student
release (opened with ATTNLAB_SEAL_KEY, an Actions secret, or a key file on a Classroom 50 runner), or absent (local runs of a release, which
fall back to the public smoke checks in grader/public). The lab modules that hold a piece's answer
(grader.lab.SEALED) travel in the same bundle and import from it once it is opened."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import REFERENCE, ROOT
from grader.core.pieces import PIECES
from grader.runner.sealing import KEY_ENV, SealError, _key, unseal  # noqa: F401 - SealError: what current() raises

SEALED_FILE = ROOT / "grader" / "sealed.bin"
CASES = ROOT / "grader" / "cases"
PUBLIC = ROOT / "grader" / "public"
_opened: dict[bytes, Path] = {}


@dataclass(frozen=True)
class Layout:
    cases: Path  # a package folder holding test_<piece>.py
    reference: Path | None  # None: only the public checks can run
    manifest: Path
    sealed: bool = False  # the cases and reference came out of grader/sealed.bin, opened with a key

    @property
    def public(self) -> bool:
        return self.reference is None


def required_jail() -> tuple[str, ...]:
    """The jail layers a worker must have before it is sent anything: where this run opened the sealed cases with a
    key (a release graded on a runner), Landlock and seccomp on Linux, without which graded code could read the key's
    file or the opened bundle; none for an instructor's own checkout or the public checks."""
    return ("landlock", "seccomp") if sys.platform.startswith("linux") and current().sealed else ()


def current() -> Layout:
    """The layout this checkout supports, opening the sealed bundle once per process if a key is set."""
    first = next(iter(PIECES.values())).module
    if (CASES / f"test_{first}.py").exists() and (REFERENCE / f"{first}.py").exists():  # an instructor's checkout
        return Layout(CASES, REFERENCE, CASES / "manifest.json")
    key = _key[0] if _key else os.environ.get(KEY_ENV, "").strip().encode()
    if SEALED_FILE.exists() and key:
        if key not in _opened:
            tmp = Path(tempfile.mkdtemp(prefix="attnlab-sealed-"))
            atexit.register(shutil.rmtree, tmp, True)
            unseal(SEALED_FILE.read_bytes(), key, tmp)
            _opened[key] = tmp
        from grader import lab

        lab.attach(_opened[key])  # the lab modules a release seals (grader.lab.SEALED) import from the bundle
        return Layout(_opened[key] / "attnlab_cases", _opened[key] / "reference", CASES / "manifest.json", sealed=True)
    return Layout(PUBLIC, None, PUBLIC / "manifest.json")
