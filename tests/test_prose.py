"""The README's counts of pieces and points are the registry's and the manifest's (issue 39)."""
from __future__ import annotations

from grader import ROOT

from prose import disagreements, facts


def test_the_readme_counts_the_pieces_and_points_the_registry_and_manifest_hold():
    assert disagreements(ROOT) == []


def test_a_readme_that_restates_an_old_total_or_count_is_caught(tmp_path):
    for rel in ("grader/piece_facts.json", "grader/cases/manifest.json"):
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text((ROOT / rel).read_text())
    _, total = facts(ROOT)
    text = (ROOT / "README.md").read_text().replace(f"set the total points to {total}.", "set the total points to 99.")
    (tmp_path / "README.md").write_text(text.replace("You write six pieces", "You write seven pieces"))
    found = disagreements(tmp_path)
    assert len(found) == 2 and any("Gradescope" in f for f in found) and any("You write" in f for f in found)
