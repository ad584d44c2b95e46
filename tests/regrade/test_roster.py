"""The class from a roster (`grade batch --roster FILE --prefix PREFIX`): Classroom 50's roster.csv or a list of
usernames is the class list, every student on it has a row (one without a repository an error row), a repository
not on it is left out, and the shards are dealt from the roster. No grading here: see test_layouts.py."""
from __future__ import annotations

import pytest
from click.testing import CliRunner

from grader.cli import cli
from grader.regrade import roster as rosters
from grader.regrade import scores
from grader.regrade.classlist import class_list
from grader.regrade.shard import Shard, members

from .github import roster_csv

PREFIX = "fall26-attention-lab-"


def roster_of(tmp_path, *users: str):
    return rosters.read(roster_csv(tmp_path / "roster.csv", [(u, "", "", "", "", "", "student") for u in users]))


def test_a_classroom50_roster_gives_its_students_in_order_with_their_details_and_leaves_teachers_out(tmp_path):
    path = tmp_path / "roster.csv"
    path.write_text("\ufeffUsername,First_Name,last_name,email,section,github_id,role\r\n"  # a spreadsheet's export
                    "Alice,Ada,Lovelace,ada@uni.edu,A,101,student\r\n"
                    "prof,P,Q,prof@uni.edu,,1,teacher\r\n"
                    "\r\n"
                    "bob,Bob,\"Jones, Jr\",bob@uni.edu,B,102,\r\n")  # an empty role is a student's
    roster = rosters.read(path)
    assert [e.username for e in roster.students] == ["Alice", "bob"] and roster.others == 1
    assert roster.students[1].details() == {"username": "bob", "first_name": "Bob", "last_name": "Jones, Jr",
                                            "email": "bob@uni.edu", "section": "B"}


def test_a_plain_list_of_usernames_is_a_roster_with_comments_and_blank_lines(tmp_path):
    path = tmp_path / "students.txt"
    path.write_text("# section A\nalice\n\n  @Bob   # handed in late\ncarol-2\n")
    assert [e.username for e in rosters.read(path).students] == ["alice", "Bob", "carol-2"]
    path.write_text("username\nalice\n")  # a spreadsheet's one column, with its header
    assert [e.username for e in rosters.read(path).students] == ["alice"]


@pytest.mark.parametrize("text, said", [
    ("", "names no student"),
    ("# nobody yet\n", "names no student"),
    ("alice\nbob\nALICE\n", "ALICE is on the roster twice (lines 1 and 3)"),
    ("alice\n../bob\n", "line 2: '../bob' is not a GitHub username"),
    ("username,role\n=HYPERLINK(\"x\"),student\n", "line 2: '=HYPERLINK(\"x\")' is not a GitHub username"),
    ("username,first_name,role\n,Ann,student\n", "line 2: '' is not a GitHub username"),
])
def test_a_roster_that_names_no_one_someone_twice_or_no_github_user_is_refused_in_one_line(tmp_path, text, said):
    path = tmp_path / "roster.csv"
    path.write_text(text)
    with pytest.raises(rosters.RosterError, match=None) as refused:
        rosters.read(path)
    assert said in str(refused.value) and "\n" not in str(refused.value)


def test_a_students_repository_is_the_prefix_and_the_username_lowercased():
    assert rosters.repository(PREFIX, "Alice-B") == "fall26-attention-lab-alice-b"
    assert rosters.repository("", "Bob") == "bob"
    for bad in ("../x", "a/b", "a b", "x" * 101, ".hidden-"):
        with pytest.raises(rosters.RosterError):
            rosters.check_prefix(bad)


def _folders(root, *names: str):
    for name in names:
        (root / name / "exercises").mkdir(parents=True)
    (root / "scores.csv").write_text("username,score\n")  # a gh teacher download's: no submission
    return root


def test_with_a_roster_rows_are_named_by_username_the_missing_get_a_reason_and_strangers_are_left_out(tmp_path):
    roster = roster_of(tmp_path, "Alice", "bob", "carol")
    root = _folders(tmp_path / "class", f"{PREFIX}alice", f"{PREFIX.upper()}BOB", f"{PREFIX}zoe", "fall26-other-dan")
    klass = class_list([root], roster, PREFIX)
    assert {p.name: n for p, n in klass.names.items()} == {f"{PREFIX}alice": "Alice", f"{PREFIX.upper()}BOB": "bob"}
    assert klass.everyone == ["Alice", "bob", "carol"]  # the roster is the class list
    assert klass.missing == {"carol": f"no repository (expected {PREFIX}carol)"}
    assert klass.notes == [f"not on the roster, left out: 2 ({PREFIX}zoe, fall26-other-dan)",
                           "no repository: 1 roster student(s) get an error row (carol)"]
    # a shard names only its own students without a repository
    for k in (1, 2):
        part = klass.part(Shard(k, 2))
        mine = "carol" in members(klass.everyone, Shard(k, 2))
        assert ("no repository: 1 roster student(s) get an error row (carol)" in part.notes) is mine
    assert klass.roster["bob"] == {"username": "bob", "first_name": "", "last_name": "", "email": "", "section": "",
                                   "order": 1}


def test_two_folders_for_one_student_are_that_students_error_row_never_a_guess(tmp_path):
    roster = roster_of(tmp_path, "alice")
    _folders(tmp_path / "s1", f"{PREFIX}alice")
    _folders(tmp_path / "s2", f"{PREFIX}Alice")
    klass = class_list([tmp_path / "s1" / f"{PREFIX}alice", tmp_path / "s2" / f"{PREFIX}Alice"], roster, PREFIX)
    assert klass.paths == [] and klass.missing["alice"].startswith(f"2 folders are {PREFIX}alice's repository (")


def test_a_students_shard_depends_on_the_roster_alone_never_on_which_repositories_were_cloned(tmp_path):
    users = [f"student{i:02d}" for i in range(30)]
    roster = roster_of(tmp_path, *users)
    everyone = class_list([_folders(tmp_path / "all", *(PREFIX + u for u in users))], roster, PREFIX)
    some = class_list([_folders(tmp_path / "some", *(PREFIX + u for u in users[::3]))], roster, PREFIX)
    assert some.digest == everyone.digest and len(some.missing) == 20
    for k in (1, 2, 3, 4):
        whole, part = everyone.part(Shard(k, 4)), some.part(Shard(k, 4))
        graded = sorted(part.names[p] for p in part.paths)
        assert sorted([*graded, *part.missing]) == sorted(whole.names[p] for p in whole.paths)  # the same students
        assert set(part.roster) == set(graded) | set(part.missing)
    other = class_list([tmp_path / "all"], roster, "spring27-lab-")  # another prefix: other repositories
    assert other.digest != everyone.digest and other.everyone == everyone.everyone
    fewer = class_list([tmp_path / "all"], roster_of(tmp_path, *users[:-1]), PREFIX)
    assert fewer.digest != everyone.digest


@pytest.mark.parametrize("args, said", [
    (["--roster", "ROSTER"], "--roster and --prefix go together"),
    (["--prefix", PREFIX], "--roster and --prefix go together"),
    (["--roster", "ROSTER", "--prefix", "a/b"], "Invalid value for --prefix"),
    (["--roster", "BAD", "--prefix", PREFIX], "is on the roster twice"),
    (["--scores-csv", "OUT"], "is the gradebook itself"),
])
def test_the_command_line_refuses_a_roster_without_its_prefix_and_the_like_in_one_line(tmp_path, args, said):
    roster = roster_csv(tmp_path / "roster.csv", [("alice", "", "", "", "", "", "student")])
    (tmp_path / "bad.txt").write_text("alice\nAlice\n")
    swap = {"ROSTER": str(roster), "BAD": str(tmp_path / "bad.txt"), "OUT": str(tmp_path / "grades.csv")}
    result = CliRunner().invoke(cli, ["batch", str(tmp_path), "--out", str(tmp_path / "grades.csv"),
                                      *[swap.get(a, a) for a in args]])
    assert result.exit_code == 2 and said in result.output and "Traceback" not in result.output, result.output
    assert not (tmp_path / "grades.csv").exists()


def test_the_scores_csv_has_classroom50s_columns_in_the_rosters_order_whole_points_and_the_deadlines_words():
    rows = [
        {"student": "bob", "total": 61.0, "max_score": 73, "status": "ok", "committed": "2026-11-30T17:00:00Z",
         "late": 2},
        {"student": "Alice", "total": 73, "max_score": 73, "status": "ok"},
        {"student": "carol", "total": 0, "max_score": None, "status": "error: no repository (expected x-carol)"},
        {"student": "dan", "total": 0, "max_score": None, "status": "error: late: no commit before the deadline"},
        {"student": "eve", "total": 0, "max_score": None, "status": "error: not a readable zip"},
    ]
    roster = {"Alice": {"username": "Alice", "first_name": "=cmd()", "last_name": "L", "email": "a@uni.edu",
                        "section": "A", "order": 0},
              **{u: {"username": u, "order": i} for i, u in enumerate(["bob", "carol", "dan", "eve"], 1)}}
    lines = scores.lines(rows, roster, "full")
    assert list(lines[0]) == ["username", "first_name", "last_name", "email", "section", "score", "max_score",
                              "datetime", "submission_tag", "submitted_by", "review_url", "late", "override",
                              "commits_after_deadline"]  # Classroom 50's columns in its order, then the count
    got = {line["username"]: line for line in lines}
    assert [line["username"] for line in lines] == ["Alice", "bob", "carol", "dan", "eve"]
    assert (got["bob"]["score"], got["bob"]["max_score"], got["bob"]["datetime"], got["bob"]["late"],
            got["bob"]["commits_after_deadline"]) == ("61", "73", "2026-11-30T17:00:00Z", "true", "2")  # as grades.csv
    on_time = scores.lines([{**rows[0], "late": 0}], roster, "full")[0]
    assert (on_time["late"], on_time["commits_after_deadline"]) == ("false", "0")
    assert (got["carol"]["score"], got["carol"]["max_score"]) == ("", "")  # never submitted, as Classroom 50 says
    assert (got["dan"]["score"], got["dan"]["max_score"], got["dan"]["late"]) == ("0", "73", "true")
    assert (got["eve"]["score"], got["eve"]["late"], got["Alice"]["late"]) == ("0", "", "")  # no deadline: no word
    assert {line["submission_tag"] for line in lines} == {"regrade"}
    assert {line["submission_tag"] for line in scores.lines(rows, roster, "quick")} == {"regrade-quick"}


def test_the_scores_csv_file_neutralises_formulas_and_ends_lines_as_classroom50_does(tmp_path):
    path = scores.write(tmp_path / "scores.csv", [{"student": "Alice", "total": 9, "max_score": 9, "status": "ok"}],
                        {"Alice": {"username": "Alice", "first_name": "=cmd()", "order": 0}}, "full")
    assert path.read_bytes() == (b"username,first_name,last_name,email,section,score,max_score,datetime,"
                                 b"submission_tag,submitted_by,review_url,late,override,commits_after_deadline\n"
                                 b"Alice,'=cmd(),,,,9,9,,regrade,,,,,\n")


def test_a_class_folder_named_class_is_graded_as_a_class_not_taken_for_the_hidden_command(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "class").mkdir()
    roster = roster_csv(tmp_path / "roster.csv", [("alice", "", "", "", "", "", "student")])
    result = CliRunner().invoke(cli, ["batch", "class", "--roster", str(roster)])
    assert result.exit_code == 2 and "--roster and --prefix go together" in result.output, result.output
