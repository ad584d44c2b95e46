"""`grade release gradescope`: the autograder zip, run end to end in a folder laid out like /autograder."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from grader import ROOT
from grader.verbs.gradescope import build

from helpers import TOTAL

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

REFERENCE = ROOT / "reference"


@pytest.fixture(scope="module")
def autograder(tmp_path_factory) -> Path:
    """The zip unpacked as Gradescope does, into <root>/source."""
    root = tmp_path_factory.mktemp("autograder")
    with zipfile.ZipFile(build(root / "autograder.zip")) as zf:
        zf.extractall(root / "source")
    return root


def run_autograder(root: Path, upload: dict[str, bytes]) -> dict:
    """A fresh submission folder holding `upload`, then run_autograder as Gradescope calls it."""
    for folder in ("submission", "results"):
        shutil.rmtree(root / folder, ignore_errors=True)
        (root / folder).mkdir()
    for name, data in upload.items():
        (root / "submission" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "submission" / name).write_bytes(data)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ATTNLAB")}
    env.update(AUTOGRADER_ROOT=str(root), PYTHON=sys.executable, PYTHONPATH=str(root / "source"))
    done = subprocess.run(["bash", str(root / "source" / "run_autograder")], env=env, capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads((root / "results" / "results.json").read_text())


def pieces(base: Path = REFERENCE, **swap: str) -> dict[str, bytes]:
    files = {p.name: p.read_bytes() for p in base.glob("*.py") if p.name != "__init__.py"}
    files.update({f"{name}.py": text.encode() for name, text in swap.items()})
    return files


def test_the_zip_has_gradescopes_two_scripts_at_its_root_and_the_hidden_cases(autograder):
    names = zipfile.ZipFile(autograder / "autograder.zip").namelist()
    assert {"setup.sh", "run_autograder", "grader/cases/test_decoder.py", "reference/decoder.py"} <= set(names)
    assert not [n for n in names if n.startswith(("tests/", ".github/", "exercises/"))]
    modes = {i.filename: i.external_attr >> 16 for i in zipfile.ZipFile(autograder / "autograder.zip").infolist()}
    assert modes["setup.sh"] & 0o111 and modes["run_autograder"] & 0o111
    assert "torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu" in (autograder / "source" / "setup.sh").read_text()


def test_a_correct_submission_earns_every_point_training_included(autograder):
    results = run_autograder(autograder, pieces())
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == TOTAL


def test_a_buggy_submission_in_a_zip_loses_points_on_its_piece_with_a_hint(autograder, tmp_path):
    buggy = (REFERENCE / "luong.py").read_text().replace("scores = scores / d**0.5", "scores = scores")
    archive = tmp_path / "upload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for name, data in pieces(luong=buggy).items():
            zf.writestr(f"my_lab/{name}", data)
    results = run_autograder(autograder, {"upload.zip": archive.read_bytes()})
    failed = [t for t in results["tests"] if t["status"] == "failed"]
    assert failed and all(t["name"].startswith("luong: ") for t in failed)
    assert any("sqrt(d)" in t["output"] for t in failed)
    assert results["score"] == TOTAL - sum(t["max_score"] for t in failed)


def test_a_broken_upload_gets_a_results_file_that_says_why(autograder):
    results = run_autograder(autograder, {"notes.txt": b"I could not finish"})
    assert results["score"] == 0 and results["output"].startswith("Not graded: the upload holds none of the lab's files")
    syntax = run_autograder(autograder, pieces(decoder="def broken(:\n"))
    assert syntax["score"] < TOTAL and any(t["status"] == "failed" and "decoder: " in t["name"] for t in syntax["tests"])


def test_stub_files_beside_a_solved_notebook_are_graded_from_its_cells_as_grade_and_classroom_do(autograder, tmp_path):
    from grader.lesson import notebook

    upload = {p.name: p.read_bytes() for p in (ROOT / "exercises").glob("*.py") if p.name != "__init__.py"}
    upload[notebook.NOTEBOOK.name] = notebook.write(tmp_path / notebook.NOTEBOOK.name, source="reference").read_bytes()
    results = run_autograder(autograder, upload)
    assert results["score"] == sum(t["max_score"] for t in results["tests"]) == TOTAL, results.get("output")
