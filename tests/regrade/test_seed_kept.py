"""Issue 50 §3: a batch's hidden seed is in no file an instructor may hand out: with it a student computes every
hidden input and the context case's probe shapes. The per-student reports carry its SHA-256 (which tells two runs
apart), as the manifest does. One student, the context piece, quick."""
from __future__ import annotations

import hashlib
import json
import shutil

import pytest
from helpers import REFERENCE

from grader.core.pieces import PIECES
from grader.runner.results import Limits
from grader.verbs import batch as verb

SEED = "s3cret-seed-4f9c"


@pytest.mark.slow
def test_the_seed_is_in_no_file_beside_the_gradebook_only_its_digest(tmp_path, monkeypatch):
    monkeypatch.setattr(verb, "PIECES", {"context": PIECES["context"]})
    klass = tmp_path / "class"
    shutil.copytree(REFERENCE, klass / "attention-lab-ada" / "exercises")
    out = tmp_path / "out" / "grades.csv"
    verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed=SEED, progress=False,
              limits=Limits(30, 120, 6, True))
    files = [p for p in out.parent.rglob("*") if p.is_file()]
    assert any(p.name == "attention-lab-ada.json" for p in files), files
    holding = [str(p.relative_to(out.parent)) for p in files if SEED.encode() in p.read_bytes()]
    assert holding == []
    digest = hashlib.sha256(SEED.encode()).hexdigest()
    report = json.loads(next(p for p in files if p.name == "attention-lab-ada.json").read_text())
    assert report["seed_sha256"] == digest and report["score"] == report["max_score"]
