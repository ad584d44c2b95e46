"""What Gradescope is given when the grader itself fails: `output` alone, never a score (docs/routes.md), whatever
the failure; a submission that is not one is the student's, and scores 0 with the reason."""
from __future__ import annotations

import json

import pytest

from grader.runner import schedule
from grader.verbs import gradescope

from helpers import REFERENCE


@pytest.fixture
def root(tmp_path):
    (tmp_path / "submission").mkdir()
    for path in REFERENCE.glob("*.py"):
        (tmp_path / "submission" / path.name).write_text(path.read_text())
    return tmp_path


@pytest.mark.parametrize("failure", [RuntimeError("the judges' server went away"), KeyError("pieces")])
def test_an_unexpected_failure_of_the_grader_posts_its_reason_and_no_score(root, monkeypatch, failure):
    def broken(**_):
        raise failure

    monkeypatch.setattr(schedule, "grade", broken)
    results = gradescope.run(root)
    assert "score" not in results and "tests" not in results, results
    assert type(failure).__name__ in results["output"] and "not the submission's fault" in results["output"]
    assert json.loads((root / "results" / "results.json").read_text()) == results


def test_an_upload_with_none_of_the_lab_files_scores_zero_with_the_reason(tmp_path):
    (tmp_path / "submission").mkdir()
    (tmp_path / "submission" / "notes.txt").write_text("hello")
    results = gradescope.run(tmp_path)
    assert results["score"] == 0 and results["output"].startswith("Not graded:")
