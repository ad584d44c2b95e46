"""How a gradebook row ended: one value (RowStatus), read from the row's `status` cell by one function (status_of).

The `status` cell is text an instructor reads: `ok`, or `ok: ` and what was left out of grading, for a graded
student (ok_text); `error: ` and why for one who could not be graded (error_text): `error: late: ...` for a
repository with no commit before the deadline (grader/regrade/deadline.py's refusal), `error: no repository
(expected ...)` for a roster student without one (grader/regrade/classlist.py). Whatever asks how a row ended (the
counts `grade batch` and its merge print, the manifest's `ended`, the class report's sections, scores.csv's blank
score and `late`) asks status_of, never the text: a row read back from a CSV, a journal or a manifest is
classified the same as the row that was written.
"""
from __future__ import annotations

import enum
import re
from collections import Counter
from collections.abc import Mapping

from grader.runner.report import safe

_ERROR = re.compile(r"\s*error:?\s*", re.IGNORECASE)  # how an error row's cell starts (leading blanks, any case)
_PREFIX = re.compile(r"\s*error:?\s*")  # what reason() takes off, as the cell was written
LATE_REASON = "late:"  # deadline.checkout's refusal starts so
NO_REPOSITORY_REASON = "no repository"  # classlist's reason for a roster student without one


class RowStatus(enum.Enum):
    """How a row ended; GRADED is the only one with a score that counts."""

    GRADED = "graded"
    ERROR = "error"  # unreadable, or a grader fault: zero everywhere
    LATE = "late"  # an error: no commit before the deadline
    NO_REPOSITORY = "no repository"  # an error: a roster student without a repository

    @property
    def is_error(self) -> bool:
        return self is not RowStatus.GRADED

    @property
    def ended(self) -> str:
        """The manifest's word for it: graded, late or error (a student without a repository is an error there)."""
        return "error" if self is RowStatus.NO_REPOSITORY else self.value


def status_of(row: Mapping) -> RowStatus:
    """The status of a gradebook row, as written or as read back (CSV, journal, manifest): an error row's cell
    starts with "error"; any other cell (`ok`, `ok: ...`, blank) is a graded student's."""
    text = row.get("status")
    match = _ERROR.match("" if text is None else str(text))
    if not match:
        return RowStatus.GRADED
    why = str(text)[match.end():]
    if why.startswith(LATE_REASON):
        return RowStatus.LATE
    if why.startswith(NO_REPOSITORY_REASON):
        return RowStatus.NO_REPOSITORY
    return RowStatus.ERROR


def tally(rows) -> str:
    """What a batch did, in words: "graded 7 submission(s), 1 late, 1 without a repository, 1 unreadable"."""
    counts = Counter(status_of(r) for r in rows)
    said = [f"graded {counts[RowStatus.GRADED]} submission(s)"]
    for status, words in ((RowStatus.LATE, "late"), (RowStatus.NO_REPOSITORY, "without a repository"),
                          (RowStatus.ERROR, "unreadable")):
        if counts[status] or status is RowStatus.ERROR:
            said.append(f"{counts[status]} {words}")
    return ", ".join(said)


def reason(row: Mapping) -> str:
    """Why an error row was not graded: its cell without the leading `error:`."""
    text = row.get("status")
    text = "" if text is None else str(text)
    match = _PREFIX.match(text)
    return text[match.end():] if match else text


def ok_text(notes: list[str]) -> str:
    """The cell of a graded student: ok, and what was left out (each note already made safe), on one line."""
    status = "ok" + "".join(f": {n}" for n in notes)
    return " ".join(status.split())[:400]


def error_text(message: str) -> str:
    """The cell of a student who could not be graded, and why (the reason may quote the submission: escaped as
    every report escapes it)."""
    return f"error: {safe(' '.join(message.split()), 300)}"
