"""`grade batch` and `grade --plots` as an instructor and a student run them."""
from __future__ import annotations

import csv
import json
import shutil
import zipfile

from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli

from helpers import REFERENCE


def test_a_broken_submission_becomes_a_row_and_the_batch_goes_on(tmp_path):
    good = tmp_path / "alice"
    shutil.copytree(REFERENCE, good)
    with zipfile.ZipFile(tmp_path / "bob.zip", "w") as zf:
        for path in (ROOT / "exercises").glob("*.py"):
            zf.write(path, f"bob/{path.name}")
    (tmp_path / "carol.zip").write_text("not a zip")
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(good), str(tmp_path / "bob.zip"), str(tmp_path / "carol.zip"),
                                      "--quick", "-j", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert rows["alice"]["total"] == rows["alice"]["max_score"] and rows["alice"]["status"] == "ok"
    assert rows["bob"]["total"] == "0" and rows["bob"]["status"] == "ok"
    assert rows["carol"]["status"].startswith("error: not a readable zip")
    assert {r["mode"] for r in rows.values()} == {"quick"}  # a quick gradebook says so on every row
    report = json.loads((tmp_path / "grades-reports" / "alice.json").read_text())
    assert report["score"] == report["max_score"] and len(report["pieces"]) == 6


def test_plots_are_written_where_the_report_says(tmp_path, monkeypatch):
    monkeypatch.setenv("ATTNLAB_PLOT_STEPS", "30")
    result = CliRunner().invoke(cli, ["context", "--quick", "--submission", str(REFERENCE), "--plots", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "plots written:" in result.output
    for name in ("heatmap.png", "length_curve.png"):
        assert (tmp_path / name).stat().st_size > 10_000


def test_the_regrade_grades_a_notebook_only_student_as_grade_and_classroom_do(tmp_path):
    from grader.lesson import notebook

    dana = tmp_path / "dana"
    shutil.copytree(ROOT / "exercises", dana)  # every .py file still the untouched stub
    notebook.write(dana / "lesson.ipynb", source="reference")  # every piece written in the notebook
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(dana), "--quick", "-j", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(out.open()))
    assert row["status"] == "ok" and row["total"] == row["max_score"] != "0"


def test_grade_batch_takes_the_folder_gh_classroom_clone_writes(tmp_path, monkeypatch):
    """One folder per repository, each with exercises/ and .git; a link given on the command line is a row."""
    from grader.verbs import batch as verb
    from grader.pieces import PIECES

    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})
    clone = tmp_path / "attention-lab-submissions"
    for who in ("alice", "bob"):
        shutil.copytree(REFERENCE, clone / f"attention-lab-{who}" / "exercises")
        (clone / f"attention-lab-{who}" / ".git").mkdir()
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(clone), "--quick", "-j", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert sorted(rows) == ["attention-lab-alice", "attention-lab-bob"]
    assert all(r["status"] == "ok" and r["total"] == r["max_score"] != "0" for r in rows.values()), rows
    assert rows["attention-lab-bob"]["path"] == str(clone / "attention-lab-bob")
    (tmp_path / "carol").symlink_to(tmp_path / "nowhere")
    result = CliRunner().invoke(cli, ["batch", str(tmp_path / "carol"), "--quick", "-j", "1", "--out", str(out)])
    assert result.exit_code == 0, result.output
    row = next(csv.DictReader(out.open()))
    assert row["student"] == "carol" and row["status"].startswith("error: the submission is a symbolic link"), row
