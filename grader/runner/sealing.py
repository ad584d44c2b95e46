"""The seal: the hidden cases and the reference encrypted into grader/sealed.bin with a key, and the key held in
this process's memory only (taken out of the environment before any child starts); grader.runner.layout opens it."""
from __future__ import annotations

import io
import os
import sys
import tarfile
from pathlib import Path

KEY_ENV = "ATTNLAB_SEAL_KEY"


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
    extract(data, into)


def extract(data: bytes, into: Path) -> None:
    """Write a gzipped tar's regular files and folders under `into`, refusing any other member (links, devices,
    FIFOs), any name that leaves `into` (absolute, `..`, a drive) and any file already there. The files are written
    here, not by `extractall`, so every patch release behaves alike: `filter=` exists only from 3.12 and in a few
    backports (3.10.12, 3.11.4), and Debian 12's Python 3.11.2 has none."""
    root = Path(os.path.abspath(into))
    with tarfile.open(fileobj=io.BytesIO(data), mode="r:gz") as tar:
        for member in tar.getmembers():
            parts = member.name.replace("\\", "/").split("/")
            if (not member.name or member.name.startswith("/") or ":" in parts[0] or ".." in parts
                    or not (member.isfile() or member.isdir())):
                raise SealError(f"grader/sealed.bin holds an unsafe member {member.name!r}; rebuild the release "
                                "with `grade release`")
            try:
                _write(tar, member, root.joinpath(*[part for part in parts if part not in ("", ".")]))
            except OSError as e:
                raise SealError(f"grader/sealed.bin could not be opened into {into} ({member.name!r}: "
                                f"{e.strerror or e}); rebuild the release with `grade release`") from None


def _write(tar: tarfile.TarFile, member: tarfile.TarInfo, target: Path) -> None:
    if member.isdir():
        target.mkdir(mode=0o755, parents=True, exist_ok=True)
        return
    target.parent.mkdir(mode=0o755, parents=True, exist_ok=True)
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
    with os.fdopen(os.open(target, flags, 0o644), "wb") as out:
        out.write(tar.extractfile(member).read())


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


def harden() -> None:
    """Make this process non-dumpable: no other process of the same user may read its memory or environment."""
    if sys.platform.startswith("linux"):
        import ctypes

        try:
            ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
        except (OSError, AttributeError):
            pass
