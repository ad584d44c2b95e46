"""The case manifest: every hidden case with its piece and points, read by the parent process.

The parent scores from this file, never from what a child claims a case is worth, and a case a
child never reports on still appears (as failed, with the reason). `grade manifest` rebuilds it.
"""
from __future__ import annotations

import json
from pathlib import Path

from . import ROOT

CASES_DIR = ROOT / "grader" / "cases"
MANIFEST = CASES_DIR / "manifest.json"


def collect() -> dict[str, list[dict]]:
    """Collect the hidden cases with pytest (no submission involved) and group them by piece."""
    import pytest

    from .pieces import PIECES

    found: dict[str, list[dict]] = {p: [] for p in PIECES}

    class Collector:
        @pytest.hookimpl(trylast=True)
        def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
            for item in items:
                piece, points = item.get_closest_marker("piece"), item.get_closest_marker("points")
                if piece is None or points is None:
                    raise pytest.UsageError(f"{item.nodeid} lacks a piece or points marker")
                found[piece.args[0]].append({"case": item.name, "points": points.args[0]})

    args = ["--collect-only", "-qq", "-p", "no:cacheprovider", "-p", "grader.plugin", str(CASES_DIR)]
    code = pytest.main(args, plugins=[Collector()])
    if code != 0:
        raise RuntimeError(f"collecting the hidden cases failed (pytest exit {code})")
    return found


def write(path: Path = MANIFEST) -> dict[str, list[dict]]:
    data = collect()
    path.write_text(json.dumps(data, indent=1) + "\n")
    return data


def read(path: Path = MANIFEST) -> dict[str, list[dict]]:
    return json.loads(path.read_text())
