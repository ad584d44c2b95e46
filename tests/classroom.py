"""The Classroom workflow's grading step (.github/workflows/classroom.yml), run as GitHub runs it."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from grader import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"


def steps() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(WORKFLOW.read_text())["jobs"]["run-autograding-tests"]["steps"]


def run_grading_step(cwd: Path, tmp: Path, python: str, pieces: list[str], env: dict[str, str],
                     timeout: float) -> tuple[subprocess.CompletedProcess, str]:
    """The step's script under GitHub's default shell (bash -e, pipefail) in `cwd` (a repository: grader/ and
    exercises/), with a `python` on PATH that runs `python` with the step's arguments and then `pieces` (a
    selection keeps the test short); RUNNER_TEMP is `tmp`. Returns the run and what it wrote to GITHUB_OUTPUT."""
    step = next(s for s in steps() if s.get("id") == "attentionlab")
    shim = tmp / "bin" / "python"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f"#!/usr/bin/env bash\nexec {python} \"$@\" {' '.join(pieces)}\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    output = tmp / "github_output"
    output.write_text("")
    env = {**env, "PATH": f"{shim.parent}{os.pathsep}{env['PATH']}", "RUNNER_TEMP": str(tmp),
           "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done, output.read_text()
