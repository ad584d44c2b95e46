"""Copy a submission's piece files into a folder of the grader's own, refusing what is not a regular file."""
from __future__ import annotations

import json
import os
import stat
from pathlib import Path

from grader.core.pieces import MODULES


MAX_FILE = 1 << 20  # bytes: a piece is a few kilobytes of Python
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
        try:
            fd = os.open(submission / name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            continue
        except OSError:
            refused[name] = f"{name} is a symbolic link; the grader reads only regular files: put the file itself there"
            continue
        if not stat.S_ISREG(os.fstat(fd).st_mode):  # a folder, a FIFO or a device
            os.close(fd)
            refused[name] = f"{name} is not a regular file; the grader reads only regular files: put the file itself there"
            continue
        with os.fdopen(fd, "rb") as f:
            data = f.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            refused[name] = f"{name} is over {MAX_FILE // 1024} KB; a piece is a few kilobytes of Python"
            continue
        (dest / name).write_bytes(data)
    if refused:
        (dest / REFUSED).write_text(json.dumps(refused))
    return dest
