"""A Classroom repository whose root the student filled with files that load code into Python or pytest
(setup.py, sitecustomize.py, a plugin and the configuration naming it, modules named like the grader's
dependencies): the workflow installs none of it, no trusted process imports any of it, and the stubs
still earn 0 with the key nowhere in the job's log."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from grader.release.build import student

from classroom import run_grading_step, steps
from hostile_root import plant

pytest.importorskip("yaml")
pytestmark = pytest.mark.skipif(os.name != "posix", reason="the workflow's steps run under bash")


@pytest.fixture(scope="module")
def repo(tmp_path_factory) -> tuple[Path, bytes, Path, list[str]]:
    base = tmp_path_factory.mktemp("classroom")
    rel, key = student(base / "release")
    repo = base / "repo"
    shutil.copytree(rel, repo)
    marks = base / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    return repo, key, marks, plant(repo, marks)


def test_the_install_step_installs_only_released_wheels_from_the_graders_own_list(repo, tmp_path):
    root, _, marks, _ = repo
    step = next(s for s in steps() if s.get("name", "").startswith("Install"))
    log = tmp_path / "argv"
    shim = tmp_path / "bin" / "python"
    shim.parent.mkdir()
    # records each command, then runs it on the real interpreter as a dry run that reaches no index: whatever the
    # interpreter imports from the working directory (a pip/ package of the student's) would run for real
    shim.write_text(f'#!/usr/bin/env bash\nprintf "%s\\n" "$*" >> {log}\n'
                    f'PIP_DRY_RUN=1 PIP_NO_INDEX=1 exec {sys.executable} "$@"\n')
    shim.chmod(0o755)
    env = {**os.environ, "PATH": f"{shim.parent}{os.pathsep}{os.environ['PATH']}"}
    done = subprocess.run(["bash", "--noprofile", "--norc", "-eo", "pipefail", "-c", step["run"]], cwd=root, env=env,
                          capture_output=True, text=True)
    assert not list(marks.iterdir()), f"these files of the student's ran: {sorted(p.name for p in marks.iterdir())}"
    assert done.returncode == 0, done.stdout + done.stderr  # the grader's own requirements, satisfied here
    commands = log.read_text().splitlines()
    assert commands and all(c.startswith("-I -m pip install ") for c in commands), commands
    for c in commands:
        args = c.split()[4:]
        assert "-e" not in args and "." not in args and not any(a.startswith(("./", "file:", str(root))) for a in args), c
        assert args[0].startswith("torch==") or args == ["--only-binary", ":all:", "-r", "grader/requirements.txt"], c
    assert not list(marks.iterdir())


def test_files_at_the_repository_root_load_nowhere_and_the_stubs_earn_nothing(repo, tmp_path):
    root, key, marks, planted = repo
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNLAB_", "PYTHON", "PYTEST"))}
    env["ATTNLAB_SEAL_KEY"] = key.decode()
    done, output = run_grading_step(root, tmp_path, sys.executable, ["encoder", "context"], env, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    payload = json.loads(base64.b64decode(output.strip().removeprefix("result=")))
    assert payload["max_score"] > 0 and sum(t["score"] for t in payload["tests"]) == 0, payload
    assert all("not implemented yet" in t["message"] for t in payload["tests"]), payload
    log = done.stdout + done.stderr + output
    secret = key.decode()
    assert secret not in log and secret[::-1] not in log
    loaded = sorted(p.name for p in marks.iterdir())
    assert not loaded, f"these files of the student's ran: {loaded} (planted: {planted})"


def test_changed_data_at_the_repository_root_posts_no_points_and_says_which_file(repo, tmp_path):
    root, key, _, _ = repo
    changed = tmp_path / "repo"
    shutil.copytree(root / "grader", changed / "grader")
    shutil.copytree(root / "exercises", changed / "exercises")
    shutil.copytree(root / "datasets", changed / "datasets")
    with (changed / "datasets" / "toy_translation" / "test.tsv").open("a") as f:
        f.write("cat\tchat\n")  # an easier test set
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ATTNLAB_", "PYTHON", "PYTEST"))}
    env["ATTNLAB_SEAL_KEY"] = key.decode()
    done, output = run_grading_step(changed, tmp_path, sys.executable, ["context"], env, timeout=600)
    assert done.returncode != 0 and output == ""
    assert "datasets/toy_translation/test.tsv is not the lab's own" in done.stdout + done.stderr
