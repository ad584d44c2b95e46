"""`grade batch --release RELEASE`: the release files are the ones the release holds, not what installing it made.

An instructor who `pip install -e`'d their release folder (or ran `grade` in it) has *.egg-info/, __pycache__/ and
build/ there, which git ignores and no student repository holds: they must not flag every student as changed.
"""
from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.regrade import release_files
from grader.regrade.release_files import release_digests, release_held, verdict


def installed_and_run(release: Path, into: Path) -> Path:
    """A copy of `release` as an instructor leaves it after `pip install -e .` and a run of `grade` there."""
    folder = shutil.copytree(release, into)
    # --ignore-installed: pip would otherwise uninstall the attention-lab this test runs from to put the copy there
    done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "--ignore-installed", "--no-warn-script-location", "--prefix", str(into.parent / "prefix"),
                           "-e", str(folder)],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    made = {"attention_lab.egg-info/PKG-INFO": "Name: attention-lab\n", "attention_lab.egg-info/SOURCES.txt": "grader/cli/__init__.py\n",
            "grader/__pycache__/cli.cpython-311.pyc": "\0", "grader/runner/__pycache__/report.cpython-311.pyc": "\0",
            "build/lib/grader/cli/__init__.py": "", ".pytest_cache/README.md": ""}  # older setuptools, grade, pytest
    for rel, text in made.items():
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text(text)
    return folder


def student_repository(release: Path, into: Path) -> Path:
    """A student's clone of the template: the release's files (no byproducts: other tests run grade in the release
    folder, which caches bytecode there, and a clone holds none), their own .git."""
    shutil.copytree(release, into, ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info", ".pytest_cache"))
    (into / ".git").mkdir()
    (into / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    return into


def test_an_unchanged_repository_reads_unchanged_when_the_release_folder_was_installed_editable(release, tmp_path,
                                                                                             monkeypatch):
    rel, _ = release
    repo = student_repository(rel, tmp_path / "alice")
    folder = installed_and_run(rel, tmp_path / "release")
    home = tmp_path / "home"  # the instructor's own global excludes are theirs, not the release's: not read
    home.mkdir()
    (home / "ignored").write_text("*.bin\n*.yml\n")
    (home / ".gitconfig").write_text(f"[core]\n\texcludesFile = {(home / 'ignored').as_posix()}\n")
    monkeypatch.setenv("HOME", str(home))
    held = release_held(folder)
    assert "grader/cli/__init__.py" in held and ".github/workflows/classroom.yml" in held and "grader/sealed.bin" in held
    assert not [f for f in held if "egg-info" in f or "__pycache__" in f or f.startswith(("build/", ".pytest_cache/"))]
    v = verdict(repo, release_digests(folder))
    assert (v.cell, list(v.files)) == ("unchanged", [])


def test_without_git_the_byproducts_are_left_out_by_name_and_a_real_change_is_still_flagged(release, tmp_path,
                                                                                            monkeypatch):
    rel, _ = release
    folder = installed_and_run(rel, tmp_path / "release")
    repo = student_repository(rel, tmp_path / "bob")
    with_git = release_held(folder)
    monkeypatch.setenv("PATH", str(tmp_path / "no-git-here"))
    assert release_held(folder) == sorted(with_git)  # the same files, told apart by name
    digests = release_digests(folder)
    v = verdict(repo, digests)
    assert (v.cell, list(v.files)) == ("unchanged", [])
    with (repo / ".github" / "workflows" / "classroom.yml").open("a") as f:
        f.write("# posts full marks\n")
    (repo / "grader" / "__pycache__").mkdir(exist_ok=True)
    (repo / "grader" / "mine.py").write_text("")
    assert list(verdict(repo, digests).files) == ["+grader/mine.py", ".github/workflows/classroom.yml"]


@pytest.mark.parametrize("ignored", ["notes.egg-info/x", "grader/__pycache__/a.pyc", "build/x", "dist/a.whl",
                                     ".venv/bin/python", "a/b/__pycache__/c.pyc"])
def test_a_byproduct_is_told_apart_by_a_folder_of_its_path(ignored):
    assert release_files._byproduct(ignored)
    assert not release_files._byproduct(ignored.rsplit("/", 1)[-1])  # a file of that name is a release file


def test_bytecode_committed_under_the_grader_reads_as_a_change_it_is_one(release, tmp_path):
    rel, _ = release
    repo = student_repository(rel, tmp_path / "carol")
    digests = release_digests(rel)
    assert verdict(repo, digests).cell == "unchanged"
    planted = repo / "grader" / "runner" / "__pycache__" / "report.cpython-311.pyc"
    planted.parent.mkdir(parents=True)
    planted.write_bytes(b"\0" * 16)  # an unchecked-hash .pyc would run here in place of report.py
    (repo / "datasets" / "extra.tsv").write_text("a\tb\n")
    v = verdict(repo, digests)
    assert v.cell != "unchanged" and list(v.files) == ["+datasets/extra.tsv",
                                                       "+grader/runner/__pycache__/report.cpython-311.pyc"]
