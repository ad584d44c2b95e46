"""The `grade` command as a student and an instructor meet it (click's CliRunner)."""
from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from grader.cli import cli

from grader.core.pieces import PIECES

from helpers import REFERENCE


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
    report = json.loads(result.stdout)  # the training's progress lines go to stderr, the report alone to stdout
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


def test_the_classroom_payload_sums_to_the_json_score(tmp_path):
    import base64

    args = ["context", "encoder", "--submission", str(REFERENCE)]  # neither trains: a full run stays quick
    as_json = json.loads(run(*args, "--format", "json").output)
    out = tmp_path / "r.b64"
    result = run(*args, "--format", "classroom", "--out", str(out))
    assert result.exit_code == 0 and "Total:" in result.output  # the table still reaches the log
    payload = json.loads(base64.b64decode(out.read_text()))
    assert payload["version"] == 1 and payload["status"] == "pass"
    assert payload["max_score"] == as_json["max_score"]
    assert sum(t["score"] for t in payload["tests"]) == as_json["score"]
    assert {"name", "status", "score", "message", "test_code", "filename", "line_no", "duration"} <= set(payload["tests"][0])


def test_gradescope_and_junit_reports_carry_every_case(lab, tmp_path):
    import xml.etree.ElementTree as ET

    sub = lab(edits={"luong": [("scores = scores / d**0.5", "scores = scores")]})
    gs, ju = tmp_path / "results.json", tmp_path / "report.xml"
    assert run("luong", "--submission", str(sub), "--quick", "--format", "gradescope", "--out", str(gs)).exit_code == 1
    assert run("luong", "--submission", str(sub), "--quick", "--format", "junit", "--out", str(ju)).exit_code == 1
    results = json.loads(gs.read_text())
    assert results["score"] == sum(t["score"] for t in results["tests"]) < sum(t["max_score"] for t in results["tests"])
    assert any(t["status"] == "failed" and "sqrt(d)" in t["output"] for t in results["tests"])
    suite = ET.parse(ju).getroot().find("testsuite")
    assert suite.get("name") == "luong" and int(suite.get("failures")) >= 1
    assert len(suite.findall("testcase")) == len(results["tests"])


def test_a_quick_run_says_so_in_every_format_and_is_refused_for_classroom(tmp_path):
    import xml.etree.ElementTree as ET

    args = ["decoder", "--submission", str(REFERENCE), "--quick"]
    note = "quick run: 1 training case(s) worth 5 points left out; this is not the grade"
    text = run(*args)
    assert text.exit_code == 0 and f"Total: 13/13 ({note})" in text.output
    assert json.loads(run(*args, "--format", "json").output)["note"] == note
    gs, ju = tmp_path / "results.json", tmp_path / "report.xml"
    run(*args, "--format", "gradescope", "--out", str(gs))
    assert note in json.loads(gs.read_text())["output"]
    run(*args, "--format", "junit", "--out", str(ju))
    assert ET.parse(ju).getroot().find("testsuite/properties/property[@name='quick']").get("value") == note
    classroom = run(*args, "--format", "classroom")
    assert classroom.exit_code == 2 and "is not a grade" in classroom.output and "Traceback" not in classroom.output


def test_a_notebook_is_reported_under_its_own_path():
    from grader import ROOT

    result = run(str(ROOT / "exercises" / "lesson.ipynb"), "context", "--quick")
    assert f"Attention lab: grading {ROOT / 'exercises' / 'lesson.ipynb'}" in result.output
    assert "attnlab-cli-" not in result.output


def test_a_training_case_shows_its_steps_accuracy_and_time_left_in_plain_lines_for_logs(tmp_path):
    import subprocess
    import sys

    from grader import ROOT

    # stderr is a pipe here, as in CI or Classroom: plain lines, a few seconds apart, then the table
    done = subprocess.run([sys.executable, "-m", "grader", "decoder", "--submission", str(REFERENCE)], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    from grader.lab.train import GRADED_STEPS

    top = GRADED_STEPS["bahdanau"]
    lines = [ln for ln in done.stderr.splitlines() if ln.startswith("decoder: training step ")]
    assert lines and all(f"/{top}, " in ln and "s left" in ln for ln in lines)
    # the last line is the end of the run, with the accuracy the case decoded there
    assert lines[-1].startswith(f"decoder: training step {top}/{top}, validation accuracy at 30 words 0.9")
    assert "Total: 18/18" in done.stdout


def test_grade_help_shows_the_options_a_student_uses_on_its_first_screen():
    result = run("--help")
    assert result.exit_code == 0
    first, _, commands = result.output.partition("Commands:")
    for option in ("--quick", "--format", "--plots", "--submission", "--out"):
        assert option in first, option
    assert ", ".join(PIECES) in first
    assert "grade exercises/lesson.ipynb" in first  # the notebook is graded too
    assert "two slow training cases" in first and "length-30 training case" not in result.output
    assert "batch" in commands and "release" in commands
