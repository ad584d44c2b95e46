"""Issue 50 §2: bytecode a student commits beside the grader's source in their repository never runs in the per-push
step: boot.py (grade) and workflow.py (the steps after it) remove every cached file under the grader before their
first import. The regrade names such a file (tests/release/test_release_files.py)."""
from __future__ import annotations

import importlib.util
import py_compile
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader import ROOT

PAYLOAD = "open({marker!r}, 'w').write('planted bytecode ran')\n"


@pytest.fixture
def repository(tmp_path) -> tuple[Path, Path]:
    """A student's repository holding the grader and an unchecked-hash .pyc for every module the grader starts
    with, each writing the marker file if it runs; returns (repository, marker)."""
    repo = tmp_path / "repo"
    shutil.copytree(ROOT / "grader", repo / "grader", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    marker = tmp_path / "ran"
    source = tmp_path / "payload.py"
    source.write_text(PAYLOAD.format(marker=str(marker)))
    for module in ("__init__", "cli/__init__", "runner/workflow_steps"):
        real = repo / "grader" / f"{module}.py"
        cached = Path(importlib.util.cache_from_source(str(real)))
        py_compile.compile(str(source), cfile=str(cached), dfile=str(real),
                           invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH, doraise=True)
    return repo, marker


@pytest.mark.parametrize("script, args, said", [("boot.py", ["--help"], "Usage: grade"),
                                                ("workflow.py", [], "usage: python -I grader/workflow.py")])
def test_planted_bytecode_under_the_grader_never_runs_in_the_per_push_steps(repository, script, args, said):
    repo, marker = repository
    done = subprocess.run([sys.executable, "-I", f"grader/{script}", *args], cwd=repo, capture_output=True, text=True,
                          timeout=120)
    assert said in done.stdout + done.stderr, done.stderr[-2000:]
    assert not marker.exists()  # the source ran, not the planted .pyc


def test_the_planted_bytecode_would_run_were_it_not_removed(repository):
    """The attack is real: Python loads an unchecked-hash .pyc without reading its source."""
    repo, marker = repository
    code = ("import importlib.util, sys; s = importlib.util.spec_from_file_location('grader', 'grader/__init__.py',"
            " submodule_search_locations=['grader']); m = importlib.util.module_from_spec(s);"
            " sys.modules['grader'] = m; s.loader.exec_module(m)")
    subprocess.run([sys.executable, "-I", "-c", code], cwd=repo, capture_output=True, timeout=120)
    assert marker.exists()
