"""`grade batch` and `grade --plots` as an instructor and a student run them."""
from __future__ import annotations

import csv
import json
import shutil
import zipfile

import pytest
from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli

from grader.core.pieces import PIECES

from helpers import REFERENCE

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it


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
    assert report["score"] == report["max_score"] and len(report["pieces"]) == len(PIECES)


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
    from grader.core.pieces import PIECES

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


def test_the_regrade_names_every_repository_whose_release_files_differ_and_grades_only_its_pieces(tmp_path, monkeypatch):
    from grader.verbs import batch as verb
    from grader.core.pieces import PIECES
    from grader.release.build import student

    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})
    release, _ = student(tmp_path / "release")
    clone = tmp_path / "class"
    for who in ("alice", "bob"):
        shutil.copytree(release, clone / who)
        shutil.copyfile(REFERENCE / "context.py", clone / who / "exercises" / "context.py")
        (clone / who / ".git").mkdir()
    bob = clone / "bob"
    with (bob / ".github" / "workflows" / "classroom.yml").open("a") as f:
        f.write("# posts full marks\n")
    (bob / "grader" / "plugin_of_mine.py").write_text("")
    (bob / "sitecustomize.py").write_text("")
    (bob / "pip").mkdir()  # a package `python -m pip` would run from the root
    (bob / "pip" / "__main__.py").write_text("")
    (bob / "notes.txt").write_text("")  # not loadable: not flagged
    (bob / "datasets" / "toy_translation" / "test.tsv").unlink()
    (bob / "plots").mkdir()  # what `grade --plots plots/` writes: not a release file, not flagged
    (bob / "plots" / "heatmap.png").write_bytes(b"png")
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(clone), "--quick", "-j", "1", "--out", str(out),
                                      "--release", str(release)])
    assert result.exit_code == 0, result.output
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    assert rows["alice"]["release_files"] == "unchanged"
    assert rows["bob"]["release_files"] == ("CHANGED: +grader/plugin_of_mine.py; +pip/; +sitecustomize.py; "
                                            ".github/workflows/classroom.yml; datasets/toy_translation/test.tsv")
    assert rows["alice"]["total"] == rows["bob"]["total"] == rows["bob"]["max_score"] != "0"  # the pieces alone
    report = json.loads((tmp_path / "grades-reports" / "bob.json").read_text())
    assert "datasets/toy_translation/test.tsv" in report["changed_release_files"]
    result = CliRunner().invoke(cli, ["batch", str(clone / "alice"), "--quick", "-j", "1", "--out", str(out)])
    assert next(csv.DictReader(out.open()))["release_files"] == "not checked (no --release)"
