"""The case manifest: every hidden case with its piece and points, read by the parent process.

The parent scores from this file, never from what a child claims a case is worth, and a case a
child never reports on still appears (as failed, with the reason). `grade manifest` rebuilds it.
"""
from __future__ import annotations

import json
import subprocess
import tempfile
from pathlib import Path

from grader.core import host
from grader.runner.layout import CASES, PUBLIC  # where the cases live: grader.runner.layout says, for every run

MANIFEST = CASES / "manifest.json"


def collect(path: Path, cases: Path = CASES) -> dict[str, list[dict]]:
    """Collect the cases in `cases` with pytest (no submission involved) into `path`."""
    from grader.core.childenv import child_env

    with tempfile.TemporaryDirectory() as tmp:
        ini = Path(tmp) / "pytest.ini"
        ini.write_text("[pytest]\n")
        cmd = host.python("pytest", "--collect-only", "-q", "-p", "grader.judge.plugin", "-p", "no:cacheprovider",
                          "-c", str(ini), "--rootdir", tmp, "--attnlab-manifest", str(path), str(cases))
        done = subprocess.run(cmd, env=child_env(), capture_output=True, text=True, cwd=tmp)
    if done.returncode != 0:
        raise RuntimeError(f"collecting the hidden cases failed:\n{done.stdout[-2000:]}{done.stderr[-2000:]}")
    return read(path)


def write() -> dict[str, list[dict]]:
    """Rebuild both manifests: the hidden cases' and the public smoke checks'."""
    collect(PUBLIC / "manifest.json", PUBLIC)
    return collect(MANIFEST)


def read(path: Path = MANIFEST) -> dict[str, list[dict]]:
    return json.loads(path.read_text())
