"""The Classroom workflow's grading step, run as a shell script against a student release."""
from __future__ import annotations

import base64
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from classroom import run_grading_step, steps

pytest.importorskip("yaml")  # the workflow is YAML


def run_grade_step(rel: Path, tmp: Path, key: str | None) -> tuple[subprocess.CompletedProcess, str]:
    """The step's script in the release (only the context piece, to keep it quick); returns the run and what it
    wrote to GITHUB_OUTPUT. `release` is the folder's fixture (release/conftest.py)."""
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env.update(ATTNLAB_SEAL_KEY=key or "")  # an unset secret arrives as ""
    return run_grading_step(rel, tmp, sys.executable, ["context"], env, timeout=300)


def test_the_reporter_reads_the_runner_the_grading_step_writes():
    reporter = next(s for s in steps() if "autograding-grading-reporter" in s.get("uses", ""))
    runner = reporter["with"]["runners"]
    assert runner.isalnum()  # the reporter's own check: letters and digits, else every error is masked
    assert set(reporter["env"]) == {f"{runner.upper()}_RESULTS"}
    assert runner in reporter["env"][f"{runner.upper()}_RESULTS"]  # steps.<runner>.outputs.result


def test_without_the_secret_the_job_fails_naming_it_and_posts_no_points(release, tmp_path):
    done, output = run_grade_step(release[0], tmp_path, key=None)
    assert done.returncode != 0
    assert "::error" in done.stdout and "ATTNLAB_SEAL_KEY is not set" in done.stdout
    assert output == ""  # the reporter gets nothing: no "Points 6/6" from the public checks


def test_a_wrong_key_fails_the_job_with_the_graders_own_message(release, tmp_path):
    done, output = run_grade_step(release[0], tmp_path, key="x" * 44)
    assert done.returncode != 0
    assert "does not open grader/sealed.bin" in done.stdout + done.stderr
    assert "::error title=Grading failed" in done.stdout and output == ""


def test_with_the_key_the_step_hands_the_reporter_a_graded_payload(release, tmp_path):
    rel, key = release
    done, output = run_grade_step(rel, tmp_path, key=key.decode())
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(base64.b64decode(output.strip().removeprefix("result=")))
    assert payload["max_score"] == 9 and sum(t["score"] for t in payload["tests"]) == 0  # the stubs, sealed cases
    assert "not implemented yet" in payload["tests"][0]["message"]
