"""Red team, round two: the instructor's regrade (`grade batch`) as a student would poison it.

The regrade runs unjailed with the reference beside it, and writes one gradebook for the whole class, so
each test hands it a hostile submission beside an honest one and checks the honest score: the hostile
student gets an error row or what their own code earns, never the reference's marks; the neighbour keeps
full marks; nothing is written outside the gradebook and its reports.
"""
from __future__ import annotations

import csv
import os
import shutil
import time
import zipfile
from pathlib import Path

import pytest

from grader.regrade import intake
from grader.verbs import batch as batch_verb
from grader.core.pieces import MODULES, PIECES
from grader.regrade.book import Files

from helpers import QUICK, REFERENCE, make_submission

from .harness import EXERCISES, FULL, MANIFEST

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PIECE = "context"  # one quick piece keeps each batch to seconds


def batch(subs: list[Path], tmp_path: Path, monkeypatch, *, pieces=(PIECE,), jobs: int = 1) -> dict[str, dict]:
    """batch.main over `subs` grading only `pieces`; rows by student, after checking nothing else was written."""
    monkeypatch.setattr(batch_verb, "PIECES", {p: PIECES[p] for p in pieces})
    before = tree(tmp_path)
    out = tmp_path / "book" / "grades.csv"
    batch_verb.main(submissions=subs, out=out, reports=tmp_path / "book" / "reports", jobs=jobs, seed="0",
                    limits=QUICK, progress=False)
    new = tree(tmp_path) - before
    files = Files.of(out, tmp_path / "book" / "reports")
    book = {out.parent, out, files.reports, files.code, files.manifest, files.journal, files.similarity,
            files.classreport}
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    code = {files.code / r["student"] for r in rows} | {files.code / r["student"] / f"{m}.py" for r in rows
                                                        for m in MODULES}  # the code that was graded
    assert {p for p in new if p.parent != files.reports} <= book | code, sorted(new)
    assert len({r["student"] for r in rows}) == len(rows), "two rows share a name"
    assert sorted(p.name for p in (tmp_path / "book" / "reports").iterdir()) == sorted(f"{r['student']}.json" for r in rows)
    return {r["student"]: r for r in rows}


def tree(top: Path) -> set[Path]:
    """Every path under `top`, never through a link (a hostile link may point at the whole lab)."""
    found = set()
    for folder, dirs, files in os.walk(top):
        found.update(Path(folder) / n for n in [*dirs, *files])
    return found


def repo(where: Path, base: Path = REFERENCE) -> Path:
    """A student repository as Classroom hands it over: the lab's files in exercises/, a .git beside them."""
    make_submission(where / "exercises", base=base)
    (where / ".git").mkdir()
    return where


def honest(row: dict) -> None:
    assert row["status"] == "ok" and int(row["total"]) == FULL[PIECE] == int(row["max_score"]), row


def refused(row: dict, *words: str) -> None:
    assert row["status"].startswith("error: ") and row["total"] == "0", row
    assert all(int(row[p]) == 0 for p in MANIFEST if p in row), row
    for w in words:
        assert w in row["status"], row


def solutions_notebook(path: Path) -> Path:
    from grader.lesson import notebook

    return notebook.write(path, source="reference")


# ---- 5. links --------------------------------------------------------------------------------------

def test_a_submission_linked_to_the_reference_at_any_level_gets_an_error_row_never_its_marks(tmp_path, monkeypatch):
    cls = tmp_path / "class"
    cls.mkdir()
    alice = repo(cls / "lab-alice")
    abs_link = cls / "lab-mallory"  # exercises/ -> the reference, absolute
    abs_link.mkdir()
    (abs_link / "exercises").symlink_to(REFERENCE)
    rel_link = cls / "lab-oscar"  # exercises/ -> the reference, guessed relative
    rel_link.mkdir()
    (rel_link / "exercises").symlink_to(os.path.relpath(REFERENCE, rel_link))
    whole = cls / "lab-trent"  # the repository itself a link
    whole.symlink_to(REFERENCE.parent)
    nb_link = repo(cls / "lab-eve", base=EXERCISES)  # the stubs, and lesson.ipynb -> the solutions notebook
    solutions = solutions_notebook(tmp_path / "solutions.ipynb")
    (nb_link / "exercises" / "lesson.ipynb").unlink(missing_ok=True)
    (nb_link / "exercises" / "lesson.ipynb").symlink_to(solutions)
    nb_file = cls / "peggy.ipynb"  # a notebook handed in as a file, linked to the solutions
    nb_file.symlink_to(solutions)
    zipped = cls / "victor.zip"  # a zip whose member is a link
    with zipfile.ZipFile(zipped, "w") as zf:
        link = zipfile.ZipInfo("victor/context.py")
        link.external_attr = (0o120777 << 16)
        zf.writestr(link, str(REFERENCE / "context.py"))
    make_submission(tmp_path / "elsewhere" / "exercises")  # a real exercises/ holding the reference's files...
    via = cls / "lab-walter"  # ...reached through a repository folder that is a link
    via.symlink_to(tmp_path / "elsewhere")
    decoy = repo(cls / "lab-dave", base=EXERCISES)  # the stubs in exercises/, links at the root beside them
    for m in ("context", "luong"):
        (decoy / f"{m}.py").symlink_to(REFERENCE / f"{m}.py")
    fifo = repo(cls / "lab-faythe", base=EXERCISES)  # a notebook that would block a reader forever
    os.mkfifo(fifo / "exercises" / "lesson.ipynb")
    rows = batch([cls], tmp_path, monkeypatch)  # the class's folder, as grade batch collect writes it
    honest(rows["lab-alice"])
    for name in ("lab-mallory", "lab-oscar", "lab-trent", "lab-eve", "peggy", "victor", "lab-walter"):
        refused(rows[name], "symbolic link")
    refused(rows["lab-faythe"], "not a regular file")
    assert rows["lab-dave"]["status"] == "ok" and rows["lab-dave"]["total"] == "0"  # exercises/ graded, as Classroom does
    shutil.rmtree(tmp_path / "book")
    given = batch([alice, via / "exercises", abs_link / "exercises", nb_link / "exercises" / "lesson.ipynb"],
                  tmp_path, monkeypatch)  # each named on the command line, down to exercises/ or the notebook
    honest(given["lab-alice"])
    for name in ("lab-walter", "lab-mallory", "lab-eve"):
        refused(given[name], "symbolic link")


def test_a_piece_file_linked_to_the_reference_costs_that_piece_as_in_grade(tmp_path, monkeypatch):
    sub = repo(tmp_path / "lab-mallory")
    (sub / "exercises" / "context.py").unlink()
    (sub / "exercises" / "context.py").symlink_to(REFERENCE / "context.py")
    rows = batch([sub, repo(tmp_path / "lab-alice")], tmp_path, monkeypatch, pieces=("context", "luong"))
    row = rows["lab-mallory"]
    assert row["status"] == "ok" and row["context"] == "0" and int(row["luong"]) == FULL["luong"], row
    assert int(rows["lab-alice"]["total"]) == FULL["context"] + FULL["luong"]


# ---- 6. the gradebook ------------------------------------------------------------------------------

def test_classroom_repositories_get_a_row_each_named_after_the_repository_with_its_path(tmp_path, monkeypatch):
    """A class's folder (the retired Classroom's `<assignment>-submissions/`, `grade batch collect`'s or
    `gh teacher download`'s) holds one folder per repository: the folder, or each repository, or each exercises/,
    gives the same rows; a notebook-only student is graded from the notebook."""
    cls = tmp_path / "attention-lab-submissions"
    cls.mkdir()
    alice = repo(cls / "attention-lab-alice")
    bob = repo(cls / "attention-lab-bob", base=EXERCISES)  # untouched stubs, the work in the notebook
    solutions_notebook(bob / "exercises" / "lesson.ipynb")
    for given in ([cls], [alice, bob], [alice / "exercises", bob / "exercises"]):
        rows = batch(given, tmp_path, monkeypatch)
        assert sorted(rows) == ["attention-lab-alice", "attention-lab-bob"]
        for name in rows:
            honest(rows[name])
            assert Path(rows[name]["path"]).resolve().is_relative_to((cls / name).resolve()), rows[name]
        shutil.rmtree(tmp_path / "book")


def test_two_students_of_one_name_get_two_rows_and_two_reports(tmp_path, monkeypatch):
    subs = [repo(tmp_path / "section1" / "alice"), make_submission(tmp_path / "section2" / "Alice" / "exercises"),
            make_submission(tmp_path / "alice-2", base=EXERCISES)]
    first = batch(subs, tmp_path, monkeypatch)
    assert {n: r["path"] for n, r in first.items()} == {"alice": str(subs[0]), "Alice-3": str(subs[1]),
                                                        "alice-2": str(subs[2])}  # the real alice-2 keeps her name
    assert first["alice-2"]["total"] == "0"
    for name in ("alice", "Alice-3"):
        honest(first[name])
    shutil.rmtree(tmp_path / "book")
    again = batch(list(reversed(subs)), tmp_path, monkeypatch)
    assert {n: r["path"] for n, r in again.items()} == {n: r["path"] for n, r in first.items()}  # order-free


def test_a_student_folder_among_others_is_one_row_never_rows_named_as_it_likes(tmp_path, monkeypatch):
    alice = repo(tmp_path / "alice")
    mallory = tmp_path / "mallory"  # no exercises/: subfolders dressed as other students
    make_submission(mallory / "alice" / "exercises")
    make_submission(mallory / "zoe" / "exercises")
    rows = batch([alice, mallory], tmp_path, monkeypatch)
    assert sorted(rows) == ["alice", "mallory"]
    honest(rows["alice"])
    refused(rows["mallory"], "holds none of the lab's files")


FORMULAS = ["+SUM(1,2)", "-2+3", "@cmd", ' =HYPERLINK("x")', "\t=1", "\r=1", "=1+2"]


def test_a_name_or_message_that_is_a_formula_is_written_as_text(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # paths as given, relative: the path column starts with the formula too
    make_submission(tmp_path / "=1+2")
    for name in FORMULAS:
        (tmp_path / f"{name}.zip").write_text("=not a zip")  # an error row whose path and name are formulas
    monkeypatch.setattr(batch_verb, "PIECES", {PIECE: PIECES[PIECE]})
    out = tmp_path / "grades.csv"
    batch_verb.main(submissions=[Path("=1+2"), *(Path(f"{n}.zip") for n in FORMULAS)], out=out, reports=None,
                    jobs=1, seed="0", limits=QUICK, progress=False)
    rows = list(csv.reader(out.open(encoding="utf-8")))
    assert len(rows) == 2 + len(FORMULAS)
    for row in rows:
        for text in row:
            assert not text.lstrip().startswith(("=", "+", "-", "@")) and not set(text) & set("\t\r\n"), row
    good = next(r for r in csv.DictReader(out.open(encoding="utf-8")) if r["status"] == "ok")
    assert int(good["total"]) == FULL[PIECE] and good["path"] == "'=1+2"
    paths = {r["path"].lstrip("'").strip() for r in csv.DictReader(out.open(encoding="utf-8"))}
    assert paths == {"=1+2", *(f"{n.strip()}.zip" for n in FORMULAS)}  # still traceable


def _spaces_zip(path: Path, names: list[str], size: int) -> Path:
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for n in names:
            zf.writestr(n, "#" + " " * (size - 1))
    return path


@pytest.mark.parametrize("names, why", [
    pytest.param([f"d{i}/encoder.py" for i in range(500)], "named like the lab's files", id="500 lab-named members"),
    pytest.param([f"junk/{i}.py" for i in range(500)] + ["alice/context.py"], None, id="500 other members"),
    pytest.param([f"f{i}" for i in range(intake.MAX_ZIP_MEMBERS + 1)], "members", id="too many members"),
])
def test_a_zip_of_many_members_is_refused_or_read_for_its_lab_files_only(tmp_path, monkeypatch, names, why):
    size = (1 << 20) - 10 if len(names) <= 501 else 1  # each just under the per-member cap
    bomb = _spaces_zip(tmp_path / "mallory.zip", names, size)
    into = tmp_path / "into"
    into.mkdir()
    start = time.monotonic()
    try:
        batch_verb.unpack(bomb, into)
        assert why is None
    except batch_verb.Refused as e:
        assert why is not None and why in str(e), e
    assert time.monotonic() - start < 20
    written = sum(p.stat().st_size for p in into.rglob("*") if p.is_file())
    assert written <= bomb.stat().st_size + 2 * (1 << 20), f"{written >> 20} MB written"


def test_a_zip_of_a_whole_repository_is_graded_from_its_exercises(tmp_path, monkeypatch):
    zipped = tmp_path / "alice.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        for path in REFERENCE.glob("*.py"):
            zf.write(path, f"attention-lab-alice-main/exercises/{path.name}")
        zf.write(EXERCISES / "context.py", "attention-lab-alice-main/backup/context.py")
    rows = batch([zipped], tmp_path, monkeypatch)
    honest(rows["alice"])


def _dicts_notebook(path: Path, megabytes: int) -> Path:
    n = megabytes * (1 << 20) // 3
    path.write_text('{"nbformat": 4, "nbformat_minor": 5, "metadata": {"x": [' + ",".join(["{}"] * n)
                    + ']}, "cells": []}')
    return path


def _nested_notebook(path: Path, megabytes: int) -> Path:
    n = megabytes * (1 << 20) // 2
    path.write_text("[" * n + "]" * n)
    return path


@pytest.mark.parametrize("make, mb", [
    pytest.param(_dicts_notebook, 11, id="11 MB of empty dicts"),
    pytest.param(_nested_notebook, 1, id="a million nested lists"),
    pytest.param(_dicts_notebook, intake.MAX_NOTEBOOK // (1 << 20) + 1, id="over the size cap"),
])
def test_a_notebook_made_to_exhaust_the_regrade_costs_only_its_own_row(tmp_path, monkeypatch, make, mb):
    sub = repo(tmp_path / "lab-mallory", base=EXERCISES)
    make(sub / "exercises" / "lesson.ipynb", mb)
    loose = make(tmp_path / "trudy.ipynb", mb)
    resource = pytest.importorskip("resource")
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    start = time.monotonic()
    rows = batch([sub, loose, repo(tmp_path / "lab-alice")], tmp_path, monkeypatch)
    assert time.monotonic() - start < 90
    grown = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - peak) / 1024  # MB (Linux reports KB)
    assert grown < 200, f"the regrade's own process grew by {grown:.0f} MB"
    honest(rows["lab-alice"])
    row = rows["lab-mallory"]  # as in `grade`: the .py files (untouched stubs) graded, and why not the notebook
    assert row["status"].startswith("ok: ") and "the .py files only" in row["status"] and row["total"] == "0", row
    refused(rows["trudy"])


def test_without_resource_a_notebook_is_still_capped_by_size_and_time(tmp_path, monkeypatch):
    """Windows has no `resource`: the size cap and the child's timeout stand alone, and honest notebooks pass."""
    monkeypatch.setattr(intake, "resource", None)
    monkeypatch.setattr(intake, "SECONDS", 3)
    sub = repo(tmp_path / "lab-mallory", base=EXERCISES)
    _dicts_notebook(sub / "exercises" / "lesson.ipynb", 11)
    bob = repo(tmp_path / "lab-bob", base=EXERCISES)
    solutions_notebook(bob / "exercises" / "lesson.ipynb")
    rows = batch([sub, bob], tmp_path, monkeypatch)
    honest(rows["lab-bob"])
    assert "took over 3 s" in rows["lab-mallory"]["status"] and rows["lab-mallory"]["total"] == "0", rows["lab-mallory"]


def test_a_crash_mid_batch_leaves_every_finished_row_on_disk(tmp_path, monkeypatch):
    alice, crash = repo(tmp_path / "lab-alice"), repo(tmp_path / "lab-zed")
    real = batch_verb.report.as_dict

    def as_dict(runs, *, student, **kwargs):  # zed's row is made after alice's is written
        if student == "lab-zed":
            raise KeyboardInterrupt  # the instructor's ^C, or the machine going down: nothing catches it
        return real(runs, student=student, **kwargs)

    monkeypatch.setattr(batch_verb.report, "as_dict", as_dict)
    monkeypatch.setattr(batch_verb, "PIECES", {PIECE: PIECES[PIECE]})
    out = tmp_path / "grades.csv"
    with pytest.raises(KeyboardInterrupt):
        batch_verb.main(submissions=[alice, crash], out=out, reports=None, jobs=1, seed="0", limits=QUICK,
                        progress=False)
    rows = list(csv.DictReader(out.open(encoding="utf-8")))
    assert [r["student"] for r in rows] == ["lab-alice"] and int(rows[0]["total"]) == FULL[PIECE]


def test_the_finished_gradebook_is_the_same_whatever_order_the_rows_finished_in(tmp_path, monkeypatch):
    subs = []
    for name in ("dave", "Carol", "bob", "alice", "erin"):
        (tmp_path / f"{name}.zip").write_text("not a zip")
        subs.append(tmp_path / f"{name}.zip")
    books = []
    for order in (subs, list(reversed(subs))):
        batch(order, tmp_path, monkeypatch)  # one at a time: rows finish in the order given
        books.append((tmp_path / "book" / "grades.csv").read_bytes())
        shutil.rmtree(tmp_path / "book")
    assert books[0] == books[1]
    assert [r.split(b",")[0] for r in books[0].splitlines()[1:]] == [b"alice", b"bob", b"Carol", b"dave", b"erin"]


def test_a_reason_that_quotes_the_submission_reaches_the_gradebook_and_its_report_escaped(tmp_path, monkeypatch):
    zipped = tmp_path / "mallory.zip"
    with zipfile.ZipFile(zipped, "w") as zf:
        link = zipfile.ZipInfo("hw/##[add-mask]Total ::error::x #\u200b#[notice title=Autograding report]/context.py")
        link.external_attr = 0o120777 << 16  # a symbolic link: the regrade refuses it, naming the member
        zf.writestr(link, "../../reference/context.py")
    rows = batch([zipped, repo(tmp_path / "alice")], tmp_path, monkeypatch)
    honest(rows["alice"])
    refused(rows["mallory"], "symbolic link", "# #[add-mask]")
    report = (tmp_path / "book" / "reports" / "mallory.json").read_text(encoding="utf-8")
    book = (tmp_path / "book" / "grades.csv").read_text(encoding="utf-8")
    for text in (report, book, rows["mallory"]["status"]):
        assert "##" not in text and "::" not in text and "\u200b" not in text, text
