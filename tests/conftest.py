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


# The README's test command (`pytest -m "not slow"`) runs a few minutes and touches every area: the command line
# and plugin (grading), the wire, the imports, the jail and the stand-in device (worker), the data and cases
# (lab), every report format, a student release and its Classroom workflow, and the repository-root red team.
# These files grade many submissions in jailed workers, train, or build venvs: the full suite (CI) runs them.
SLOW_FILES = {
    "grading/test_bugs.py", "grading/test_faults.py", "grading/test_grading.py", "grading/test_batch.py",
    "lab/test_plots.py", "lab/test_train.py",
    "release/test_notebook.py", "release/test_student_release.py", "release/test_gradescope.py",
    "release/test_classroom50_runs.py", "release/test_classroom50_old_pythons.py", "release/test_seventh_piece.py",
    "platforms/test_platforms.py", "fairness/test_ports.py", "grading/test_fair_hints.py",
    *(f"redteam/{name}" for name in (
        "test_channels.py", "test_class_regrade.py", "test_files.py", "test_forgery.py", "test_frames.py", "test_gradescope.py",
        "test_introspection.py", "test_loops.py", "test_nofork.py", "test_oracles.py", "test_output.py",
        "test_processes.py", "test_reference_output.py", "test_regrade.py", "test_release_answers.py",
        "test_resources.py", "test_schedule.py", "test_secrets.py", "test_threads.py", "test_training.py")),
}


def pytest_collection_modifyitems(config, items):
    here = Path(__file__).parent
    for item in items:
        if item.path.relative_to(here).as_posix() in SLOW_FILES:
            item.add_marker(pytest.mark.slow)
