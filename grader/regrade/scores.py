"""The regrade's gradebook as Classroom 50's scores.csv (`grade batch ... --scores-csv PATH`, and the merge's).

`gh teacher download` writes a scores.csv of what the per-push runs posted; this one has its columns, in its
order, so an instructor can set the two side by side (or import either where the other went):

    username,first_name,last_name,email,section,score,max_score,datetime,submission_tag,submitted_by,review_url,late,override

and one column after them, commits_after_deadline, which a reader by header can leave out;

- username: the roster's username (without a roster, the student's name in the gradebook: the repository's);
  first_name, last_name, email, section: the roster.csv's, where it has them;
- score, max_score: the regrade's, whole numbers; a roster student with no repository gets a blank score, as
  Classroom 50 writes for a student who never submitted;
- datetime: the graded commit's time in the deadline's zone (`YYYY-MM-DDTHH:MM:SS-05:00`, or `...Z` for a UTC
  deadline), known with `--before`, else empty;
- submission_tag: `regrade` (`regrade-quick` for a --quick dry run, which is not the grade);
- late: `true` for a student who pushed after the deadline, as Classroom 50 marks a submission made after it,
  whether the regrade graded their last commit before it (then commits_after_deadline counts the later ones, as
  grades.csv's `late` does) or they have no commit before it at all; `false` for one with no commit after it;
  empty without `--before`; submitted_by, review_url, override: empty.

One line a student, in the roster's order (without a roster, by name); every text cell is neutralised for
spreadsheets as the gradebook's are.
"""
from __future__ import annotations

import csv
import os
from pathlib import Path

from grader.regrade import book
from grader.regrade.rowstatus import RowStatus, status_of

COLUMNS = ("username", "first_name", "last_name", "email", "section", "score", "max_score", "datetime",
           "submission_tag", "submitted_by", "review_url", "late", "override", "commits_after_deadline")


def _whole(value) -> str:
    try:
        return str(round(float(value)))
    except (TypeError, ValueError):
        return ""


def late(row: dict) -> str:
    """`true`, `false` or empty (no deadline known): grades.csv's `late` count and the row's status, in one word."""
    if status_of(row) is RowStatus.LATE:
        return "true"
    if not row.get("committed"):
        return ""
    return "true" if _count(row.get("late")) else "false"


def _count(value) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def lines(rows: list[dict], roster: dict[str, dict] | None, mode: str) -> list[dict]:
    """The scores.csv lines of the gradebook's `rows`; `roster`: student name -> the roster's details and order."""
    roster = roster or {}
    top = next((r["max_score"] for r in book.order(rows) if r.get("max_score") not in (None, "")), 0)
    order = sorted(rows, key=lambda r: (roster.get(r["student"], {}).get("order", 0), r["student"].lower(),
                                        r["student"]))
    out = []
    for r in order:
        who = roster.get(r["student"], {})
        missing = status_of(r) is RowStatus.NO_REPOSITORY
        out.append({
            "username": who.get("username", r["student"]),
            **{k: who.get(k, "") for k in ("first_name", "last_name", "email", "section")},
            "score": "" if missing else _whole(r.get("total")),
            "max_score": "" if missing else _whole(r["max_score"] if r.get("max_score") not in (None, "") else top),
            "datetime": r.get("committed") or "",
            "submission_tag": "regrade" if mode == "full" else "regrade-quick",
            "submitted_by": "", "review_url": "", "late": late(r), "override": "",
            "commits_after_deadline": str(_count(r.get("late"))) if r.get("committed") else "",
        })
    return out


def write(path: Path, rows: list[dict], roster: dict[str, dict] | None, mode: str) -> Path:
    """Write the scores.csv at `path` in one atomic replace; the same rows give the same bytes."""
    return write_lines(path, lines(rows, roster, mode))


def write_lines(path: Path, found: list[dict]) -> Path:
    """Write scores.csv lines (a dict of COLUMNS each) at `path` in one atomic replace, every cell neutralised."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        writer = csv.DictWriter(f, fieldnames=COLUMNS, lineterminator="\n")  # as Classroom 50 writes it
        writer.writeheader()
        for line in found:
            writer.writerow({k: book.cell(v) for k, v in line.items()})
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    return path


def from_parts(path: Path, parts: list[Path]) -> Path:
    """The scores.csv of a merged class: the rows and roster details of the shards' manifests (`grade batch merge`
    has checked they are one run's, every shard once)."""
    from grader.regrade.manifests import find, load

    rows: list[dict] = []
    roster: dict[str, dict] = {}
    mode = "full"
    for manifest in find(parts):
        m = load(manifest)
        rows += [entry["row"] for entry in m["students"].values()]
        roster.update(m.get("roster") or {})
        mode = m.get("mode", mode)
    return write(path, rows, roster, mode)
