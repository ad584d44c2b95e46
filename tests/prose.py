"""What the README says of the lab's size, against what the registry and the hidden-case manifest hold.

Used by tests/test_prose.py on this checkout and by tests/release/test_adding_a_piece.py on a copy with a piece
added as docs/adding-a-piece.md says: a count or a total the prose restates must agree, or a test fails.
"""
from __future__ import annotations

import json
import re
from pathlib import Path

from grader.lesson.cells import number_word

# every place the README restates the total: (what, a pattern whose one group is the number)
TOTALS = (
    ("the per-push grade's total", r"gets the full grade, (\d+) points"),
    ("the not-graded smoke run's score", r"graded\*\* \(0/(\d+)"),
    ("the Markdown summary's line", r"\"Attention lab: X/(\d+) points\""),
    ("Gradescope's total points", r"set the total points to (\d+)\."),
)


def facts(root: Path) -> tuple[list[str], int]:
    """(the pieces in the registry's order, the manifest's total points) of the checkout at `root`."""
    pieces = list(json.loads((root / "grader" / "core" / "piece_facts.json").read_text(encoding="utf-8")))
    manifest = json.loads((root / "grader" / "cases" / "manifest.json").read_text(encoding="utf-8"))
    return pieces, sum(c["points"] for cases in manifest.values() for c in cases)


def disagreements(root: Path) -> list[str]:
    """Each place the README's prose disagrees with the registry or the manifest ([] where none does)."""
    pieces, total = facts(root)
    text = " ".join((root / "README.md").read_text(encoding="utf-8").split())
    found = []
    said = re.search(r"You write (\w+) pieces, one file each", text)
    if not said or said[1] != number_word(len(pieces)):
        found.append(f"the README's 'You write ... pieces' says {said[1] if said else 'nothing'}, the registry "
                     f"holds {len(pieces)}")
    rows = re.findall(r"\| `(\w+)` \| `\w+\.py` \|", text)
    if rows != pieces:
        found.append(f"the README's table of pieces lists {rows}, the registry {pieces}")
    for what, pattern in TOTALS:
        numbers = re.findall(pattern, text)
        if numbers != [str(total)]:
            found.append(f"{what} in the README says {numbers or 'nothing'}, the manifest sums {total}")
    return found
