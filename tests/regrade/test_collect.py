"""`grade batch collect DEST --org ORG --prefix PREFIX [--roster FILE]`: the class cloned with the GitHub CLI's
ordinary commands (`gh repo clone`, `gh repo list`), here through the stand-in gh (fakegh/gh) serving a folder of
local git repositories. No grading: each test takes a second or two."""
from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from click.testing import CliRunner

from grader.cli import cli

from .github import base_env, commit, commits, roster_csv

ORG, PREFIX = "school", "fall26-attention-lab-"
needs_git = pytest.mark.skipif(shutil.which("git") is None, reason="needs git")


@pytest.fixture
def github(tmp_path):
    """ORG's repositories: alice's (two commits) and Bob's (named in lowercase, as Classroom 50 names them), the
    template, a repository of another assignment, and one of a student who is not on the roster (zoe). Carol is
    on the roster and never accepted: no repository."""
    repos = tmp_path / "github"
    for name, n in (("alice", 2), ("bob", 1), ("zoe", 1)):
        for i in range(n):
            commit(repos / ORG / f"{PREFIX}{name}", f"2026-11-2{i}T12:00:00Z", {"exercises/context.py": f"# {i}\n"})
    commit(repos / ORG / "fall26-attention-lab", "2026-11-01T12:00:00Z", {"README.md": "template\n"})
    commit(repos / ORG / "fall26-other-lab-alice", "2026-11-01T12:00:00Z", {"README.md": "another lab\n"})
    roster = roster_csv(tmp_path / "roster.csv", [
        ("alice", "Alice", "A", "alice@uni.edu", "A", "1", "student"),
        ("Bob", "Bob", "B", "bob@uni.edu", "B", "2", ""),  # an empty role is a student
        ("carol", "Carol", "C", "carol@uni.edu", "A", "3", "student"),
        ("prof", "P", "Q", "prof@uni.edu", "", "4", "teacher"),  # never cloned
    ])
    env = {**base_env(tmp_path / "home"), "FAKEGH_REPOS": str(repos), "GH_TOKEN": "not-a-real-token",
           "FAKEGH_LOG": str(tmp_path / "gh.log")}
    return tmp_path, roster, env


def collect(env, *args):
    return CliRunner().invoke(cli, ["batch", "collect", *map(str, args)], env=env)


@needs_git
def test_each_roster_students_repository_is_cloned_whole_and_the_missing_are_listed_at_the_end_one_a_line(github):
    tmp, roster, env = github
    dest = tmp / "class"
    result = collect(env, dest, "--org", ORG, "--prefix", PREFIX, "--roster", roster)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dest.iterdir()) == [f"{PREFIX}alice", f"{PREFIX}bob"]
    assert commits(dest / f"{PREFIX}alice") == 2  # the whole history: --before reads it
    lines = result.output.splitlines()
    assert lines[-1] == f"no repository: carol (expected {ORG}/{PREFIX}carol)"
    assert (f"{dest}: 2 cloned, 0 already there, 1 without a repository, 0 left out as too large, 0 not cloned, "
            "of 3 student(s)") in lines
    calls = (tmp / "gh.log").read_text().splitlines()
    assert calls[0] == "gh auth status"
    assert sorted(c.split()[3] for c in calls[1:]) == [f"{ORG}/{PREFIX}{u}" for u in ("alice", "bob", "carol")]
    assert all(c.startswith("gh repo clone ") for c in calls[1:])  # prof, a teacher, is not a student


@needs_git
def test_a_rerun_keeps_the_clones_already_there_and_clones_only_what_was_missing(github):
    tmp, roster, env = github
    dest = tmp / "class"
    assert collect(env, dest, "--org", ORG, "--prefix", PREFIX, "--roster", roster).exit_code == 0
    (dest / f"{PREFIX}alice" / "mine.txt").write_text("kept\n")
    commit(tmp / "github" / ORG / f"{PREFIX}carol", "2026-11-25T12:00:00Z", {"exercises/context.py": "# late\n"})
    result = collect(env, dest, "--org", ORG, "--prefix", PREFIX, "--roster", roster)
    assert result.exit_code == 0, result.output
    assert "1 cloned, 2 already there, 0 without a repository" in result.output
    assert (dest / f"{PREFIX}alice" / "mine.txt").read_text() == "kept\n"
    assert sorted(p.name for p in dest.iterdir()) == [f"{PREFIX}{u}" for u in ("alice", "bob", "carol")]


@needs_git
def test_a_clone_that_fails_is_named_leaves_no_half_clone_and_the_exit_code_is_1(github):
    tmp, roster, env = github
    dest = tmp / "class"
    result = collect({**env, "FAKEGH_FAIL": f"{PREFIX}bob"}, dest, "--org", ORG, "--prefix", PREFIX, "--roster", roster)
    assert result.exit_code == 1
    assert f"not cloned: Bob ({ORG}/{PREFIX}bob): failed to run git: exit status 128" in result.output.splitlines()
    assert f"no repository: carol (expected {ORG}/{PREFIX}carol)" in result.output.splitlines()
    assert sorted(p.name for p in dest.iterdir()) == [f"{PREFIX}alice"]  # no .partial folder left behind
    assert "Traceback" not in result.output


@needs_git
def test_without_a_roster_every_repository_of_the_org_starting_with_the_prefix_is_cloned(github):
    tmp, _, env = github
    dest = tmp / "class"
    result = collect(env, dest, "--org", ORG, "--prefix", PREFIX)
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in dest.iterdir()) == [f"{PREFIX}{u}" for u in ("alice", "bob", "zoe")]
    assert f"gh repo list {ORG} --limit 10000 --json name" in (tmp / "gh.log").read_text().splitlines()


@needs_git
@pytest.mark.parametrize("change, said", [
    ({"PATH": "/nonexistent"}, "the GitHub CLI (gh) is not on PATH"),
    ({"GH_TOKEN": ""}, "gh is not logged in to GitHub (You are not logged into any GitHub hosts."),
])
def test_gh_missing_or_not_logged_in_is_one_line_and_nothing_is_cloned(github, change, said):
    tmp, roster, env = github
    result = collect({**env, **change}, tmp / "class", "--org", ORG, "--prefix", PREFIX, "--roster", roster)
    assert result.exit_code == 1 and "Traceback" not in result.output
    assert result.output.startswith(f"Error: {said}") and len(result.output.strip().splitlines()) == 1
    assert not (tmp / "class").exists()


@needs_git
@pytest.mark.parametrize("args, said", [
    (["--org", ORG, "--prefix", "spring27-lab-", "--roster", "ROSTER"], "none of the roster's 3 students"),
    (["--org", ORG, "--prefix", "spring27-lab-"], f"no repository of {ORG} starts with 'spring27-lab-'"),
    (["--org", "nobody", "--prefix", PREFIX], "gh repo list nobody failed: GraphQL: Could not resolve"),
    (["--org", "no/such", "--prefix", PREFIX], "is not a GitHub organization's"),
    (["--org", ORG, "--prefix", "../x", "--roster", "ROSTER"], "is not the start of a repository name"),
    (["--org", ORG, "--roster", "ROSTER"], "--prefix is needed"),
])
def test_an_org_or_prefix_that_finds_no_class_is_one_line_without_a_traceback(github, args, said):
    tmp, roster, env = github
    result = collect(env, tmp / "class", *[str(roster) if a == "ROSTER" else a for a in args])
    assert result.exit_code in (1, 2) and said in result.output and "Traceback" not in result.output, result.output
    assert not any((tmp / "class").glob("*")) if (tmp / "class").exists() else True


def test_nothing_in_the_repository_names_the_retired_classroom_cli_but_to_say_it_is_retired():
    """GitHub Classroom was retired on 2026-08-28 (410 Gone): no command, workflow or page may still run its CLI."""
    from grader import ROOT

    listed = subprocess.run(["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT,
                            capture_output=True, check=False)
    if listed.returncode:
        pytest.skip("not a git checkout")
    found = []
    for name in sorted(set(listed.stdout.decode().split("\0")) - {""}):
        path = ROOT / name
        if not path.is_file() or path.is_symlink():
            continue
        text = path.read_bytes().decode("utf-8", "replace")
        found += [f"{name}: {line.strip()}" for line in text.splitlines()
                  if re.search(r"gh[ -]classroom", line) and "retired" not in line]
    assert not found, "\n".join(found)


# --- issue 31 §3: one huge repository is left out, flagged, and the rest are graded --------------------------

@needs_git
def test_a_clone_over_the_cap_is_left_as_a_placeholder_said_in_a_line_and_kept_so_on_a_rerun(github):
    import os

    tmp, roster, env = github
    commit(tmp / "github" / ORG / f"{PREFIX}bob", "2026-11-23T12:00:00Z", {"data.bin": os.urandom(3 << 20).hex()})
    dest = tmp / "class"
    env = {**env, "ATTNLAB_MAX_REPO_MB": "2"}
    for rerun in range(2):  # the rerun keeps the placeholder, and says so again
        result = collect(env, dest, "--org", ORG, "--prefix", PREFIX, "--roster", roster)
        assert result.exit_code == 0, result.output
        said = [line for line in result.output.splitlines() if line.startswith("too large: ")]
        assert len(said) == 1 and said[0].startswith(f"too large: Bob ({ORG}/{PREFIX}bob): not graded: its clone is ")
        assert "over the cap of 2 MB a repository (ATTNLAB_MAX_REPO_MB)" in said[0]
        assert sorted(p.name for p in dest.iterdir()) == [f"{PREFIX}alice", f"{PREFIX}bob"]
        assert [p.name for p in (dest / f"{PREFIX}bob").iterdir()] == [".attnlab-too-large.json"]
        assert commits(dest / f"{PREFIX}alice") == 2
        # every student in one count: Bob is neither cloned nor kept, and not lost from the sum either
        assert f"{dest}: {1 - rerun} cloned, {rerun} already there, 1 without a repository, 1 left out as too large, 0 not " \
               "cloned, of 3 student(s)" in result.output.splitlines(), result.output
    assert sum(p.stat().st_size for p in (dest / f"{PREFIX}bob").rglob("*")) < 1000
