"""Generated files stay in step with their sources: stubs, the case manifest, the data and its card."""
from __future__ import annotations

import hashlib
import json
import re

import pytest

from grader import ROOT
from grader.runner import manifest
from grader.lesson import stubs
from grader.lab import toy
from grader.core.pieces import PIECES


def test_the_stubs_are_what_the_reference_generates():
    drift = [str(p.relative_to(ROOT)) for p, text in stubs.expected().items() if not p.exists() or p.read_text() != text]
    assert not drift, f"exercises/ drifted from reference/: run `grade stubs` ({drift})"


def test_the_pieces_facts_are_what_grade_stubs_derives_from_the_reference():
    from grader.core.pieces import FACTS

    assert FACTS.read_text(encoding="utf-8") == stubs.facts(), "grader/core/piece_facts.json is stale: run `grade stubs`"


def test_a_piece_missing_from_the_facts_stops_with_a_line_that_says_to_run_grade_stubs(tmp_path, monkeypatch):
    from grader.core import pieces

    (tmp_path / "facts.json").write_text('{"encoder": {"imports": [], "stub_digest": "0"}}')
    monkeypatch.setattr(pieces, "FACTS", tmp_path / "facts.json")
    pieces._facts.cache_clear()
    try:
        with pytest.raises(RuntimeError, match="run `grade stubs`"):
            _ = PIECES["additive"].imports
    finally:
        pieces._facts.cache_clear()


def test_every_stub_names_its_piece_and_keeps_no_solution():
    for piece in PIECES.values():
        text = (stubs.EXERCISES / f"{piece.module}.py").read_text()
        assert f"NotImplementedError(\"piece '{piece.name}'" in text
        assert "BEGIN SOLUTION" not in text and "_keys_of" not in text


def test_the_manifest_matches_the_collected_cases(tmp_path):
    fresh = manifest.collect(tmp_path / "m.json")
    assert fresh == manifest.read(), "grader/cases/manifest.json is stale: run `grade manifest`"
    assert all(case["points"] >= 0 for cases in fresh.values() for case in cases)


def test_the_committed_splits_are_what_the_seeded_generator_makes():
    for split, size in toy.SPLITS.items():
        pairs = toy.read_split(split)
        assert len(pairs) == size
        assert pairs == [(s, t) for s, t in toy.generate(split)]
        assert all(1 <= len(s) <= toy.MAX_LEN and t == toy.translate(s) for s, t in pairs)


def test_the_data_card_lists_the_real_checksums():
    card = (toy.DATA_DIR / "README.md").read_text()
    for split in toy.SPLITS:
        digest = hashlib.sha256(toy.split_path(split).read_bytes()).hexdigest()
        assert re.search(rf"{split}\.tsv.*{digest}", card), f"the data card's checksum for {split} is stale"


def test_the_graders_split_digests_are_those_of_the_committed_files():
    from grader.core import datasets

    assert set(datasets.DIGESTS) == set(toy.SPLITS)
    for split, digest in datasets.DIGESTS.items():
        assert hashlib.sha256(toy.split_path(split).read_bytes()).hexdigest() == digest


def test_a_changed_split_stops_the_grade_with_a_line_that_says_which_and_how_to_restore_it(tmp_path, monkeypatch):
    from grader.core import datasets

    for split in datasets.DIGESTS:
        (tmp_path / f"{split}.tsv").write_bytes(toy.split_path(split).read_bytes())
    with (tmp_path / "test.tsv").open("a") as f:
        f.write("cat\tchat\n")
    monkeypatch.setattr(datasets, "DATA_DIR", tmp_path)
    datasets.split_text("train")  # unchanged: read as before
    for check in (datasets.verify, lambda: toy.read_split("test")):
        try:
            check()
        except datasets.DataChanged as e:
            assert "datasets/toy_translation/test.tsv is not the lab's own" in str(e) and "git checkout" in str(e)
        else:
            raise AssertionError("a changed split was read")
    (tmp_path / "valid.tsv").unlink()
    try:
        datasets.split_text("valid")
    except datasets.DataChanged as e:
        assert "valid.tsv cannot be read" in str(e)
    else:
        raise AssertionError("a missing split was read")


def test_requirements_the_classroom_workflow_installs_are_the_projects_dependencies():
    import tomllib

    listed = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    lines = (ROOT / "grader" / "requirements.txt").read_text().splitlines()
    assert [line for line in lines if line and not line.startswith("#")] == listed


def test_datasets_is_not_an_importable_package():
    assert not (ROOT / "datasets" / "__init__.py").exists()


def test_adjective_noun_pairs_are_swapped():
    assert toy.translate(["the", "red", "car", "sees", "a", "dog"]) == ["le", "voiture", "rouge", "voit", "un", "chien"]
    assert toy.translate(["red"]) == ["rouge"]


def test_the_artifact_checksums_hold():
    sums = json.loads((ROOT / "grader" / "artifacts" / "SHA256SUMS.json").read_text())
    for name, digest in sums.items():
        assert hashlib.sha256((ROOT / "grader" / "artifacts" / name).read_bytes()).hexdigest() == digest
