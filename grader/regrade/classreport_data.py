"""The class report's data: the gradebook rows and the students' JSON reports, read and summed up.

What grader/regrade/classreport.py shows comes from here: each report read without following a link, up to
MAX_REPORT bytes (one that is missing, too big or malformed is skipped, and why); the headline numbers (Summary:
graded and ungraded by grader/regrade/rowstatus.py, late, the totals, each row's mode); the pieces left as
the stub; the cases the class fails most, with the hints they gave (Failing). Nothing here is HTML: the page
escapes what it shows.
"""
from __future__ import annotations

import json
import math
import os
import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from grader.core.files import Refused, is_link, read_regular
from grader.regrade.rowstatus import status_of
from grader.runner.report import safe

MAX_REPORT = 4 << 20  # a real report is tens of kB; a bigger file is not one the batch wrote
TOP_CASES = 15
TOP_HINTS = 3  # hints shown per failing case
STUB = "not implemented yet"  # how grader/judge/state.py's explain() words a stub's NotImplementedError
# numbers in a hint (an error size, a shape) differ between students: hints that differ only there are one hint
NUMBER = re.compile(r"[-+]?\d+(?:\.\d+)?(?:[eE][-+]?\d+)?")


# --- reading the inputs ---------------------------------------------------------------------------------------

def number(value: object) -> float | None:
    """A finite number from a raw or CSV-read cell; None for "", None, a bool or text."""
    if isinstance(value, bool) or value is None:
        return None
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def fmt(x: float | None, digits: int = 1) -> str:
    if x is None:
        return "–"
    return str(int(x)) if float(x).is_integer() else f"{x:.{digits}f}"


def cell_text(row: dict, key: str) -> str:
    value = row.get(key)
    return "" if value is None else str(value)


def late_count(row: dict) -> int | None:
    """The row's count of later, ungraded commits; None where the gradebook has no deadline information."""
    n = number(row.get("late"))
    return None if n is None else int(n)


def student_of(row: dict) -> str:
    return cell_text(row, "student")


def by_name(rows: list[dict]) -> list[dict]:
    """Rows in the gradebook's own order (by student name), so every section reads the same way."""
    return sorted(rows, key=lambda r: (student_of(r).lower(), student_of(r)))


def read_report(folder: Path | None, student: str) -> tuple[dict | None, str]:
    """A student's report, or None and why it was skipped. A name that is not a plain file name is never a
    path: it cannot lead the read out of the folder."""
    if folder is None:
        return None, "no reports folder"
    if not student or student in (".", "..") or any(c in student for c in "/\\\0") or len(student) > 255:
        return None, "not a plain file name"
    path = folder / f"{student}.json"
    if not os.path.lexists(path):
        return None, "missing"
    if is_link(path):
        return None, "a symbolic link (never followed)"
    try:
        data = read_regular(path, MAX_REPORT, path.name)
    except Refused:  # intake's reason speaks to a student; this page to the instructor
        return None, "not a regular, readable file"
    if data is None:
        return None, f"over {MAX_REPORT >> 20} MB"
    try:
        report = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):  # RecursionError: absurdly deep nesting
        return None, "not valid JSON"
    if not isinstance(report, dict) or not isinstance(report.get("pieces"), list):
        return None, "not a graded report (no pieces)"
    return report, ""


@dataclass(frozen=True)
class Case:
    piece: str
    name: str
    passed: bool
    skipped: bool
    max_points: float
    message: str


def report_cases(report: dict) -> Iterator[Case]:
    """The well-formed cases of a report; anything else in it is ignored."""
    for piece in report["pieces"]:
        if not isinstance(piece, dict) or not isinstance(piece.get("cases"), list):
            continue
        for c in piece["cases"]:
            if isinstance(c, dict) and isinstance(c.get("name"), str):
                yield Case(str(piece.get("name", "")), c["name"], c.get("passed") is True, c.get("skipped") is True,
                           number(c.get("max_points")) or 0.0, str(c.get("message") or ""))


def piece_max(reports: list[dict]) -> dict[str, float]:
    """Each piece's most common max_score over the reports (a quick run has fewer points than a full one)."""
    seen: dict[str, Counter] = {}
    for report in reports:
        for piece in report["pieces"]:
            if isinstance(piece, dict) and (top := number(piece.get("max_score"))) is not None:
                seen.setdefault(str(piece.get("name", "")), Counter())[top] += 1
    return {name: min(c.items(), key=lambda kv: (-kv[1], kv[0]))[0] for name, c in seen.items()}


# --- what the page says ----------------------------------------------------------------------------------------

@dataclass
class Failing:
    """One case, over the graded students: how many failed it and with which hints."""
    piece: str
    name: str
    ran: int = 0
    failed: int = 0
    lost: float = 0.0
    hints: dict[str, Counter] = field(default_factory=dict)  # hint with numbers masked -> exact texts

    def top_hints(self) -> list[tuple[int, str, int]]:
        """(students, the hint's most common wording, how many wordings) for the most common hints."""
        out = []
        for texts in self.hints.values():
            text = min(texts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
            out.append((sum(texts.values()), text, len(texts)))
        return sorted(out, key=lambda t: (-t[0], t[1]))[:TOP_HINTS]


def unwritten(report: dict) -> set[str]:
    """The pieces a report shows left as the stub: none of their cases passed and every failure is the stub's
    "not implemented yet" (a training case waiting on them says "not run: "), as the student's own report says
    (grader/runner/report.py). A piece half written is not one: its failures are real."""
    ran: dict[str, list[Case]] = {}
    for c in report_cases(report):
        if not c.skipped:
            ran.setdefault(c.piece, []).append(c)
    out = set()
    for piece, cases in ran.items():
        own = [c.message for c in cases if not c.message.startswith("not run: ")]
        if own and not any(c.passed for c in cases) and all(m.startswith(STUB) for m in own):
            out.add(piece)
    return out


def unwritten_pieces(reports: list[dict], pieces: list[str]) -> list[tuple[str, int, int]]:
    """(piece, students who left it unwritten, students whose report ran it), in piece order."""
    left, ran = Counter(), Counter()
    for report in reports:
        left.update(unwritten(report))
        ran.update({c.piece for c in report_cases(report) if not c.skipped})
    order = {p: i for i, p in enumerate(pieces)}
    return [(p, left[p], ran[p]) for p in sorted(left, key=lambda p: (order.get(p, len(order)), p))]


def failing_cases(reports: list[dict], pieces: list[str]) -> list[Failing]:
    """The cases failed most often (a skipped case has not failed), most failures first, then in piece order.
    A piece a student left unwritten is one line of unwritten_pieces, not a failure of each of its cases: its
    cases count over the students who wrote it."""
    cases: dict[tuple[str, str], Failing] = {}
    for report in reports:
        stubs = unwritten(report)
        for c in report_cases(report):
            if c.skipped or c.piece in stubs:
                continue
            f = cases.setdefault((c.piece, c.name), Failing(c.piece, c.name))
            f.ran += 1
            if not c.passed:
                f.failed += 1
                f.lost += c.max_points
                message = safe(c.message, 300)
                f.hints.setdefault(NUMBER.sub("#", message), Counter())[message] += 1
    order = {p: i for i, p in enumerate(pieces)}
    ranked = sorted((f for f in cases.values() if f.failed),
                    key=lambda f: (-f.failed, order.get(f.piece, len(order)), f.piece, f.name))
    return ranked[:TOP_CASES]


@dataclass
class Summary:
    students: int
    graded: list[dict]
    errors: list[dict]
    late: list[dict]
    has_deadline: bool
    totals: list[float]
    max_score: float | None
    modes: Counter

    @property
    def quick(self) -> int:
        return self.modes.get("quick", 0)


def most_common(counts: Counter) -> float | None:
    return min(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0] if counts else None


def row_modes(rows: list[dict], reports: dict[str, dict], mode: str | None = None) -> Counter:
    """Each row's mode, once: its gradebook cell; else its report's `quick`; else the caller's `mode`; else the
    one mode every other row agrees on, since a batch grades all its rows in one mode (an error row has no
    report); "unknown" only when nothing says."""
    def said(row: dict) -> str | None:
        if cell := cell_text(row, "mode").strip().lower():
            return cell
        quick = reports.get(student_of(row), {}).get("quick")
        # `grade batch` hands over its rows without the mode the CSV adds; its reports say quick True or False
        return {True: "quick", False: "full"}.get(quick) if isinstance(quick, bool) else (mode or None)

    known = [said(r) for r in rows]
    agreed = set(filter(None, known))
    rest = next(iter(agreed)) if len(agreed) == 1 else "unknown"
    return Counter(m or rest for m in known)


def summarize(rows: list[dict], reports: dict[str, dict], mode: str | None = None) -> Summary:
    """The headline numbers; `reports`: each read report by its student's name; `mode`: the run's, if known."""
    graded = [r for r in rows if not status_of(r).is_error]
    totals = [t for r in graded if (t := number(r.get("total"))) is not None]
    # the gradebook's max_score (0 is one); a report's where the rows lack it
    max_score = most_common(Counter(t for r in graded if (t := number(r.get("max_score"))) is not None))
    if max_score is None:
        max_score = most_common(Counter(t for rep in reports.values()
                                        if (t := number(rep.get("max_score"))) is not None))
    late = sorted((r for r in rows if (late_count(r) or 0) > 0),
                  key=lambda r: (-(late_count(r) or 0), student_of(r).lower(), student_of(r)))
    return Summary(len(rows), graded, [r for r in rows if status_of(r).is_error], late,
                   any(late_count(r) is not None for r in rows), totals, max_score, row_modes(rows, reports, mode))
