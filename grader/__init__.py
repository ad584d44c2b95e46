"""The attention lab's grader: hidden cases, a pytest plugin and the `grade` command."""
from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REFERENCE = ROOT / "reference"  # the solved pieces: the single source of the stubs, absent from a student release
EXERCISES = ROOT / "exercises"  # what students edit
