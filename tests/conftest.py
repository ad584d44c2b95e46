"""Fixtures shared by every test folder; the helpers they use are in tests/helpers.py.

The folders under tests/ are packages, so their own conftest.py files (redteam/, release/) load under
their package's name and never replace this module as `conftest`.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from helpers import REFERENCE, make_submission


@pytest.fixture
def lab(tmp_path: Path):
    """build(edits=None, files=None, base=REFERENCE): a fresh copy of the reference (or `base`) with edits."""
    counter = iter(range(10**6))

    def build(edits=None, files=None, base: Path = REFERENCE) -> Path:
        return make_submission(tmp_path / f"sub{next(counter)}", edits, files, base)

    return build
