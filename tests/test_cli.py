"""The `grade` command as a student and an instructor meet it (click's CliRunner)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from conftest import REFERENCE
from grader.cli import cli


def run(*args: str):
    return CliRunner().invoke(cli, list(args))


@pytest.mark.parametrize("args, says", [
    (["--submission", "no/such/folder"], "does not exist"),
    (["--submission", str(REFERENCE / "encoder.py")], "is a file"),
    (["nosuchpiece", "--submission", str(REFERENCE)], "no piece named nosuchpiece"),
])
def test_a_usage_error_is_one_line_and_exit_2(args, says):
    result = run(*args)
    assert result.exit_code == 2
    assert says in result.output
    assert "Traceback" not in result.output


def test_an_empty_folder_is_a_usage_error(tmp_path):
    result = run("--submission", str(tmp_path))
    assert result.exit_code == 2 and "holds none of the lab's files" in result.output


def test_json_reports_score_max_score_and_pieces_and_exit_0_when_all_pass():
    result = run("context", "luong", "--submission", str(REFERENCE), "--format", "json")
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)
    assert report["score"] == report["max_score"] > 0
    assert [p["name"] for p in report["pieces"]] == ["context", "luong"]
    case = report["pieces"][0]["cases"][0]
    assert {"name", "passed", "points", "message"} <= set(case)


def test_a_failing_piece_exits_1_with_its_hint(lab):
    sub = lab(edits={"luong": [("scores = scores / d**0.5", "scores = scores")]})
    result = run("luong", "--submission", str(sub))
    assert result.exit_code == 1
    assert "divide the dot products by sqrt(d)" in result.output


def test_a_notebook_that_is_not_json_is_a_usage_error(tmp_path):
    bad = tmp_path / "lesson.ipynb"
    bad.write_text("{not json")
    result = run(str(bad))
    assert result.exit_code == 2 and "is not a valid notebook" in result.output and "Traceback" not in result.output


def test_a_notebook_is_graded_by_its_tagged_cells():
    from grader import ROOT

    result = run(str(ROOT / "exercises" / "lesson.ipynb"), "context", "--quick")
    assert result.exit_code == 1
    assert "not implemented yet (piece 'context'" in result.output
