"""Classroom 50's runner as the tests play it: a release, a clean base interpreter, a checkout made from the
template, and `python3 autograder.py` run in it with the runner's environment; every result.json it leaves is checked
against every rule of the contract (grader.runner.classroom50_result.problems)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

from cryptography.fernet import Fernet

from grader import REFERENCE, ROOT
from grader.runner.classroom50_result import problems
from grader.verbs import classroom50

OWNER = "alice"
SOLVED = tuple(p.stem for p in REFERENCE.glob("[!_]*.py"))


def make_lab(base: Path, python: str | None = None) -> dict:
    """The release, a base interpreter (a clean copy of this machine's 3.11 unless given) and the runner's scratch
    folder, where the first run makes the venv."""
    key = Fernet.generate_key()
    paths = classroom50.build(base / "out", classroom="fall26", assignment="attention-lab",
                              runs_on=("self-hosted", "attnlab"), key=key)
    (base / "keys").mkdir()
    (base / "keys" / "seal-key").write_bytes(key + b"\n")
    if python is None:
        python = subprocess.run(["bash", str(ROOT / ".ci" / "bare-python"), "3.11"], capture_output=True, text=True,
                                env={**os.environ, "TMPDIR": str(base)}, check=True).stdout.strip().splitlines()[-1]
    (base / "runner-temp").mkdir()
    return {"base": base, "key": key, "python": python, **paths}


def checkout(lab: dict, name: str, solved: tuple[str, ...] = ()) -> Path:
    """A student repository made from the template, with the reference's files for the `solved` modules."""
    repo = lab["base"] / name
    shutil.copytree(lab["template"], repo)
    for module in solved:
        shutil.copyfile(REFERENCE / f"{module}.py", repo / "exercises" / f"{module}.py")
    return repo


def autograde(lab: dict, repo: Path, key_file: str | None = None, venv: Path | None = None, **extra: str
              ) -> tuple[subprocess.CompletedProcess, dict | None]:
    """Run autograder.py as the runner does (`extra`: more of the runner's environment); returns the run and the
    result document it left, if any."""
    slug = f"fall26-attention-lab-{OWNER}"
    temp = lab["base"] / "runner-temp"
    shutil.rmtree(temp, ignore_errors=True)  # the runner empties it for every job
    temp.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(lab["base"]), "LANG": "C.UTF-8",
           "RUNNER_TEMP": str(temp), "ATTNLAB_TORCH_INDEX": "",  # torch from this disk
           # a self-hosted runner's: its tool cache outlives the job, and the venv is kept there
           "RUNNER_ENVIRONMENT": "self-hosted", "RUNNER_TOOL_CACHE": str(lab["base"] / "tool-cache"),
           "ATTNLAB_SEAL_KEY_FILE": key_file or str(lab["base"] / "keys" / "seal-key"),
           "GITHUB_REPOSITORY": f"org/{slug}", "GITHUB_SHA": "abc1234" * 5, "GITHUB_ACTOR": OWNER,
           "GITHUB_SERVER_URL": "https://github.com", "PAGES_BASE_URL": "https://org.github.io/classroom50",
           "CLASSROOM": "fall26", "ASSIGNMENT": "attention-lab", "SUBMISSION_TAG": "submit/2026-12-02T10-00-00Z-abc1234",
           "SECRET": "", "MODE": "individual", "ALLOWED_FILES": "[]", "RELEASE_ASSETS": "[]",
           "USERNAME": OWNER, "OWNER": OWNER, "ASSIGNMENT_TYPE": "individual",
           "COMMIT_URL": f"https://github.com/org/{slug}/commit/abc1234",
           "RELEASE_URL": f"https://github.com/org/{slug}/releases/tag/submit%2F2026-12-02T10-00-00Z-abc1234",
           "REVIEW_URL": f"https://github.com/org/{slug}/compare/0000000...abc1234",
           "CLASSROOM50_BUNDLE_DIR": str(lab["bundle"]), **({"ATTNLAB_VENV": str(venv)} if venv else {}), **extra}
    done = subprocess.run([lab["python"], str(lab["bundle"] / "autograder.py")], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1200)
    found = repo / "result.json"
    doc = json.loads(found.read_text()) if found.is_file() else None
    if doc is not None:
        assert problems(doc, env) == [] and doc["owner"] == OWNER
    return done, doc


def kept_venv(lab: dict) -> Path:
    """The venv the autograder keeps in the self-hosted runner's tool cache (there is one once a run installed it)."""
    (venv,) = (lab["base"] / "tool-cache" / "attnlab").glob("venv-*")
    return venv
