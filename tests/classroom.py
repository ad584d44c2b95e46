"""The per-push workflow's steps (.github/workflows/classroom.yml), run as GitHub runs them."""
from __future__ import annotations

import os
import stat
import subprocess
from pathlib import Path

import pytest

from grader import ROOT

WORKFLOW = ROOT / ".github" / "workflows" / "classroom.yml"
JOB = "run-autograding-tests"


def steps() -> list[dict]:
    yaml = pytest.importorskip("yaml")
    return yaml.safe_load(WORKFLOW.read_text())["jobs"][JOB]["steps"]


def summary_file(tmp: Path) -> Path:
    """Where run_grading_step's GITHUB_STEP_SUMMARY is (it starts empty)."""
    return tmp / "step_summary.md"


def report_file(tmp: Path) -> Path:
    """Where the grading step writes the JSON report when RUNNER_TEMP is `tmp` (the artifact's path)."""
    return tmp / "attentionlab" / "report.json"


def run_grading_step(cwd: Path, tmp: Path, python: str, pieces: list[str], env: dict[str, str],
                     timeout: float) -> tuple[subprocess.CompletedProcess, str]:
    """The step's script under GitHub's default shell (bash -e, pipefail) in `cwd` (a repository: grader/ and
    exercises/), with a `python` on PATH that runs `python` with the step's arguments, followed, for `grade`
    (grader/boot.py), by `pieces` (a selection keeps the test short); RUNNER_TEMP is `tmp`, and the job summary
    goes to summary_file(tmp). Returns the run and what it wrote to GITHUB_OUTPUT."""
    step = next(s for s in steps() if s.get("id") == "attentionlab")
    shim = tmp / "bin" / "python"
    shim.parent.mkdir(exist_ok=True)
    shim.write_text(f'#!/usr/bin/env bash\ncase " $* " in *" grader/boot.py "*) exec {python} "$@" {" ".join(pieces)};; '
                    f'esac\nexec {python} "$@"\n')
    shim.chmod(shim.stat().st_mode | stat.S_IEXEC)
    output = tmp / "github_output"
    output.write_text("")
    summary_file(tmp).write_text("")
    env = {**env, "PATH": f"{shim.parent}{os.pathsep}{env['PATH']}", "RUNNER_TEMP": str(tmp),
           "GITHUB_OUTPUT": str(output), "GITHUB_STEP_SUMMARY": str(summary_file(tmp))}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=timeout)
    return done, output.read_text()


def run_reporter_step(cwd: Path, output: str, env: dict[str, str], timeout: float = 60) -> subprocess.CompletedProcess:
    """The reporter step's script in `cwd`, its env expression `${{ steps.attentionlab.outputs.result }}` given
    from `output` (what the grading step wrote to GITHUB_OUTPUT)."""
    step = next(s for s in steps() if s.get("name") == "Autograding Reporter")
    outputs = dict(line.split("=", 1) for line in output.splitlines() if "=" in line)
    expressions = {"${{ steps.attentionlab.outputs.result }}": outputs.get("result", "")}
    step_env = {k: expressions[v] for k, v in step["env"].items()}
    return subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=cwd,
                          env={**env, **step_env}, capture_output=True, text=True, timeout=timeout)
