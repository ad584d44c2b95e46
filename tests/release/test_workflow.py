"""The per-push workflow (.github/workflows/classroom.yml): its steps' scripts run as shell scripts against a
student release, and the workflow linted as the regrade's is (GitHub's schema, zizmor)."""
from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from classroom import WORKFLOW, report_file, run_grading_step, run_reporter_step, steps, summary_file
from workflow_lint import schema_findings, zizmor_findings

yaml = pytest.importorskip("yaml")  # the workflow is YAML
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the workflow's steps run under bash")

# the majors current in December 2026: checkout and setup-python v7 (foundation50/classroom50's autograde-runner
# uses both), upload-artifact v7 (v7.0.1; v8 exists for download-artifact only); each runs on node24
ACTIONS = {"Checkout code": "actions/checkout@v7", "Set up Python": "actions/setup-python@v7",
           "Upload the JSON report": "actions/upload-artifact@v7"}
# what a student's exception can say: a link, an image, HTML, an autolink, a mention, backticks and pipes
HOSTILE = ("[your grade is 73/73](https://evil.example/x) ![img](https://evil.example/i.png) "
           "<img src=x onerror=alert(1)> <a href='https://evil.example'>here</a> www.evil.example @octocat "
           "**bold** `tick` ``two`` | cell \\| end \\")


def grading_env(key: str | None) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNLAB_", "PYTHON", "PYTEST", "GITHUB_"))}
    env.update(ATTNLAB_SEAL_KEY=key or "")  # an unset secret arrives as ""
    return env


def run_grade_step(rel: Path, tmp: Path, key: str | None) -> tuple[subprocess.CompletedProcess, str]:
    """The step's script in the release (only the context piece, to keep it quick); returns the run and what it
    wrote to GITHUB_OUTPUT. `release` is the folder's fixture (release/conftest.py)."""
    return run_grading_step(rel, tmp, sys.executable, ["context"], grading_env(key), timeout=300)


def outside_code_spans(markdown: str) -> str:
    """The Markdown with its inline code spans (any fence length) taken out."""
    return re.sub(r"(`+) .*? \1(?!`)", "", markdown)


@pytest.fixture(scope="module")
def graded(release, tmp_path_factory) -> tuple[subprocess.CompletedProcess, str, Path]:
    """The grading step run once with the key on the release's stubs: the run, its outputs, its RUNNER_TEMP."""
    tmp = tmp_path_factory.mktemp("graded")
    done, output = run_grade_step(release[0], tmp, key=release[1].decode())
    return done, output, tmp


# ---- the workflow's shape ----

def test_the_workflow_uses_githubs_current_actions_and_no_node20_reporter():
    uses = {s["name"]: s["uses"] for s in steps() if "uses" in s}
    assert uses == ACTIONS
    wf = yaml.safe_load(WORKFLOW.read_text())
    assert wf["permissions"] == {"contents": "read"}  # nothing posts to Classroom any more: no checks: write
    checkout = next(s for s in steps() if s.get("uses", "").startswith("actions/checkout"))
    assert checkout["with"]["persist-credentials"] is False
    for step in steps():
        assert "${{" not in step.get("run", ""), f"{step['name']}: an expression in a script"
        secrets = [v for v in step.get("env", {}).values() if "secrets." in v]
        assert not secrets or step.get("id") == "attentionlab", f"{step['name']} holds a secret"


def test_the_artifact_is_the_json_report_the_grading_step_writes_and_the_reporter_comes_last(tmp_path):
    names = [s["name"] for s in steps()]
    upload = next(s for s in steps() if s.get("uses", "").startswith("actions/upload-artifact"))
    assert names.index("Grade the pieces") < names.index(upload["name"]) < names.index("Autograding Reporter")
    assert names[-1] == "Autograding Reporter"  # it fails the job on a failed case: the rest is written by then
    assert "if" not in upload  # only after a graded run: no artifact when no points are posted
    assert upload["with"]["if-no-files-found"] == "error"
    path = upload["with"]["path"].replace("${{ runner.temp }}", str(tmp_path))
    assert Path(path) == report_file(tmp_path)
    grading = next(s for s in steps() if s.get("id") == "attentionlab")
    assert f"summary \"$report\" {upload['with']['name']}" in grading["run"]  # the summary names the artifact


def test_the_reporter_step_reads_the_runner_the_grading_step_writes():
    reporter = next(s for s in steps() if s["name"] == "Autograding Reporter")
    assert "uses" not in reporter and reporter["run"] == "python -I grader/workflow.py reporter attentionlab"
    runner = reporter["run"].split()[-1]
    assert runner.isalnum()  # the reporter's own rule: letters and digits
    assert reporter["env"] == {f"{runner.upper()}_RESULTS": f"${{{{ steps.{runner}.outputs.result }}}}"}
    assert any(s.get("id") == runner for s in steps())


def test_the_workflow_passes_the_github_workflow_schema():
    assert schema_findings(WORKFLOW) == ""


def test_the_workflow_passes_zizmor_with_only_githubs_own_actions_pinned_by_tag():
    assert zizmor_findings(WORKFLOW) == ""


# ---- the grading step, without the key, with a wrong one, with the key ----

def test_without_the_secret_the_job_fails_naming_it_and_posts_no_points(release, tmp_path):
    done, output = run_grade_step(release[0], tmp_path, key=None)
    assert done.returncode != 0
    assert "::error" in done.stdout and "ATTNLAB_SEAL_KEY is not set" in done.stdout
    assert output == ""  # the reporter gets nothing: no "Points 6/6" from the public checks
    summary = summary_file(tmp_path).read_text()
    assert "not graded" in summary and "`ATTNLAB_SEAL_KEY` is not set" in summary and "no points are posted" in summary
    assert not re.search(r"\d+/\d+", summary) and not report_file(tmp_path).exists()


def test_a_wrong_key_fails_the_job_with_the_graders_own_message(release, tmp_path):
    done, output = run_grade_step(release[0], tmp_path, key="x" * 44)
    assert done.returncode != 0
    assert "does not open grader/sealed.bin" in done.stdout + done.stderr
    assert "::error title=Grading failed" in done.stdout and output == ""
    summary = summary_file(tmp_path).read_text()
    assert "not graded" in summary and "exit code 2" in summary and not re.search(r"\d+/\d+", summary)
    assert not report_file(tmp_path).exists()


def test_with_the_key_the_step_hands_the_reporter_a_graded_payload(graded):
    done, output, _ = graded
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(base64.b64decode(output.strip().removeprefix("result=")))
    assert payload["max_score"] == 9 and sum(t["score"] for t in payload["tests"]) == 0  # the stubs, sealed cases
    assert "not implemented yet" in payload["tests"][0]["message"]


def test_with_the_key_the_summary_holds_the_total_and_the_table_with_hints(graded):
    _, _, tmp = graded
    summary = summary_file(tmp).read_text()
    assert summary.startswith("## Attention lab: 0/9 points\n")
    assert "| context | 0/9 | ❌" in summary and "| **Total** | **0/9** | |" in summary
    rows = [ln for ln in summary.splitlines() if ln.startswith("| context | ❌")]
    assert rows and all("not implemented yet (piece 'context': write attention_context)" in r for r in rows)
    assert "artifact ` attentionlab-report `" in summary  # where the JSON report is
    assert len(summary.encode()) < 1024 * 1024


def test_with_the_key_the_artifact_is_the_json_report(graded):
    _, output, tmp = graded
    report = json.loads(report_file(tmp).read_text())
    assert (report["score"], report["max_score"]) == (0, 9) and [p["name"] for p in report["pieces"]] == ["context"]
    payload = json.loads(base64.b64decode(output.strip().removeprefix("result=")))
    assert payload["max_score"] == report["max_score"]


def test_the_reporter_step_prints_the_reporters_points_notices_and_table_and_fails_the_job(release, graded):
    _, output, _ = graded
    done = run_reporter_step(release[0], output, grading_env(None))
    assert done.returncode == 1, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert "::notice title=Autograding complete::Points 0/9" in lines
    assert '::notice title=Autograding report::{"totalPoints":0,"maxPoints":9}' in lines
    assert lines[-1] == "::error::Some tests failed."
    assert lines[0] == "🔄 Processing: attentionlab" and "Total points for attentionlab: 0.00/9" in lines
    assert "│ attentionlab       │ 0           │ 9           │" in lines
    assert "│ Total:             │ 0           │ 9           │" in lines
    assert "\x1b[36m🏆 Grand total tests passed: 0/9\x1b[0m" in lines


def test_the_reporter_step_without_a_payload_fails_and_says_so(release):
    done = run_reporter_step(release[0], "", grading_env(None))
    assert done.returncode == 1 and "::error::" in done.stdout and "Points" not in done.stdout


def test_a_students_markdown_and_html_in_a_message_is_shown_as_code_in_the_summary(release, tmp_path):
    rel, key = release
    repo = tmp_path / "repo"
    for folder in ("grader", "datasets", "exercises"):
        shutil.copytree(rel / folder, repo / folder)
    (repo / "exercises" / "context.py").write_text(
        "def attention_context(alpha, encoder_outputs):\n"
        f"    raise ValueError({HOSTILE!r})\n")
    done, output = run_grading_step(repo, tmp_path, sys.executable, ["context"], grading_env(key.decode()),
                                    timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    summary = summary_file(tmp_path).read_text()
    rows = [ln for ln in summary.splitlines() if ln.startswith("| context | ❌")]
    assert rows and any("evil.example" in r for r in rows), summary  # the message is shown ...
    shown = outside_code_spans(summary)
    for sign in ("evil.example", "<img", "<a ", "](", "**bold**", "@octocat"):  # ... only inside code spans
        assert sign not in shown, (sign, shown)
    for row in rows:  # every pipe of the student's is escaped: each row keeps its four cells
        assert len(re.findall(r"(?<!\\)\|", row)) == 5, row
    assert json.loads(base64.b64decode(output.strip().removeprefix("result=")))["max_score"] == 9
