"""A gradebook row's status (grader/regrade/rowstatus.py) and a release_files verdict (grader/regrade/release_files.py)
are values, read back from the cells the batch writes: an error row is never taken as graded, nor a graded one as
an error, whether the row is the one written or the one a CSV, journal or manifest gives back."""
from __future__ import annotations

import csv
import json

import pytest

from grader.regrade import book, manifests, scores
from grader.regrade.release_files import Kind, Verdict
from grader.regrade.rowstatus import RowStatus, error_text, ok_text, reason, status_of

PIECES = ["encoder", "additive"]


def row(student: str, status: str, **more) -> dict:
    return {"student": student, "encoder": 0, "additive": 0, "total": 0, "max_score": None, "status": status, **more}


ROWS = {
    "ok": (row("ok", ok_text([])), RowStatus.GRADED),
    "noted": (row("noted", ok_text(["the notebook's cell 3 was left out: error in it"])), RowStatus.GRADED),
    "broken": (row("broken", error_text("Refused: a link in exercises/")), RowStatus.ERROR),
    "fault": (row("fault", error_text("RuntimeError: late: a worker lost")), RowStatus.ERROR),
    "late": (row("late", error_text("late: no commit before the deadline 2026-12-01T23:59:00-05:00"),
                 committed=""), RowStatus.LATE),
    "carol": (row("carol", error_text("no repository (expected lab-carol)")), RowStatus.NO_REPOSITORY),
}


@pytest.mark.parametrize("name", ROWS)
def test_each_row_is_classified_as_written_and_as_read_back_from_the_csv_and_the_manifest(tmp_path, name):
    written, expected = ROWS[name]
    assert status_of(written) is expected
    assert status_of(written).is_error is (expected is not RowStatus.GRADED)
    files = book.Files.of(tmp_path / "grades.csv")
    book.write_csv(files.csv, [r for r, _ in ROWS.values()], "full", PIECES)
    with open(files.csv, newline="", encoding="utf-8") as f:
        read = {r["student"]: r for r in csv.DictReader(f)}
    assert status_of(read[name]) is expected
    manifests.write_manifest(files, shard=(1, 1), names=list(ROWS), class_digest="d", setting={},
                        rows=[r for r, _ in ROWS.values()], finished=True)
    entry = json.loads(files.manifest.read_text())["students"][name]
    assert status_of(entry["row"]) is expected
    assert entry["ended"] == {RowStatus.GRADED: "graded", RowStatus.LATE: "late"}.get(expected, "error")


@pytest.mark.parametrize("status", ["error: x", "error:x", "  error: x", "Error: x", "ERROR", "error"])
def test_an_error_cell_is_an_error_however_it_is_spaced_or_cased(status):
    assert status_of({"status": status}).is_error


@pytest.mark.parametrize("status", ["ok", "ok: error: in a note", "", None, "okay"])
def test_a_cell_that_does_not_start_with_error_is_graded(status):
    assert status_of({"status": status}) is RowStatus.GRADED
    assert status_of({}) is RowStatus.GRADED


def test_the_reason_is_the_cell_without_its_error_prefix_and_the_text_is_one_safe_line():
    assert reason(ROWS["carol"][0]) == "no repository (expected lab-carol)"
    assert error_text("a\nb\t c") == "error: a b c"
    assert ok_text(["a  b", "c"]) == "ok: a b: c"


def test_scores_csv_reads_late_and_no_repository_from_the_status():
    lines = {line["username"]: line for line in scores.lines([r for r, _ in ROWS.values()], None, "full")}
    assert lines["late"]["late"] == "true" and lines["ok"]["late"] == ""
    assert lines["carol"]["score"] == "" and lines["broken"]["score"] == "0"


@pytest.mark.parametrize("verdict", [Verdict.no_release(), Verdict.not_checked("Permission denied"),
                                     Verdict.not_a_repository(), Verdict.not_a_repository("no repository"),
                                     Verdict.unchanged(), Verdict.changes(["grader/x.py", "+pip/"]),
                                     Verdict.changes([f"f{i}" for i in range(12)])])
def test_a_verdict_read_back_from_its_cell_is_of_its_kind(verdict):
    read = Verdict.read(f" {verdict.cell} ")
    assert read.kind is verdict.kind and read.cell == verdict.cell


def test_a_verdict_cell_of_no_known_form_is_shown_as_a_change_never_hidden():
    assert Verdict.read("something else").kind is Kind.CHANGED
    assert Verdict.read("").kind is Kind.BLANK and Verdict.read(None).kind is Kind.BLANK
    assert Verdict.changes(["a", "b"]).what == "a; b"
    assert Verdict.changes([f"f{i}" for i in range(12)]).cell.endswith("; f9; and 2 more")


def test_the_batchs_closing_line_counts_late_and_missing_repositories_apart_from_unreadable_ones():
    from grader.regrade.rowstatus import tally

    rows = [r for r, _ in ROWS.values()]
    assert tally(rows) == "graded 2 submission(s), 1 late, 1 without a repository, 2 unreadable"
    assert tally(rows[:2]) == "graded 2 submission(s), 0 unreadable"
