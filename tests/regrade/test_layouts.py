"""`grade batch` on the layouts a class arrives in, graded (one quick piece, `context`: a few seconds a student):
a `gh teacher download` folder (Classroom 50: a clone per student, its scores.csv at the root, result.json and
results.json in each clone), the retired GitHub Classroom's `<assignment>-submissions/<repository>`, and a class
from a roster graded in shards and merged, with Classroom 50's scores.csv from both."""
from __future__ import annotations

import csv
import json
import shutil

import pytest
from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli

from helpers import REFERENCE

from .github import commit, roster_csv

STUB = ROOT / "exercises"
CLASSROOM, ASSIGNMENT = "fall26", "attention-lab"
PREFIX = f"{CLASSROOM}-{ASSIGNMENT}-"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture(autouse=True)
def one_piece(monkeypatch):
    from grader.core.pieces import PIECES
    from grader.verbs import batch as verb

    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})


def batch(*args) -> str:
    result = CliRunner().invoke(cli, ["batch", *map(str, args), "--quick", "-j", "2", "--seed", "7"])
    assert result.exit_code == 0, result.output
    return result.output


def rows(path) -> dict[str, dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return {r["student"]: r for r in csv.DictReader(f)}


def release(where):
    """A student release as the instructor handed it out: a workflow, a grader file, the stubs."""
    (where / ".github" / "workflows").mkdir(parents=True)
    (where / ".github" / "workflows" / "check.yml").write_text("on: push\n")
    (where / "grader").mkdir()
    (where / "grader" / "__init__.py").write_text("")
    shutil.copytree(STUB, where / "exercises", ignore=shutil.ignore_patterns("__pycache__"))
    return where


def test_a_gh_teacher_download_is_graded_by_roster_and_classroom50s_own_files_are_neither_graded_nor_flagged(tmp_path):
    """alice solved it; bob's clone holds Classroom 50's result.json and results.json saying 73/73 beside his stubs:
    he gets what his code earns, and --release names no change of his; carol never accepted: an error row."""
    handout = release(tmp_path / "release")
    download = tmp_path / f"{CLASSROOM}-{ASSIGNMENT}_submissions_2026_12_02_T_09_00_00"
    for who, code in (("alice", REFERENCE), ("bob", STUB)):
        clone = download / f"{PREFIX}{who}"
        shutil.copytree(handout, clone)
        shutil.copyfile(code / "context.py", clone / "exercises" / "context.py")
        (clone / ".git").mkdir()
        (clone / "result.json").write_text(json.dumps({"score": 73, "max_score": 73}))
        (clone / "results.json").write_text(json.dumps([{"score": 73, "max_score": 73}]))
    (download / "scores.csv").write_text("username,first_name,last_name,email,section,score,max_score,datetime,"
                                         "submission_tag,submitted_by,review_url,late,override\nbob,,,,,73,73,,,,,,\n")
    roster = roster_csv(tmp_path / "roster.csv", [("alice", "Alice", "A", "a@uni.edu", "A", "1", "student"),
                                                  ("Bob", "Bob", "B", "b@uni.edu", "B", "2", "student"),
                                                  ("carol", "Carol", "C", "c@uni.edu", "A", "3", "student"),
                                                  ("prof", "P", "Q", "p@uni.edu", "", "4", "teacher")])
    out = tmp_path / "book" / "grades.csv"
    said = batch(download, "--roster", roster, "--prefix", PREFIX, "--release", handout, "--out", out,
                 "--scores-csv", tmp_path / "book" / "scores.csv")
    book = rows(out)
    assert sorted(book) == ["Bob", "alice", "carol"]  # by username; scores.csv is no student
    assert book["alice"]["status"] == "ok" and book["alice"]["total"] == book["alice"]["max_score"] != "0"
    assert book["Bob"]["status"] == "ok" and book["Bob"]["total"] == "0"  # result.json's 73 is not his grade
    assert book["alice"]["release_files"] == book["Bob"]["release_files"] == "unchanged"
    assert book["carol"]["status"] == f"error: no repository (expected {PREFIX}carol)" and book["carol"]["total"] == "0"
    assert "no repository: 1 roster student(s) get an error row (carol)" in said
    with open(tmp_path / "book" / "scores.csv", newline="", encoding="utf-8") as f:
        lines = list(csv.reader(f))
    assert lines[1:] == [["alice", "Alice", "A", "a@uni.edu", "A", book["alice"]["total"], book["alice"]["max_score"],
                          "", "regrade-quick", "", "", "", "", ""],
                         ["Bob", "Bob", "B", "b@uni.edu", "B", "0", book["alice"]["max_score"], "", "regrade-quick",
                          "", "", "", "", ""],
                         ["carol", "Carol", "C", "c@uni.edu", "A", "", "", "", "regrade-quick", "", "", "", "", ""]]


def test_the_retired_classrooms_clone_layout_is_still_a_class_with_or_without_a_roster(tmp_path):
    """`<assignment>-submissions/<assignment>-<user>/`, as the retired GitHub Classroom's clone wrote it."""
    old = tmp_path / f"{ASSIGNMENT}-submissions"
    for who in ("alice", "zoe"):
        shutil.copytree(REFERENCE, old / f"{ASSIGNMENT}-{who}" / "exercises")
        (old / f"{ASSIGNMENT}-{who}" / ".git").mkdir()
    (tmp_path / "students.txt").write_text("alice\ndan  # dropped the course\n")
    said = batch(old, "--roster", tmp_path / "students.txt", "--prefix", f"{ASSIGNMENT}-", "--out", tmp_path / "r.csv")
    book = rows(tmp_path / "r.csv")
    assert sorted(book) == ["alice", "dan"] and book["alice"]["total"] == book["alice"]["max_score"] != "0"
    assert book["dan"]["status"] == f"error: no repository (expected {ASSIGNMENT}-dan)"
    assert f"not on the roster, left out: 1 ({ASSIGNMENT}-zoe)" in said
    shutil.rmtree(old / f"{ASSIGNMENT}-alice")  # without a roster: every repository, named after it
    batch(old, "--out", tmp_path / "all.csv")
    assert sorted(rows(tmp_path / "all.csv")) == [f"{ASSIGNMENT}-zoe"]


@needs_git
@pytest.mark.slow
def test_a_roster_class_in_shards_merges_into_the_unsharded_gradebook_and_scores_csv_byte_for_byte(tmp_path):
    """alice on time; bob only after the deadline (late); carol, dave and erin without a repository, dealt into
    the shards like everyone else: each shard has its students' rows, missing or not, and the merge is whole."""
    klass = tmp_path / "class"
    commit(klass / f"{PREFIX}alice", "2026-11-30T12:00:00-05:00", {"exercises/context.py": REFERENCE / "context.py"})
    commit(klass / f"{PREFIX}alice", "2026-12-02T12:00:00-05:00", {"exercises/context.py": STUB / "context.py"})
    commit(klass / f"{PREFIX}bob", "2026-12-03T12:00:00-05:00", {"exercises/context.py": REFERENCE / "context.py"})
    roster = roster_csv(tmp_path / "roster.csv", [(u, u.title(), "X", f"{u}@uni.edu", "A", str(i), "student")
                                                  for i, u in enumerate(["erin", "alice", "bob", "carol", "dave"])])
    common = ["--roster", roster, "--prefix", PREFIX, "--before", "2026-12-01T23:59:00-05:00"]
    batch(klass, *common, "--out", tmp_path / "whole" / "grades.csv", "--scores-csv", tmp_path / "whole" / "s.csv")
    for k in (1, 2):
        batch(klass, *common, "--shard", f"{k}/2", "--out", tmp_path / f"part-{k}" / "grades.csv")
        parted = json.loads((tmp_path / f"part-{k}" / "grades-manifest.json").read_text())
        assert set(parted["roster"]) == set(parted["students"])  # each shard's own students, missing or not
    result = CliRunner().invoke(cli, ["batch", "merge", str(tmp_path / "part-1"), str(tmp_path / "part-2"),
                                      "--out", str(tmp_path / "merged" / "grades.csv"),
                                      "--scores-csv", str(tmp_path / "merged" / "s.csv")])
    assert result.exit_code == 0, result.output
    whole = (tmp_path / "whole" / "grades.csv").read_bytes()
    assert (tmp_path / "merged" / "grades.csv").read_bytes() == whole
    assert (tmp_path / "merged" / "s.csv").read_bytes() == (tmp_path / "whole" / "s.csv").read_bytes()
    book = rows(tmp_path / "whole" / "grades.csv")
    assert book["alice"]["total"] == book["alice"]["max_score"] != "0" and book["alice"]["late"] == "1"
    assert book["bob"]["status"].startswith("error: late")
    assert {book[u]["status"] for u in ("carol", "dave", "erin")} == \
        {f"error: no repository (expected {PREFIX}{u})" for u in ("carol", "dave", "erin")}
    with open(tmp_path / "whole" / "s.csv", newline="", encoding="utf-8") as f:
        lines = {r["username"]: r for r in csv.DictReader(f)}
    assert list(lines) == ["erin", "alice", "bob", "carol", "dave"]  # the roster's order
    assert lines["alice"]["datetime"] == "2026-11-30T12:00:00-05:00"  # the deadline's zone
    # one commit after the deadline: late, as grades.csv says, and its count beside it
    assert (lines["alice"]["late"], lines["alice"]["commits_after_deadline"]) == ("true", "1")
    assert (lines["bob"]["score"], lines["bob"]["late"]) == ("0", "true")
    assert lines["erin"]["score"] == "" and lines["erin"]["first_name"] == "Erin"
    # a shard of another prefix is another class list: the merge refuses it
    batch(klass, "--roster", roster, "--prefix", "x-", "--before", "2026-12-01T23:59:00-05:00", "--shard", "2/2",
          "--out", tmp_path / "other" / "grades.csv")
    refused = CliRunner().invoke(cli, ["batch", "merge", str(tmp_path / "part-1"), str(tmp_path / "other"),
                                       "--out", str(tmp_path / "m2" / "grades.csv")])
    assert refused.exit_code == 1 and "another class list" in refused.output
