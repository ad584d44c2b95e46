"""`grade release student`: what the lab generates ships as generated, never as the instructor's working tree has it.

An instructor tries their own solution in exercises/additive.py, runs the notebook, forgets `grade manifest` after a
case changed: the release still ships the stubs, the clean notebook and the collected manifest, and says in one line
that the working tree's versions were not shipped.
"""
from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from grader import ROOT
from grader.lesson import notebook, stubs
from grader.release import build, generated
from grader.verbs import release


@pytest.fixture
def working_tree(tmp_path, monkeypatch) -> Path:
    """A copy of the instructor's checkout (its tracked files, as they are now) in a git repository of its own, which
    `grade release student` builds from; edit it freely."""
    root = tmp_path / "checkout"
    for rel in build.tracked_files():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ROOT / rel, root / rel)
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    monkeypatch.setattr(build, "ROOT", root)
    return root


def exercises_generated() -> dict[str, str]:
    files = {f"exercises/{p.name}": text for p, text in stubs.expected().items()}
    files["exercises/lesson.ipynb"] = notebook.dumps(notebook.build("stubs"))
    return files


def test_a_solved_exercise_a_run_notebook_and_a_stale_manifest_ship_as_generated_and_the_release_says_so(
        working_tree, tmp_path):
    (working_tree / "exercises" / "additive.py").write_text((ROOT / "reference" / "additive.py").read_text())
    nb = json.loads((working_tree / "exercises" / "lesson.ipynb").read_text())
    nb["cells"][1]["outputs"] = [{"output_type": "stream", "name": "stdout", "text": "ran here\n"}]
    (working_tree / "exercises" / "lesson.ipynb").write_text(json.dumps(nb))
    stale = json.loads((working_tree / "grader" / "cases" / "manifest.json").read_text())
    stale["additive"][0]["points"] += 5
    (working_tree / "grader" / "cases" / "manifest.json").write_text(json.dumps(stale))
    (working_tree / "exercises" / "scratch.py").write_text("from .additive import BahdanauAttention\n")
    subprocess.run(["git", "add", "exercises/scratch.py"], cwd=working_tree, check=True)

    out = tmp_path / "release"
    _, said = release.build_student(out)
    for rel, text in exercises_generated().items():
        assert (out / rel).read_text() == text, rel
    assert sorted(p.name for p in (out / "exercises").iterdir()) == sorted(Path(r).name for r in exercises_generated())
    assert (out / "grader" / "cases" / "manifest.json").read_text() == (ROOT / "grader" / "cases" / "manifest.json").read_text()
    lines = said.splitlines()
    assert len(lines) == 2 and lines[0].startswith("sealing key: a new one"), said
    note = lines[1]
    assert note.startswith("note: the release ships its generated files as reference/")
    assert "exercises/additive.py, exercises/lesson.ipynb, grader/cases/manifest.json differ here" in note
    assert "those edits are not in the release" in note and "exercises/scratch.py is not generated and not shipped" in note
    for unchanged in ("exercises/context.py", "grader/public/manifest.json", "datasets/toy_translation/train.tsv"):
        assert unchanged not in note


def test_a_working_tree_that_holds_what_reference_generates_ships_the_same_files_and_says_nothing_more(
        working_tree, tmp_path):
    out = tmp_path / "release"
    _, said = release.build_student(out)
    assert len(said.splitlines()) == 1, said
    for rel in [*exercises_generated(), *generated.MANIFESTS, "datasets/toy_translation/test.tsv"]:
        assert (out / rel).read_bytes() == (working_tree / rel).read_bytes(), rel


def test_the_classroom50_variant_can_build_with_student_alone_and_take_the_line_too(working_tree, tmp_path):
    (working_tree / "exercises" / "context.py").write_text((ROOT / "reference" / "context.py").read_text())
    built, key = release.student(tmp_path / "plain")  # student(out, key) as before: nothing said, the stub shipped
    assert (built / "exercises" / "context.py").read_text() == exercises_generated()["exercises/context.py"]
    notes: list[str] = []
    release.student(tmp_path / "noted", key, notes)
    assert len(notes) == 1 and "exercises/context.py differ here" in notes[0]


def test_a_generator_that_fails_is_one_line_and_leaves_the_release_folder_unwritten(tmp_path, monkeypatch):
    def broken() -> dict[str, bytes]:
        raise generated.GenerateError("grader/cases/manifest.json cannot be rebuilt: collecting its cases failed (x)")

    monkeypatch.setattr(generated, "generated", broken)
    with pytest.raises(release.ReleaseError, match=r"^grader/cases/manifest.json cannot be rebuilt"):
        release.student(tmp_path / "release")
    assert not (tmp_path / "release").exists()
