"""Helpers for the project's own tests: build submissions from the reference and grade them.

Test modules import these from here (`from helpers import ...`); tests/conftest.py holds the fixtures.
"""
from __future__ import annotations

import atexit
import json
import os
import shutil
import site
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from grader import ROOT
from grader.runner.schedule import grade
from grader.runner.stage import stage
from grader.core.pieces import MODULES
from grader.runner.report import as_dict
from grader.runner.judge_servers import JudgeServer
from grader.runner.results import Limits

REFERENCE = ROOT / "reference"


def eventually(check, within: float, every: float = 0.05):
    """check()'s value once it is truthy, else its last value when `within` seconds have passed. Tests wait for a
    process to end (or for harm to show) this way, never with a fixed sleep before an assert: a slow machine gets
    the whole deadline, and a fast one waits for nothing it need not."""
    end = time.monotonic() + within
    while True:
        value = check()
        if value or time.monotonic() >= end:
            return value
        time.sleep(every)

EXERCISES = ROOT / "exercises"
QUICK = Limits(case_timeout=30, piece_timeout=120, memory_gb=6, quick=True)
# the points as the hidden cases' manifest sums them: no test hard-codes a total a new piece would change
_MANIFEST = json.loads((ROOT / "grader" / "cases" / "manifest.json").read_text())
POINTS = {piece: sum(c["points"] for c in cases) for piece, cases in _MANIFEST.items()}
TOTAL = sum(POINTS.values())
QUICK_TOTAL = sum(c["points"] for cases in _MANIFEST.values() for c in cases if not c.get("slow"))


def make_submission(where: Path, edits: dict[str, list[tuple[str, str]]] | None = None,
                    files: dict[str, str] | None = None, base: Path = REFERENCE) -> Path:
    """A copy of `base` with text replacements (each must match) and whole files swapped in."""
    where.mkdir(parents=True, exist_ok=True)
    for m in MODULES:
        if (base / f"{m}.py").exists():
            shutil.copyfile(base / f"{m}.py", where / f"{m}.py")
    for name, pairs in (edits or {}).items():
        path = where / f"{name}.py"
        text = path.read_text()
        for old, new in pairs:
            assert old in text, f"edit target not found in {name}.py: {old!r}"
            text = text.replace(old, new)
        path.write_text(text)
    for name, text in (files or {}).items():
        (where / f"{name}.py").write_text(text)
    return where


_judge_server: list[JudgeServer] = []


def shared_judge_server() -> JudgeServer:
    """One fork server for the whole test session: each piece still runs in its own fresh child."""
    if not _judge_server or not _judge_server[0].alive():
        _judge_server[:] = [JudgeServer()]
        atexit.register(_judge_server[0].close)
    return _judge_server[0]


def grade_dict(submission: Path, pieces: list[str], limits: Limits = QUICK, seed: str = "0", lanes: bool = False) -> dict:
    """Grade on the session's fork server, or (lanes=True) as `grade` does: on fork servers of its own, two
    pieces at a time when one trains."""
    with tempfile.TemporaryDirectory(prefix="attnlab-test-") as tmp:
        staged = stage(submission, Path(tmp))
        judge_server = None if lanes else shared_judge_server()
        return as_dict(grade(submission=staged, pieces=pieces, seed=seed, limits=limits, judge_server=judge_server))


def scores(report: dict) -> dict[str, tuple[int, int]]:
    return {p["name"]: (p["score"], p["max_score"]) for p in report["pieces"]}


def at_import(code: str) -> list[tuple[str, str]]:
    """An edit (for make_submission) that runs `code` when encoder.py is imported."""
    return [("import torch.nn as nn\n", f"import torch.nn as nn\n{code}\n")]


def venv_over_this_environment(venv: Path, *, process_pth: bool) -> Path:
    """A fresh venv (no pip of its own) that sees the packages of the environment running the tests; its python.

    `--system-site-packages` would show the *base* interpreter's site-packages, which on a clean machine hold
    none of the test environment's packages. Here the running environment's own site directories are added by
    a `.pth` file instead: as plain paths (its `.pth` hooks, such as the instructor's editable grader, stay off),
    or, with `process_pth`, through `site.addsitedir`, so those hooks load too.
    """
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    py = venv / ("Scripts/python.exe" if os.name == "nt" else "bin/python")
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    ours = dict.fromkeys([*site.getsitepackages(), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    dirs = [d for d in ours if os.path.isdir(d)]
    lines = ([f"import site; site.addsitedir({d!r})" for d in dirs] if process_pth else dirs)
    # "zz": after the venv's own .pth files, so what the venv installs itself comes first
    (Path(purelib) / "zz_test_environment.pth").write_text("\n".join(lines) + "\n")
    return py
