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


def run_grading_step(cwd: Path, tmp: Path, grade: str, env: dict[str, str],
                     timeout: float) -> tuple[subprocess.CompletedProcess, str]:
    """The step's script under GitHub's default shell (bash -e, pipefail) in `cwd`, with a `grade` on PATH
    that runs the command line `grade` (then the step's arguments); RUNNER_TEMP is `tmp`. Returns the run
    and what it wrote to GITHUB_OUTPUT."""
    step = next(s for s in steps() if s.get("id") == "attentionlab")
    shim = tmp / "bin" / "grade"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f"#!/usr/bin/env bash\nexec {grade} \"$@\"\n")
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    output = tmp / "github_output"
    output.write_text("")
    env = {**env, "PATH": f"{shim.parent}{os.pathsep}{env['PATH']}", "RUNNER_TEMP": str(tmp),
           "GITHUB_OUTPUT": str(output)}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done, output.read_text()
