"""The red-team folder's fixture: the arena every hostile submission is graded in (redteam/harness.py)."""
from __future__ import annotations

import subprocess

import pytest

from .harness import Arena


@pytest.fixture
def arena(tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    marks.chmod(0o777)  # writable by anyone: only the jail stands between the worker and a marker here
    sentinel = subprocess.Popen(["sleep", "600"])
    try:
        yield Arena(marks, sentinel)
    finally:
        sentinel.kill()
        sentinel.wait()
