"""A student release as a student gets it: installed on its own in a fresh venv (never the instructor's
editable install), its notebook run in a kernel of that venv, graded from the notebook with and without the
seal key, and graded by the Classroom step the same whether the code sits in the notebook or in the files."""
from __future__ import annotations

import base64
import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.lesson import ipynb, kernel, notebook
from grader.release.build import student

from helpers import REFERENCE, venv_over_this_environment

from classroom import run_grading_step

nbformat = pytest.importorskip("nbformat")
pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")
pytest.importorskip("yaml")  # the workflow is YAML
pytestmark = [pytest.mark.slow,  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it
              pytest.mark.skipif(os.name != "posix", reason=
                                 "the venv's layout (bin/) and the workflow's bash are POSIX")]


@dataclass
class Installed:
    rel: Path  # the student release
    key: bytes  # its seal key
    venv: Path  # a venv holding the release, installed as the student README says (pip install -e)
    base: Path  # scratch space beside them

    def bin(self, name: str) -> Path:
        return self.venv / "bin" / name

    def env(self, key: bytes | None = None, **extra: str) -> dict[str, str]:
        """The environment of a student's shell in the venv: nothing of the instructor's checkout."""
        env = {k: v for k, v in os.environ.items()
               if not k.startswith("ATTNLAB_") and k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        env.update(PATH=f"{self.venv / 'bin'}{os.pathsep}{env.get('PATH', '')}", VIRTUAL_ENV=str(self.venv),
                   MPLBACKEND="Agg", **extra)
        if key:
            env["ATTNLAB_SEAL_KEY"] = key.decode()
        return env


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Installed:
    base = tmp_path_factory.mktemp("student")
    rel, key = student(base / "lab")
    venv = base / "venv"
    # The test environment's packages (torch, Jupyter, pip, setuptools) stay visible so nothing is downloaded,
    # but not its .pth hooks (the instructor's editable grader); its pip, run by the venv's interpreter,
    # installs into the venv, where the release's own editable finder is the only grader.
    venv_over_this_environment(venv, process_pth=False)
    got = Installed(rel, key, venv, base)
    done = subprocess.run([str(got.bin("python")), "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
                           "-e", str(rel)], env=got.env(), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    return got


def exercises_like(where: Path, rel: Path, cells: dict[str, str] | None = None, files: dict[str, str] | None = None,
                   extra_cells: list[str] = ()) -> Path:
    """`where`/exercises: the release's exercises/ with some notebook cells and .py files replaced; returns `where`."""
    shutil.copytree(rel / "exercises", where / "exercises")
    path = where / "exercises" / "lesson.ipynb"
    nb = ipynb.read(path)
    for cell in nb.cells:
        piece = ipynb._piece_of(cell)
        if piece in (cells or {}):
            cell.source = cells[piece]
    nb.cells += [nbformat.v4.new_code_cell(code) for code in extra_cells]
    path.write_text(notebook.dumps(nb), encoding="utf-8")
    for module, text in (files or {}).items():
        (where / "exercises" / f"{module}.py").write_text(text)
    return where


def solution_cells() -> dict[str, str]:
    return ipynb.piece_cells(notebook.build("reference"))


def test_the_release_installs_alone_in_a_venv_and_imports_its_own_grader(installed):
    probe = "import grader, grader.lesson.notebook, sys; print(grader.__file__); print(sys.prefix)"
    done = subprocess.run([str(installed.bin("python")), "-c", probe], cwd=installed.base, env=installed.env(),
                          capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    where, prefix = done.stdout.split()
    assert Path(where) == installed.rel / "grader" / "__init__.py", "the instructor's grader was imported"
    assert Path(prefix) == installed.venv and installed.bin("grade").is_file()
    assert not (installed.rel / "reference").exists()


def test_grade_of_the_filled_notebook_in_the_release_works_with_and_without_the_key(installed):
    home = exercises_like(installed.base / "graded-notebook", installed.rel, cells=solution_cells())
    for key in (None, installed.key):
        done = subprocess.run([str(installed.bin("grade")), "exercises/lesson.ipynb", "additive", "decoder", "--quick",
                               "--format", "json"], cwd=home, env=installed.env(key), capture_output=True, text=True,
                              timeout=300)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Traceback" not in done.stderr and "FileNotFoundError" not in done.stderr
        report = json.loads(done.stdout)
        assert report["score"] == report["max_score"] > 0
        public = json.loads((installed.rel / "grader" / "public" / "manifest.json").read_text())
        assert (report["max_score"] == sum(c["points"] for p in ("additive", "decoder") for c in public[p])) == (not key)
        if key:  # the sealed cases, not the public checks: the decoder's training case left out, and said so
            assert report["max_score"] > 10 and report["quick"] is True and "left out" in report["note"]


def test_the_filled_notebook_runs_in_a_kernel_of_the_release_and_check_grades_from_it(installed):
    extra = ['import grader, sys\nprint("GRADER", grader.__file__, sys.executable)',
             'runs = check("decoder")  # quick: the training case is left out, and check() says so',
             'os.environ.pop("ATTNLAB_SEAL_KEY")  # a student\'s laptop: only the public checks\nruns = check("context")']
    home = exercises_like(installed.base / "kernel", installed.rel, cells=solution_cells(), extra_cells=extra)
    before = sorted(p.name for p in (home / "exercises").iterdir())
    run = ("import sys, nbclient, nbformat\n"
           "nb = nbformat.read(sys.argv[1], as_version=4)\n"
           "nbclient.NotebookClient(nb, timeout=600, kernel_name='python3', allow_errors=True,\n"
           "                        resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
           "nbformat.write(nb, sys.argv[3])\n")
    out = installed.base / "kernel-run.ipynb"
    done = subprocess.run([str(installed.bin("python")), "-c", run, str(home / "exercises" / "lesson.ipynb"),
                           str(home / "exercises"), str(out)], cwd=home / "exercises", capture_output=True, text=True,
                          env=installed.env(installed.key, ATTNLAB_NOTEBOOK_STEPS="20"), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    code = [c for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    errors = [f"{o.ename}: {o.evalue}" for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    printed = ["".join(o.get("text", "") for o in c.outputs) for c in code]
    _, grader_file, python = printed[-3].split()
    assert Path(grader_file) == installed.rel / "grader" / "__init__.py" and Path(python).parent == installed.venv / "bin"
    additive = printed[-4]  # the lesson's own last cell: check("additive") in the kernel, with the key
    assert "Total: 13/13" in additive and "Public smoke checks only" not in additive, additive
    assert "quick run: 1 training case(s) worth" in printed[-2] and "not the grade" in printed[-2], printed[-2]
    assert "Public smoke checks only" in printed[-1] and "Total: 1/1" in printed[-1], printed[-1]
    assert sorted(p.name for p in (home / "exercises").iterdir()) == before  # no heatmaps.png for git to pick up


def classroom_step(installed: Installed, home: Path, pieces: list[str]) -> tuple[subprocess.CompletedProcess, dict]:
    """The workflow's grading step, as written in classroom.yml, in `home` (which holds exercises/; the release's
    grader/ and datasets/ are copied beside it, as in a student's repository), the venv's python running it with these pieces
    selected; returns the run and the payload it hands the reporter."""
    for folder in ("grader", "datasets"):
        if not (home / folder).exists():
            shutil.copytree(installed.rel / folder, home / folder)
    done, output = run_grading_step(home, home, str(installed.bin("python")), pieces, installed.env(installed.key),
                                    timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    return done, json.loads(base64.b64decode(output.strip().removeprefix("result=")))


def test_classroom_grades_code_in_the_notebook_exactly_as_the_same_code_in_the_py_files(installed):
    buggy = (REFERENCE / "additive.py").read_text().replace(
        'scores = scores.masked_fill(~src_mask, float("-inf"))', "scores = scores")  # pads keep their weight
    assert buggy != (REFERENCE / "additive.py").read_text()
    code = {"additive": buggy, "evaluation": (REFERENCE / "evaluation.py").read_text()}  # context: still the stub
    pieces = ["additive", "context", "evaluation"]  # no training piece: a full run, as Classroom's, stays short
    in_files, files_payload = classroom_step(
        installed, exercises_like(installed.base / "in-files", installed.rel, files=code), pieces)
    in_notebook, notebook_payload = classroom_step(
        installed, exercises_like(installed.base / "in-notebook", installed.rel,
                                  cells={p: notebook.as_cell(p, text) for p, text in code.items()}), pieces)
    assert "graded: the .py files" in in_files.stderr
    said = "graded from lesson.ipynb (their .py files are untouched stubs or absent): additive, evaluation;"
    assert said in in_notebook.stderr

    def points(payload: dict) -> list[tuple]:
        return [(t["name"], t["status"], t["score"], t["message"]) for t in payload["tests"]]

    assert points(notebook_payload) == points(files_payload)
    assert notebook_payload["max_score"] == files_payload["max_score"]
    got = sum(t["score"] for t in files_payload["tests"])
    assert 0 < got < files_payload["max_score"]  # a partial grade: the unmasked pads and the stub cost points


def test_without_the_key_the_filled_notebook_runs_on_the_students_own_evaluator_and_says_what_is_sealed(installed):
    """A student's laptop: the lab's evaluator and Luong's model are sealed, so the lesson trains and draws the
    Bahdanau model with the student's own evaluation piece and shows the lab's stored Luong curve, saying so."""
    home = exercises_like(installed.base / "kernel-no-key", installed.rel, cells=solution_cells())
    run = ("import sys, nbclient, nbformat\n"
           "nb = nbformat.read(sys.argv[1], as_version=4)\n"
           "nbclient.NotebookClient(nb, timeout=600, kernel_name='python3', allow_errors=True,\n"
           "                        resources={'metadata': {'path': sys.argv[2]}}).execute()\n"
           "nbformat.write(nb, sys.argv[3])\n")
    out = installed.base / "kernel-no-key-run.ipynb"
    done = subprocess.run([str(installed.bin("python")), "-c", run, str(home / "exercises" / "lesson.ipynb"),
                           str(home / "exercises"), str(out)], cwd=home / "exercises", capture_output=True, text=True,
                          env=installed.env(None, ATTNLAB_NOTEBOOK_STEPS="20"), timeout=900)
    assert done.returncode == 0, done.stdout + done.stderr
    code = [c for c in nbformat.read(out, as_version=4).cells if c.cell_type == "code"]
    errors = [f"{o.ename}: {o.evalue}" for c in code for o in c.outputs if o.output_type == "error"]
    assert not errors, errors
    printed = "".join(o.get("text", "") for c in code for o in c.outputs)
    assert kernel.SEALED_EVALUATOR in printed and kernel.SEALED_LUONG in printed
    assert "Bahdanau:" in printed and "Luong:" not in printed  # only the model this kernel could train is timed
    images = [c for c in code for o in c.outputs if "image/png" in o.get("data", {})]
    assert len(images) == 4  # the curve and heat map of section 9, the compared curves and heat map of section 11
