"""Gradescope's upload read by the rule every other route follows: beside lesson.ipynb, a piece whose .py file
is still the untouched stub is graded from its notebook cell (notebook.combine); an edited .py file wins.

Each test hands the same folder to `grade`, `grade batch` and Gradescope's run_autograder (`gradescope.run`,
as tests/release/test_gradescope.py drives it end to end) and checks that all three give the same score."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from grader.lesson import notebook
from grader.verbs import gradescope

from helpers import QUICK

from .harness import CONTEXT_SOLUTION, EXERCISES, FULL, ZEROS, run_batch, run_cli

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PIECES = ["context", "additive"]


def upload(where: Path, **py: str) -> Path:
    """What a student drags into Gradescope: the stub .py files (or `py`'s texts), and a solved lesson.ipynb."""
    where.mkdir(parents=True)
    for path in EXERCISES.glob("*.py"):
        if path.name != "__init__.py":
            shutil.copyfile(path, where / path.name)
    for stem, text in py.items():
        (where / f"{stem}.py").write_text(text)
    notebook.write(where / notebook.NOTEBOOK.name, source="reference")
    return where


def gradescope_score(folder: Path, root: Path) -> dict:
    """gradescope.run over `folder` as /autograder/submission; the results it wrote."""
    shutil.copytree(folder, root / "submission")
    results = gradescope.run(root, pieces=PIECES, limits=QUICK)
    assert (root / "results" / "results.json").is_file()
    return results


def scores(folder: Path, tmp_path: Path, monkeypatch) -> tuple[int, int, int]:
    """(grade's, the batch's, Gradescope's) total over PIECES for `folder`."""
    cli = run_cli(folder, PIECES, tmp_path).report["score"]
    row = run_batch([folder], PIECES, tmp_path / "batch", monkeypatch)[folder.name]
    scope = gradescope_score(folder, tmp_path / "autograder")
    return cli, int(row["total"]), scope["score"]


def test_stub_files_beside_a_solved_notebook_earn_the_notebooks_marks_on_gradescope_as_everywhere(tmp_path,
                                                                                                   monkeypatch):
    folder = upload(tmp_path / "alice")
    want = FULL["context"] + FULL["additive"]
    assert scores(folder, tmp_path, monkeypatch) == (want, want, want)


def test_an_edited_file_beside_a_solved_notebook_is_graded_from_the_file_on_gradescope_as_everywhere(tmp_path,
                                                                                                    monkeypatch):
    # an answer of the right shape worth nothing, in place of the context stub: the file is graded, not the cell
    wrong = (EXERCISES / "context.py").read_text().replace("    raise NotImplementedError", ZEROS + "    raise NotImplementedError", 1)
    assert wrong != (EXERCISES / "context.py").read_text() and CONTEXT_SOLUTION not in wrong
    folder = upload(tmp_path / "bob", context=wrong)
    got = scores(folder, tmp_path, monkeypatch)
    assert len(set(got)) == 1 and got[0] < FULL["context"] + FULL["additive"], got
    assert got[0] >= FULL["additive"]  # the additive stub still earns its notebook cell's marks
