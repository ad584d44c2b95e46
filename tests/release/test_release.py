"""`grade release student`: nothing readable gives the answers away, and grading still works."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT

SOLUTION_ONLY = ["torch.bmm(alpha.unsqueeze(1)", "self.v(torch.tanh(", "torch.sigmoid(keys + query)", "scores / d**0.5", "_keys_of"]


def grade_in(rel: Path, *args: str, key: bytes | None = None, stdin: str | None = None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "ATTNLAB_SEAL_KEY"}
    env["PYTHONPATH"] = str(rel)
    if key:
        env["ATTNLAB_SEAL_KEY"] = key.decode()
    return subprocess.run([sys.executable, "-m", "grader", *args], cwd=rel, env=env, capture_output=True, text=True,
                          timeout=300, input=stdin)


def test_the_release_holds_no_reference_and_no_case_source(release):
    rel, _ = release
    assert not (rel / "reference").exists() and not (rel / "tests").exists()
    assert not list((rel / "grader" / "cases").glob("test_*.py"))
    for path in rel.rglob("*"):
        if path.is_file() and path.suffix in (".py", ".ipynb", ".md", ".yml", ".toml", ".json"):
            text = path.read_text(errors="replace")
            assert not any(s in text for s in SOLUTION_ONLY), f"{path.relative_to(rel)} gives a solution away"


def test_with_the_key_the_sealed_cases_grade_the_reference_in_full(release):
    rel, key = release
    done = grade_in(rel, "--quick", "--format", "json", "--submission", str(ROOT / "reference"), key=key)
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"] == 63


def test_without_the_key_only_the_public_checks_run_and_say_so(release):
    rel, _ = release
    done = grade_in(rel, "--submission", str(ROOT / "reference"))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Public smoke checks only" in done.stdout and "Total: 6/6" in done.stdout
    stubs = grade_in(rel, "--submission", "exercises")
    assert stubs.returncode == 1 and "Total: 0/6" in stubs.stdout


def test_a_wrong_key_is_one_clean_line_and_exit_2(release):
    rel, _ = release
    done = grade_in(rel, "--submission", "exercises", key=b"x" * 44)
    assert done.returncode == 2 and "does not open grader/sealed.bin" in done.stdout + done.stderr
    printed = (done.stdout + done.stderr).strip().splitlines()
    assert len(printed) == 1 and printed[0].startswith("Error: ") and "Usage" not in done.stderr, printed


def test_the_key_can_come_on_standard_input_as_the_workflow_passes_it(release):
    rel, key = release
    done = grade_in(rel, "context", "--quick", "--format", "json", "--seal-key-file", "-", "--submission",
                    str(ROOT / "reference"), stdin=key.decode())
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert report["score"] == report["max_score"] == 9  # the sealed cases, not the public check


@pytest.mark.parametrize("command", [["stubs"], ["release", "student", "out"], ["manifest"], ["artifacts"]])
def test_instructor_commands_in_a_student_checkout_say_so_in_one_line(release, command):
    rel, _ = release
    done = grade_in(rel, *command)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "is an instructor command" in done.stderr and "Traceback" not in done.stdout + done.stderr


def test_the_student_readme_says_which_file_is_graded_for_each_piece(release):
    rel, _ = release
    text = " ".join((rel / "README.md").read_text().split())
    assert "grades its `.py` file, unless that file is still the untouched stub: then it grades the piece's cell in " \
           "`exercises/lesson.ipynb`" in text
