"""An error row is out of what a graded row is out of (max_score), known before any student is graded: a class with
no graded student yet (a run stopped early, or one where nobody could be graded) shows it too."""
from __future__ import annotations

import csv

import pytest
from click.testing import CliRunner

from grader.cli import cli

from helpers import QUICK_TOTAL, TOTAL


@pytest.mark.parametrize("quick, top", [(True, QUICK_TOTAL), (False, TOTAL)])
def test_error_rows_carry_the_max_score_when_no_student_was_graded(tmp_path, quick, top):
    (tmp_path / "class" / "x-alice").mkdir(parents=True)  # no lab file: an error row
    (tmp_path / "roster.csv").write_text("alice\nbob\n")  # a username a line; bob has no repository
    out = tmp_path / "out" / "grades.csv"
    done = CliRunner().invoke(cli, ["batch", str(tmp_path / "class"), "--out", str(out), "--seed", "s",
                                    "--roster", str(tmp_path / "roster.csv"), "--prefix", "x-",
                                    *(["--quick"] if quick else [])])
    assert done.exit_code == 0, done.output
    with open(out, newline="", encoding="utf-8") as f:
        rows = {r["student"]: r for r in csv.DictReader(f)}
    assert set(rows) == {"alice", "bob"} and all(r["status"].startswith("error:") for r in rows.values())
    assert {r["max_score"] for r in rows.values()} == {str(top)}
