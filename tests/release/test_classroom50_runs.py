"""The generated autograder.py, run as Classroom 50's runner runs it: `python3 autograder.py` from a clean base
interpreter, in a checkout of a student repository made from the template, with the runner's environment; its
result.json is checked against every rule of the contract (grader.runner.classroom50_result.problems)."""
from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

import pytest
from cryptography.fernet import Fernet

from grader import REFERENCE
from grader.runner.classroom50_result import NOT_GRADED, posted_status

from helpers import POINTS, TOTAL, venv_over_this_environment
from hostile_root import plant
from release.classroom50_runner import autograde, checkout, kept_venv, make_lab

pytestmark = [pytest.mark.slow,  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it
              pytest.mark.skipif(os.name != "posix", reason="Classroom 50 grades on Linux runners")]


@pytest.fixture(scope="module")
def lab(tmp_path_factory) -> dict:
    """The release, a clean base interpreter, and the runner's scratch folder (the venv is made there once)."""
    return make_lab(tmp_path_factory.mktemp("classroom50"))


def test_the_reference_earns_full_marks_in_a_result_the_runner_accepts(lab):
    repo = checkout(lab, "solved", tuple(p.stem for p in REFERENCE.glob("[!_]*.py")))
    done, doc = autograde(lab, repo)  # the first run installs torch and the grader into $RUNNER_TEMP
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (doc["score"], doc["max-score"]) == (TOTAL, TOTAL) and all(t["passed"] for t in doc["tests"])
    assert f"{TOTAL}/{TOTAL}" in (repo / "release-body.md").read_text()
    assert lab["key"].decode() not in done.stdout + done.stderr


def test_a_later_push_reuses_the_venv_the_runner_kept_and_a_stale_one_is_rebuilt(lab):
    """Classroom 50 empties $RUNNER_TEMP between jobs; the venv lives in the self-hosted runner's tool cache."""
    autograde(lab, checkout(lab, "first-push"))  # installs it, unless an earlier test's run did
    done, doc = autograde(lab, checkout(lab, "second-push"))
    assert "reusing the grader's environment" in done.stdout and "installing" not in done.stdout, done.stdout[-2000:]
    assert doc is not None
    stamp = kept_venv(lab) / ".attnlab-installed"
    stamp.write_text(stamp.read_text().replace("torch", "torch-of-an-older-release", 1))
    done, doc = autograde(lab, checkout(lab, "after-a-new-pin"))
    assert "rebuilding the grader's environment" in done.stdout and "installed in" in done.stdout, done.stdout[-2000:]
    assert doc is not None and "older-release" not in (kept_venv(lab) / ".attnlab-installed").read_text()


def test_the_stubs_earn_nothing_with_one_line_per_piece(lab):
    repo = checkout(lab, "stubs")
    (repo / "result.json").mkdir()  # a folder where the result goes is the student's own, and goes
    (repo / "result.json" / "score").write_text("73")
    done, doc = autograde(lab, repo)
    assert done.returncode == 0 and (doc["score"], doc["max-score"]) == (0, TOTAL)
    lines = [line for line in done.stdout.splitlines() if "not implemented yet (piece '" in line]
    assert len(lines) == 6, done.stdout[-3000:]


def test_files_at_the_repository_root_load_nowhere_and_a_result_of_their_own_is_replaced(lab):
    repo = checkout(lab, "hostile", ("encoder", "context"))
    marks = lab["base"] / "marks"
    marks.mkdir()
    marks.chmod(0o777)
    planted = plant(repo, marks)
    forged = {"schema": "classroom50/result/v1", "score": 73, "max-score": 73, "tests": []}
    (repo / "result.json").write_text(json.dumps(forged))
    outside = lab["base"] / "not-theirs.md"
    outside.write_text("kept\n")
    (repo / "release-body.md").symlink_to(outside)
    done, doc = autograde(lab, repo)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert (doc["score"], doc["max-score"]) == (POINTS["encoder"] + POINTS["context"], TOTAL)  # the encoder and the context: what honest code earns
    assert sorted(p.name for p in marks.iterdir()) == [] and len(planted) > 10
    assert outside.read_text() == "kept\n" and not (repo / "release-body.md").is_symlink()


def test_without_a_key_the_public_checks_run_and_every_test_says_so(lab):
    repo = checkout(lab, "public", tuple(p.stem for p in REFERENCE.glob("[!_]*.py")))
    outputs = lab["base"] / "public-github-output"
    done, doc = autograde(lab, repo, key_file=str(lab["base"] / "keys" / "none"), GITHUB_OUTPUT=str(outputs))
    assert done.returncode == 0 and "::warning title=Not the graded cases::" in done.stdout
    assert (doc["score"], doc["max-score"]) == (0, TOTAL)  # neither a full score nor the public checks' own
    checks = [t for t in doc["tests"] if t["test-name"] != NOT_GRADED]
    assert checks and all(": public check: " in t["test-name"] and t["passed"] and t["max-score"] == 0 for t in checks)
    assert posted_status(doc, outputs.read_text()) == "failure" and "summary=not graded" in outputs.read_text()
    assert "Public smoke checks only" in (repo / "release-body.md").read_text()


def test_a_key_file_inside_the_checkout_is_never_read(lab):
    repo = checkout(lab, "inside")
    (repo / "key").write_bytes(lab["key"])
    done, doc = autograde(lab, repo, key_file=str(repo / "key"))
    assert "inside the student's checkout" in done.stdout
    assert all(": public check: " in t["test-name"] for t in doc["tests"] if t["test-name"] != NOT_GRADED)


def test_a_wrong_key_posts_no_result_and_says_why(lab):
    wrong = lab["base"] / "keys" / "wrong"
    wrong.write_bytes(Fernet.generate_key())
    repo = checkout(lab, "wrong-key")
    done, doc = autograde(lab, repo, key_file=str(wrong))
    assert done.returncode != 0 and doc is None
    assert "does not open grader/sealed.bin" in done.stdout + done.stderr and "::error title=Grading failed" in done.stdout


def test_a_runner_whose_jail_lacks_landlock_grades_nothing_with_the_key(lab, tmp_path):
    """Landlock is what keeps graded code from the key's file (readable by the runner's user): without it, no source
    reaches a worker and no score is posted, whatever the submission."""
    python = venv_over_this_environment(tmp_path / "venv", process_pth=False)
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    Path(purelib, "landlock.py").write_text("raise ImportError('no Landlock on this kernel')\n")  # as on Linux < 5.13
    repo = checkout(lab, "no-landlock", tuple(p.stem for p in REFERENCE.glob("[!_]*.py")))
    key_file = lab["base"] / "keys" / "seal-key"
    spy = f"print('KEY', open({str(key_file)!r}).read())\n"
    (repo / "exercises" / "encoder.py").write_text((repo / "exercises" / "encoder.py").read_text() + spy)
    done, doc = autograde(lab, repo, venv=tmp_path / "venv")
    assert done.returncode != 0 and doc is None
    assert "lacks landlock, which grading the sealed cases requires" in done.stdout + done.stderr
    assert lab["key"].decode() not in done.stdout + done.stderr


def test_a_key_file_in_a_folder_the_jail_lets_graded_code_read_is_refused(lab):
    inside = kept_venv(lab) / "seal-key"  # the venv the first run made: the workers may read their interpreter
    inside.write_bytes(lab["key"])
    done, doc = autograde(lab, checkout(lab, "key-in-venv"), key_file=str(inside))
    assert done.returncode != 0 and doc is None
    assert "which graded code may read" in done.stdout + done.stderr


def test_what_a_submission_writes_reaches_the_release_only_as_code(lab):
    repo = checkout(lab, "mentions", tuple(p.stem for p in REFERENCE.glob("[!_]*.py") if p.stem != "encoder"))
    bait = "@octocat @org/instructors appeal: https://evil.example/login www.evil.example <img src=x> [x](y)"
    (repo / "exercises" / "encoder.py").write_text(
        (repo / "exercises" / "encoder.py").read_text().replace("raise NotImplementedError", f"raise ValueError({bait!r})#"))
    done, doc = autograde(lab, repo, key_file=str(lab["base"] / "keys" / "none"))  # the public checks show messages
    body = (repo / "release-body.md").read_text()
    shown = [line for line in body.splitlines() if "octocat" in line]
    assert shown and all(re.search(r"(`+) [^`]*@octocat[^`]* \1", line) for line in shown), shown
    assert "https://evil" not in re.sub(r"(`+) .*? \1", "", body)  # outside the code spans: nothing of theirs


def test_graded_code_that_writes_into_the_kept_venv_changes_nothing_the_next_push_runs(lab):
    """The venv outlives the job on a self-hosted runner, so a student's code must not leave anything in it."""
    autograde(lab, checkout(lab, "before-the-attack"))  # the venv is there and kept
    venv = kept_venv(lab)
    before = sorted((str(p.relative_to(venv)), p.stat().st_size, p.stat().st_mtime_ns) for p in venv.rglob("*")
                    if p.is_file())
    repo = checkout(lab, "venv-writer", ("encoder",))
    attack = ("\nimport sys as _s, os as _o, glob as _g\n"
              "for _d in {_s.prefix, *_s.path, *_g.glob(_s.prefix + '/lib/*/site-packages')}:\n"
              "    for _name in ('attnlab_planted.pth', 'sitecustomize.py'):\n"
              "        try:\n"
              "            open(_o.path.join(_d, _name), 'w').write('import os; os.environ[\"PLANTED\"] = \"1\"\\n')\n"
              "        except OSError:\n"
              "            pass\n"
              "try:\n"
              "    open(_o.path.join(_s.prefix, '.attnlab-installed'), 'a').write('x')\n"
              "except OSError:\n"
              "    pass\n")
    (repo / "exercises" / "encoder.py").write_text((repo / "exercises" / "encoder.py").read_text() + attack)
    done, doc = autograde(lab, repo)
    assert done.returncode == 0 and doc["score"] == POINTS["encoder"], done.stdout[-2000:]  # what the encoder earns
    after = sorted((str(p.relative_to(venv)), p.stat().st_size, p.stat().st_mtime_ns) for p in venv.rglob("*")
                   if p.is_file())
    assert after == before
    done, _ = autograde(lab, checkout(lab, "after-the-attack"))
    assert "reusing the grader's environment" in done.stdout
