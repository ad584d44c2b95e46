"""What the second hostile pass on the routes found (a notebook link, a checkpoint notebook, a notebook no check
foresaw): every route reads a submission by the same rules, and none of them crashes on it."""
from __future__ import annotations

import json
import shutil

import nbformat
from click.testing import CliRunner

from grader.cli import cli
from grader.lesson import notebook
from grader.verbs import gradescope

from helpers import EXERCISES, REFERENCE


def test_grade_refuses_a_linked_notebook_as_the_regrade_and_gradescope_do(tmp_path):
    ex = tmp_path / "exercises"
    shutil.copytree(EXERCISES, ex)
    mine = notebook.write(tmp_path / "mine.ipynb", source="reference")
    (ex / "lesson.ipynb").unlink()
    (ex / "lesson.ipynb").symlink_to(mine)
    result = CliRunner().invoke(cli, ["context", "--quick", "--submission", str(ex)])
    assert result.exit_code == 2 and "is a symbolic link" in result.output, result.output
    (tmp_path / "linked").symlink_to(ex)
    result = CliRunner().invoke(cli, ["context", "--quick", "--submission", str(tmp_path / "linked")])
    assert result.exit_code == 2 and "is a symbolic link" in result.output, result.output


def test_gradescope_grades_lesson_ipynb_never_a_jupyter_checkpoint_of_it(tmp_path):
    upload = tmp_path / "submission"
    (upload / ".ipynb_checkpoints").mkdir(parents=True)
    notebook.write(upload / "lesson.ipynb", source="reference")
    notebook.write(upload / ".ipynb_checkpoints" / "lesson-checkpoint.ipynb", source="stubs")
    notebook.write(upload / "Untitled.ipynb", source="stubs")
    folder = gradescope.find(upload, tmp_path / "scratch", [])
    assert (folder / "context.py").read_text().count("NotImplementedError") == 0


def test_a_notebook_no_check_foresaw_leaves_the_py_files_graded_with_one_line(tmp_path):
    ex = tmp_path / "exercises"
    shutil.copytree(EXERCISES, ex)
    shutil.copyfile(REFERENCE / "context.py", ex / "context.py")
    v3 = {"nbformat": 3, "nbformat_minor": 0, "metadata": {}, "cells": [],
          "worksheets": [{"cells": [{"cell_type": "code", "input": "x = 1", "metadata": [], "outputs": [],
                                     "language": "python"}], "metadata": {}}]}
    (ex / "lesson.ipynb").write_text(json.dumps(v3))
    result = CliRunner().invoke(cli, ["context", "--quick", "--submission", str(ex)])
    assert "Traceback" not in result.output and "graded: the .py files only" in result.output, result.output
    assert "context       9/9" in result.output, result.output
    assert nbformat  # the notebook extras are installed where this runs
