"""The lab's files a submission holds, and reading an untrusted file without ever following a link: what the
regrade, its class reports and the command line share (grader.regrade.intake reads a whole submission with them).

- A link (on Windows a junction, any reparse point) is never followed: `is_link` says so, `no_link` refuses it.
- `read_regular` opens a file with O_NOFOLLOW (and without blocking on a FIFO), checks it is a regular file,
  and reads at most its cap.
"""
from __future__ import annotations

import os
import stat
from pathlib import Path

from grader.core.pieces import MODULES

NOTEBOOK = "lesson.ipynb"
LAB_FILES = frozenset([*(f"{m}.py" for m in MODULES), NOTEBOOK])
_REPARSE_POINT = 0x400  # Windows: a junction or symlink
# an untrusted file is opened never through a link, and without blocking on a FIFO
READ_FLAGS = os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


class Refused(Exception):
    """A submission the regrade will not read; str() is the one-line reason for the student's row."""


def is_link(path: Path) -> bool:
    """A symbolic link, or on Windows a junction (any reparse point): never followed."""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISLNK(st.st_mode) or bool(getattr(st, "st_file_attributes", 0) & _REPARSE_POINT)


def no_link(path: Path, what: str) -> None:
    if is_link(path):
        raise Refused(f"{what} is a symbolic link; the regrade reads only real files and folders: "
                      "hand in the files themselves")


def read_regular(path: Path, cap: int, what: str) -> bytes | None:
    """A regular file's bytes, opened without following a link; None if it is over `cap` bytes."""
    no_link(path, what)
    try:
        fd = os.open(path, READ_FLAGS)
    except OSError as e:
        raise Refused(f"{what} cannot be read ({e.strerror}); hand in a regular file") from None
    if not stat.S_ISREG(os.fstat(fd).st_mode):  # before fdopen, which raises its own error for a folder
        os.close(fd)
        raise Refused(f"{what} is not a regular file; hand in the file itself")
    with os.fdopen(fd, "rb") as f:
        data = f.read(cap + 1)
    return data if len(data) <= cap else None
