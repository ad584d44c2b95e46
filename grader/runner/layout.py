"""Where the hidden cases and the reference live: in the instructor's repository, sealed in a student
release (opened with ATTNLAB_SEAL_KEY, an Actions secret, or a key file on a Classroom 50 runner), or absent (local runs of a release, which
fall back to the public smoke checks in grader/public). The lab modules that hold a piece's answer
(grader.lab.SEALED) travel in the same bundle and import from it once it is opened."""
from __future__ import annotations

import atexit
import io
import os
import shutil
import sys
import tarfile
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader import REFERENCE, ROOT

SEALED = ROOT / "grader" / "sealed.bin"
CASES = ROOT / "grader" / "cases"
PUBLIC = ROOT / "grader" / "public"
KEY_ENV = "ATTNLAB_SEAL_KEY"


@dataclass(frozen=True)
class Layout:
    cases: Path  # a package folder holding test_<piece>.py
    reference: Path | None  # None: only the public checks can run
    manifest: Path
    sealed: bool = False  # the cases and reference came out of grader/sealed.bin, opened with a key

    @property
    def public(self) -> bool:
        return self.reference is None


class SealError(Exception):
    """The sealed cases could not be opened; str() says what to do."""


def seal(files: dict[str, bytes], key: bytes) -> bytes:
    """Encrypt a {archive name: content} bundle with Fernet (AES-128-CBC plus HMAC-SHA256)."""
    from cryptography.fernet import Fernet

    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w:gz") as tar:
        for name, data in sorted(files.items()):
            info = tarfile.TarInfo(name)
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    return Fernet(key).encrypt(buf.getvalue())


def unseal(blob: bytes, key: bytes, into: Path) -> None:
    from cryptography.fernet import Fernet, InvalidToken

    try:
        data = Fernet(key).decrypt(blob)
    except (InvalidToken, ValueError):
        raise SealError(f"{KEY_ENV} does not open grader/sealed.bin; ask your instructor for the current key") from None
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        tar.extractall(into, filter="data")


_opened: dict[bytes, Path] = {}
_key: list[bytes] = []  # the seal key once taken out of the environment


def take_key(key: bytes | None = None) -> None:
    """Hold the seal key in memory only: from `key` (a file or stdin) or the environment, which loses it."""
    env = os.environ.pop(KEY_ENV, "").strip().encode()
    found = (key or b"").strip() or env
    if found:
        _key[:] = [found]


def held_key() -> bytes | None:
    """The seal key this process took (`take_key`), if any: what `grade release student` reuses."""
    return _key[0] if _key else None


def required_jail() -> tuple[str, ...]:
    """The jail layers a worker must have before it is sent anything: where this run opened the sealed cases with a
    key (a release graded on a runner), Landlock and seccomp on Linux, without which graded code could read the key's
    file or the opened bundle; none for an instructor's own checkout or the public checks."""
    return ("landlock", "seccomp") if sys.platform.startswith("linux") and current().sealed else ()


def harden() -> None:
    """Make this process non-dumpable: no other process of the same user may read its memory or environment."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        except (OSError, AttributeError):
            pass


def current() -> Layout:
    """The layout this checkout supports, opening the sealed bundle once per process if a key is set."""
    if (CASES / "test_encoder.py").exists() and (REFERENCE / "encoder.py").exists():
        return Layout(CASES, REFERENCE, CASES / "manifest.json")
    key = _key[0] if _key else os.environ.get(KEY_ENV, "").strip().encode()
    if SEALED.exists() and key:
        if key not in _opened:
            tmp = Path(tempfile.mkdtemp(prefix="attnlab-sealed-"))
            atexit.register(shutil.rmtree, tmp, True)
            unseal(SEALED.read_bytes(), key, tmp)
            _opened[key] = tmp
        from grader import lab

        lab.attach(_opened[key])  # the lab modules a release seals (grader.lab.SEALED) import from the bundle
        return Layout(_opened[key] / "attnlab_cases", _opened[key] / "reference", CASES / "manifest.json", sealed=True)
    return Layout(PUBLIC, None, PUBLIC / "manifest.json")
