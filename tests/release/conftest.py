"""Fixtures of the release tests: one student release, built once for the folder."""
from __future__ import annotations

from pathlib import Path

import pytest

from grader.release.build import student


@pytest.fixture(scope="package")
def release(tmp_path_factory) -> tuple[Path, bytes]:
    """A student release (grade release student) and its seal key; the tests only read it and run grade in it."""
    return student(tmp_path_factory.mktemp("rel") / "lab")
