"""Copy a submission's piece files into a folder of the grader's own, refusing what is not a regular file."""
from __future__ import annotations

import json
from pathlib import Path

from grader.core.files import LINK, MAX_PIECE, MISSING, NOT_REGULAR, TOO_BIG, read_untrusted
from grader.core.pieces import MODULES


MAX_FILE = MAX_PIECE  # bytes: a piece is a few kilobytes of Python
REFUSED = "REFUSED.json"  # in a staged folder: {piece file: why it was not copied}


def stage(submission: Path, into: Path) -> Path:
    """Copy the submission's lab files to a private folder: the original is never run in place or changed.

    Only regular files are copied, never followed through a link: a symlink, a FIFO or a device in place
    of a piece is refused, and the piece's cases say why.
    """
    dest = into / "submission"
    dest.mkdir(parents=True)
    refused = {}
    for m in MODULES:
        name = f"{m}.py"
        got = read_untrusted(submission / name, MAX_FILE)
        if got.data is not None:
            (dest / name).write_bytes(got.data)
        elif got.refused != MISSING:
            refused[name] = _why(name, got.refused, got.error)
    if refused:
        (dest / REFUSED).write_text(json.dumps(refused))
    return dest


def _why(name: str, refused: str, error: str) -> str:
    """The reason a piece's cases give for a file that was not copied."""
    if refused == LINK:
        return f"{name} is a symbolic link; the grader reads only regular files: put the file itself there"
    if refused == NOT_REGULAR:  # a folder, a FIFO or a device
        return f"{name} is not a regular file; the grader reads only regular files: put the file itself there"
    if refused == TOO_BIG:
        return f"{name} is over {MAX_FILE // 1024} KB; a piece is a few kilobytes of Python"
    return f"{name} cannot be read ({error}); the grader reads only files it may read: put a readable file there"
