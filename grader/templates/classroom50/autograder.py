#!/usr/bin/env python3
"""The attention lab's Classroom 50 autograder, written by `grade release classroom50`.

Classroom 50's runner extracts this folder, then runs `python3 autograder.py` in the student's checkout with the
submission's identity in the environment (CLASSROOM, ASSIGNMENT, SUBMISSION_TAG, OWNER, COMMIT_URL, ...), and
reads ./result.json when it exits 0. This script:

1. re-runs itself under `python -I`: the working directory is the student's, and nothing there is imported;
2. finds or makes a virtual environment with PyTorch's CPU build and the grader's requirements: ATTNLAB_VENV, one
   made beforehand, used as it is; else, on a self-hosted runner, one kept in the runner's tool cache
   ($RUNNER_TOOL_CACHE/attnlab/, which the runner keeps between jobs while it empties $RUNNER_TEMP), reused while
   its torch, requirements and interpreter match and it imports, rebuilt when they do not; else (a GitHub-hosted
   runner, a fresh machine every job) one in $RUNNER_TEMP. Graded code never writes to it: the jail gives workers
   read-only access to the interpreter, and a keyed run refuses to grade without that layer (Landlock);
3. grades the checkout's exercises/ with the grader in lab/ beside this file (never the copy in the student's
   repository), exactly as `grade` does: per piece its .py file, or its notebook cell while the file is the stub;
4. writes result.json and release-body.md into the checkout, replacing whatever stands there; with the key, the
   result is signed with a key derived from it, for this repository, commit and folder (grader/runner/attest.py).

The graded cases and the reference are sealed in lab/grader/sealed.bin. Its key is read from the file named by
ATTNLAB_SEAL_KEY_FILE, else /etc/attnlab/seal-key: a file on the instructor's self-hosted runner, never in this
folder (which Classroom 50 publishes) and never in the student's repository. `grade` reads it, refusing a file
that the workers' jail could read, and graded code never sees it. Without a key (a GitHub-hosted runner) the
public smoke checks run, and the result says so: each public check is worth 0 points, one failed test stands for
the graded cases with the assignment's whole maximum, and the commit status is `failure`, "not graded". The
graded score then comes from the instructor's regrade.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

if not sys.flags.isolated:  # the checkout is the student's: no sitecustomize, json.py or PYTHON* of theirs loads
    os.execv(sys.executable, [sys.executable, "-I", os.path.abspath(__file__), *sys.argv[1:]])

HERE = Path(__file__).resolve().parent
LAB = HERE / "lab"
TORCH = "@TORCH@"  # the version the lab is tested with (filled in by grade release classroom50)
TORCH_INDEX = "@TORCH_INDEX@"  # the CPU build: a plain `pip install torch` fetches CUDA's
KEY_FILE = "/etc/attnlab/seal-key"
PUBLIC_NOTE = ("Public smoke checks only: this runner holds no seal key, so the graded cases did not run. "
               "Passing these is not the grade; your instructor's regrade is.")  # said in the log


def say(line: str) -> None:
    print(line, flush=True)


def seal_key(checkout: Path) -> Path | None:
    """The file holding the key that opens the sealed cases, or None (then the public checks run). `grade` reads it
    itself, and refuses a file in a folder that graded code may read."""
    named = os.environ.get("ATTNLAB_SEAL_KEY_FILE", "").strip() or KEY_FILE
    path = Path(named)
    if not path.is_absolute():
        say(f"::warning title=Seal key::ATTNLAB_SEAL_KEY_FILE is not an absolute path ({named}); not read")
        return None
    real = path.resolve()
    if real == checkout or checkout in real.parents:  # a key the student's repository holds is theirs
        say("::warning title=Seal key::the seal key file lies inside the student's checkout; not read")
        return None
    return real if real.is_file() else None


def clean_env() -> dict:
    """This job's environment without the key or any token: the grader's children inherit none of them."""
    drop = ("ATTNLAB_SEAL_KEY", "TOKEN", "SECRET", "PASSWORD")
    return {k: v for k, v in os.environ.items() if not any(word in k.upper() for word in drop)
            and not k.startswith("PYTHON")}


def python_with_grader(scratch: Path) -> str:
    """The interpreter of a virtual environment holding PyTorch and the grader's requirements."""
    given = os.environ.get("ATTNLAB_VENV", "").strip()
    if given:
        return str(Path(given) / "bin" / "python")
    requirements = LAB / "grader" / "requirements.txt"
    want = f"{TORCH}\n{requirements.read_text()}\n{sys.version}\n{os.path.realpath(sys.executable)}\n"
    cache = os.environ.get("RUNNER_TOOL_CACHE", "").strip()
    if cache and os.environ.get("RUNNER_ENVIRONMENT", "").strip() == "self-hosted":
        # named by what it holds, so a runner whose python3 or the lab's pin changes builds anew beside it
        home = Path(cache) / "attnlab"
        venv = home / f"venv-{hashlib.sha256(want.encode()).hexdigest()[:16]}"
    else:
        home = None
        venv = Path(os.environ.get("RUNNER_TEMP") or tempfile.gettempdir()) / "attnlab-venv"
    python, stamp = venv / "bin" / "python", venv / ".attnlab-installed"
    started = time.monotonic()
    if stamp.is_file() and stamp.read_text() == want and imports(python, scratch):
        say(f"reusing the grader's environment {venv} (checked in {time.monotonic() - started:.1f} s)")
        return str(python)
    if venv.exists():
        say(f"rebuilding the grader's environment {venv} (it does not match this autograder or does not import)")
    shutil.rmtree(venv, ignore_errors=True)
    index = os.environ.get("ATTNLAB_TORCH_INDEX", TORCH_INDEX).strip()
    say(f"installing {TORCH} (CPU build) and the grader's requirements into {venv}...")
    for cmd in ([sys.executable, "-I", "-m", "venv", str(venv)],
                [str(python), "-I", "-m", "pip", "install", "-q", "--disable-pip-version-check", TORCH]
                + (["--index-url", index] if index else []),
                [str(python), "-I", "-m", "pip", "install", "-q", "--disable-pip-version-check",
                 "--only-binary", ":all:", "-r", str(requirements)]):
        subprocess.run(cmd, check=True, cwd=scratch, env=clean_env(), stdin=subprocess.DEVNULL)
    # written last: a job stopped mid-install leaves no stamp, so the next one rebuilds
    stamp.write_text(want)
    say(f"installed in {time.monotonic() - started:.0f} s")
    if home is not None:  # the venvs of an older pin or interpreter would only fill the runner's disk
        for old in home.glob("venv-*"):
            if old != venv:
                shutil.rmtree(old, ignore_errors=True)
    return str(python)


def imports(python: Path, scratch: Path) -> bool:
    """Whether a kept venv still starts and imports what grading needs (a half-deleted one does not)."""
    try:
        done = subprocess.run([str(python), "-I", "-c", "import torch, cryptography, pytest, click"], cwd=scratch,
                              env=clean_env(), stdin=subprocess.DEVNULL, capture_output=True, timeout=300)
    except (OSError, subprocess.SubprocessError):
        return False
    return done.returncode == 0


def put(path: Path, text: str) -> None:
    """Write `path` in one step, replacing a file or link there (never writing through a link)."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main() -> int:
    checkout = Path.cwd().resolve()
    for name in ("result.json", "release-body.md"):  # nothing the repository holds is taken for a result
        stale = checkout / name
        if stale.is_dir() and not stale.is_symlink():
            shutil.rmtree(stale)
        elif stale.is_symlink() or stale.exists():
            stale.unlink()
    key = seal_key(checkout)
    if not key:
        say(f"::warning title=Not the graded cases::{PUBLIC_NOTE}")
    with tempfile.TemporaryDirectory(prefix="attnlab-classroom50-") as tmp:
        scratch = Path(tmp)
        try:
            python = python_with_grader(scratch)
        except (subprocess.CalledProcessError, OSError) as e:
            say(f"::error title=Grading failed::could not install the grader ({e}); no score is posted")
            return 1
        report = scratch / "report.json"
        cmd = [python, "-I", str(LAB / "grader" / "boot.py"), *(["--seal-key-file", str(key)] if key else []),
               "--submission", str(checkout / "exercises"), "--format", "json", "--out", str(report)]
        done = subprocess.run(cmd, stdin=subprocess.DEVNULL, cwd=scratch, env=clean_env())
        if done.returncode > 1 or not report.is_file():
            say(f"::error title=Grading failed::grade stopped with exit code {done.returncode} before it could "
                "grade; its message is above. No score is posted.")
            return 1
        # the result document and the release's Markdown (every text a submission wrote in a code span), from the
        # report; with the key, signed for this repository, commit and this folder (`grade batch verify` checks it)
        files = subprocess.run([python, "-I", str(LAB / "grader" / "workflow.py"), "classroom50", str(report),
                                str(scratch), *(["signed", str(key), str(HERE)] if key else ["public"])],
                               stdin=subprocess.DEVNULL, cwd=scratch, env=clean_env())
        if files.returncode != 0:
            return 1
        doc = json.loads((scratch / "result.json").read_text(encoding="utf-8"))
        body = (scratch / "release-body.md").read_text(encoding="utf-8")
    put(checkout / "result.json", json.dumps(doc, indent=2) + "\n")
    put(checkout / "release-body.md", body)
    if key:
        say(f"Attention lab: {doc['score']}/{doc['max-score']} written to result.json")
    else:
        say(f"Attention lab: not graded (public smoke checks only); result.json holds 0/{doc['max-score']} and the "
            "commit status says not graded")
    return 0


if __name__ == "__main__":
    sys.exit(main())
