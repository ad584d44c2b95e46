"""The lab's files a submission holds, and reading an untrusted file without ever following a link: what every
reader of a student's file shares (staging, the notebook, the workers' sources, the plots, the regrade).

- A link (on Windows a junction, any reparse point) is never followed: `is_link` says so, `no_link` refuses it.
- `read_untrusted` is the one reader: it opens a file with O_NOFOLLOW where the OS has it (after `is_link`
  everywhere, which is all Windows has), without blocking on a FIFO, checks with fstat that it is a regular file,
  and reads at most its cap; it returns the bytes or why it refused (`Read`), which each caller words itself.
- `read_regular` is the regrade's wording of it: a refusal raises `Refused` with the student's one-line reason.
"""
from __future__ import annotations

import errno
import os
import stat
from dataclasses import dataclass
from pathlib import Path

from grader.core.pieces import MODULES

NOTEBOOK = "lesson.ipynb"
LAB_FILES = frozenset([*(f"{m}.py" for m in MODULES), NOTEBOOK])
MAX_PIECE = 1 << 20  # bytes: a piece is a few kilobytes of Python
_REPARSE_POINT = 0x400  # Windows: a junction or symlink
# an untrusted file is opened never through a link, and without blocking on a FIFO; getattr: Windows has neither flag
# (is_link stands in for the first, and Windows has no FIFO in the file system), and only Windows has O_BINARY
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)

# why read_untrusted refused a file (Read.refused)
MISSING = "missing"
LINK = "link"
NOT_REGULAR = "not regular"  # a folder, a FIFO, a device, a socket
TOO_BIG = "too big"
UNREADABLE = "unreadable"  # permission denied, an I/O error: Read.error says which


class Refused(Exception):
    """A submission the regrade will not read; str() is the one-line reason for the student's row."""


@dataclass(frozen=True)
class Read:
    """A file's bytes (`refused` empty), or why they were not read: MISSING, LINK, NOT_REGULAR, TOO_BIG, UNREADABLE."""

    data: bytes | None = None
    refused: str = ""
    error: str = ""  # the OS's words for MISSING and UNREADABLE ("Permission denied")

    @property
    def ok(self) -> bool:
        return not self.refused


def is_link(path: Path) -> bool:
    """A symbolic link, or on Windows a junction (any reparse point): never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0) & _REPARSE_POINT)


def _link_refused(what: str) -> Refused:
    return Refused(f"{what} is a symbolic link; the regrade reads only real files and folders: "
                   "hand in the files themselves")


def no_link(path: Path, what: str) -> None:
    if is_link(path):
        raise _link_refused(what)


def _why_not_opened(path: Path, e: OSError) -> Read:
    if isinstance(e, FileNotFoundError):
        return Read(refused=MISSING, error=e.strerror or str(e))
    if e.errno == errno.ELOOP:  # O_NOFOLLOW met a link put there after is_link looked
        return Read(refused=LINK)
    try:
        if not stat.S_ISREG(os.lstat(path).st_mode):  # Windows opens no folder: EACCES, not a read to fstat
            return Read(refused=NOT_REGULAR)
    except OSError:
        pass
    return Read(refused=UNREADABLE, error=e.strerror or str(e))


def read_untrusted(path: Path, cap: int) -> Read:
    """A regular file's bytes, at most `cap` of them, never through a link and never blocking; else why not."""
    if is_link(path):
        return Read(refused=LINK)
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as e:
        return _why_not_opened(Path(path), e)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which raises its own error for a folder
            return Read(refused=NOT_REGULAR)
        with os.fdopen(fd, "rb") as f:
            fd = -1  # closed with f
            data = f.read(cap + 1)
    except OSError as e:
        return Read(refused=UNREADABLE, error=e.strerror or str(e))
    finally:
        if fd >= 0:
            os.close(fd)
    return Read(data) if len(data) <= cap else Read(refused=TOO_BIG)


def untrusted_text(got: Read) -> str | None:
    """A read file's text as Path.read_text gives it (universal newlines), undecodable bytes replaced; None if refused."""
    if got.data is None:
        return None
    return got.data.decode("utf-8", errors="replace").replace("\r\n", "\n").replace("\r", "\n")


def read_regular(path: Path, cap: int, what: str) -> bytes | None:
    """A regular file's bytes, opened without following a link; None if it is over `cap` bytes."""
    got = read_untrusted(path, cap)
    if got.refused == LINK:
        raise _link_refused(what)
    if got.refused == NOT_REGULAR:
        raise Refused(f"{what} is not a regular file; hand in the file itself")
    if got.refused in (MISSING, UNREADABLE):
        raise Refused(f"{what} cannot be read ({got.error}); hand in a regular file")
    return got.data
