"""`grade batch --before DATETIME`: each repository graded at its last commit before the deadline."""
from __future__ import annotations

import csv
import json
import os
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from grader import ROOT
from grader.cli import cli
from grader.core.files import Refused
from grader.regrade import deadline

from helpers import REFERENCE

DEADLINE = "2026-12-01T23:59:00-05:00"  # 2026-12-02T04:59:00Z
pytestmark = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


def commit(repo, when: str, files: dict) -> str:
    """Commit `files` (name -> source path or text) at `when` (ISO time), as the student's machine dates it."""
    for name, what in files.items():
        path = repo / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(what.read_bytes() if hasattr(what, "read_bytes") else what.encode())
    env = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when, "GIT_AUTHOR_NAME": "s",
           "GIT_AUTHOR_EMAIL": "s@example.com", "GIT_COMMITTER_NAME": "s", "GIT_COMMITTER_EMAIL": "s@example.com",
           "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}
    run = lambda *a: subprocess.run(["git", *a], cwd=repo, env=env, check=True, capture_output=True, text=True)  # noqa: E731
    if not (repo / ".git").exists():
        run("init", "-q", "-b", "main")
    run("add", "-A")
    run("commit", "-q", "-m", f"work of {when}")
    return run("rev-parse", "HEAD").stdout.strip()


def test_a_deadline_without_a_time_zone_is_refused_since_it_would_cut_at_another_instant_elsewhere():
    with pytest.raises(ValueError, match="has no time zone"):
        deadline.parse("2026-12-01T23:59")
    assert deadline.iso(deadline.parse(DEADLINE)) == DEADLINE  # written in the zone it was given in
    assert deadline.iso(deadline.parse("2026-12-02T04:59:00+00:00")) == "2026-12-02T04:59:00Z"
    result = CliRunner().invoke(cli, ["batch", ".", "--before", "tomorrow"])
    assert result.exit_code == 2 and "Invalid value for --before" in result.output


def test_the_regrade_grades_the_last_commit_before_the_deadline_and_says_what_came_later(tmp_path, monkeypatch):
    from grader.core.pieces import PIECES
    from grader.verbs import batch as verb

    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})
    stub, solved = ROOT / "exercises" / "context.py", REFERENCE / "context.py"
    klass = tmp_path / "attention-lab-submissions"
    ada = klass / "attention-lab-ada"
    commit(ada, "2026-11-28T10:00:00Z", {"exercises/context.py": stub})
    on_time = commit(ada, "2026-12-01T23:58:00-05:00", {"exercises/context.py": solved})
    commit(ada, "2026-12-02T05:00:00Z", {"exercises/context.py": "raise SystemExit('late and broken')\n"})
    commit(ada, "2026-12-03T09:00:00Z", {"notes.txt": "later still"})
    bob = klass / "attention-lab-bob"  # everything after the deadline: nothing to grade
    commit(bob, "2026-12-02T06:00:00Z", {"exercises/context.py": solved})
    cy = klass / "attention-lab-cy"  # the working tree is not what is graded: the commit is
    cy_sha = commit(cy, "2026-11-30T12:00:00+01:00", {"exercises/context.py": stub})
    (cy / "exercises" / "context.py").write_bytes(solved.read_bytes())  # uncommitted
    dee = klass / "attention-lab-dee"  # not a repository at all
    shutil.copytree(REFERENCE, dee / "exercises")
    (dee / ".git").mkdir()
    out = tmp_path / "grades.csv"
    result = CliRunner().invoke(cli, ["batch", str(klass), "--quick", "-j", "2", "--out", str(out),
                                      "--before", DEADLINE])
    assert result.exit_code == 0, result.output
    assert "graded 2 submission(s), 1 late, 1 unreadable; gradebook:" in result.output  # bob is late, not unreadable
    rows = {r["student"]: r for r in csv.DictReader(out.open())}
    ada_row = rows["attention-lab-ada"]
    assert ada_row["commit"] == on_time and ada_row["committed"] == "2026-12-01T23:58:00-05:00" and ada_row["late"] == "2"
    assert ada_row["total"] == ada_row["max_score"] != "0"  # the solved commit, not the broken one after it
    assert ada_row["status"] == "ok: 2 commit(s) after the deadline not graded"
    assert rows["attention-lab-bob"]["status"].startswith("error: late: no commit before the deadline "
                                                          f"{DEADLINE} (the first is from 2026-12-02T01:00:00-05:00)")
    assert rows["attention-lab-bob"]["total"] == "0"
    assert rows["attention-lab-cy"]["commit"] == cy_sha and rows["attention-lab-cy"]["total"] == "0"
    assert rows["attention-lab-cy"]["late"] == "0" and rows["attention-lab-cy"]["status"] == "ok"
    assert rows["attention-lab-dee"]["status"].startswith("error: git cannot read this repository")
    report = json.loads((tmp_path / "grades-reports" / "attention-lab-ada.json").read_text())
    assert report["commit"] == on_time and report["late"] == 2
    assert json.loads((tmp_path / "grades-manifest.json").read_text())["before"] == DEADLINE
    assert (tmp_path / "grades-code" / "attention-lab-ada" / "context.py").read_bytes() == solved.read_bytes()


def test_git_never_runs_the_repositorys_own_hooks_or_configuration(tmp_path):
    repo = tmp_path / "attention-lab-eve"
    commit(repo, "2026-11-30T12:00:00Z", {"exercises/context.py": REFERENCE / "context.py"})
    planted = tmp_path / "ran"
    hook = f"#!/bin/sh\ntouch {planted}\n"
    for name in ("post-checkout", "reference-transaction", "pre-auto-gc"):
        (repo / ".git" / "hooks" / name).write_text(hook)
        (repo / ".git" / "hooks" / name).chmod(0o755)
    with (repo / ".git" / "config").open("a") as f:  # what a repository handed in as a folder may carry
        f.write(f"[core]\n\tfsmonitor = touch {planted}\n\tsshCommand = touch {planted}\n"
                f"[uploadpack]\n\tpackObjectsHook = touch {planted}\n")
    folder, found = deadline.checkout(repo, deadline.parse(DEADLINE), tmp_path / "work")
    assert (folder / "exercises" / "context.py").read_bytes() == (REFERENCE / "context.py").read_bytes()
    assert found.late == 0 and not planted.exists()


# --- issue 32 §1: times are shown in the deadline's zone; the cut compares instants ----------------------------

MARCH = "2026-03-01T23:59:00-05:00"  # 2026-03-02T04:59:00Z


def test_commit_times_are_written_in_the_deadlines_zone_and_the_cut_holds_across_zones(tmp_path):
    repo = tmp_path / "attention-lab-fay"
    commit(repo, "2026-03-01T09:00:00-05:00", {"exercises/context.py": "# first\n"})
    # March 2 on the student's clock, 21:00 on the deadline's: on time
    on_time = commit(repo, "2026-03-02T03:00:00+01:00", {"exercises/context.py": "# on time\n"})
    # 23:59:30 on the student's clock, 00:59:30 on March 2 on the deadline's: late
    commit(repo, "2026-03-01T23:59:30-06:00", {"exercises/context.py": "# late\n"})
    _, found = deadline.checkout(repo, deadline.parse(MARCH), tmp_path / "work")
    assert (found.sha, found.time, found.late) == (on_time, "2026-03-01T21:00:00-05:00", 1)
    _, found = deadline.checkout(repo, deadline.parse("2026-03-02T04:59:00Z"), tmp_path / "utc")
    assert (found.sha, found.time, found.late) == (on_time, "2026-03-02T02:00:00Z", 1)  # a deadline in UTC: Z

    late = tmp_path / "attention-lab-gus"
    commit(late, "2026-03-02T00:00:00-05:00", {"exercises/context.py": "# a minute late\n"})
    with pytest.raises(Refused) as refused:
        deadline.checkout(late, deadline.parse(MARCH), tmp_path / "late")
    assert str(refused.value) == ("late: no commit before the deadline 2026-03-01T23:59:00-05:00 (the first is from "
                                  "2026-03-02T00:00:00-05:00); 1 commit(s) not graded")

