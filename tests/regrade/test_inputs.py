"""Issue 31 §3: a resumed batch takes a journal's row only where every input that can change a score is the same:
the grader's code, and the artifacts it trains from (`grade artifacts`), its data, the Python, PyTorch and NumPy it
runs on, the cases, the seed and the limits. One student, the context piece, quick: a few seconds a run."""
from __future__ import annotations

import json
import shutil

import pytest
import torch
from helpers import REFERENCE

from grader.core import datasets
from grader.lab import artifacts
from grader.core.pieces import PIECES
from grader.regrade import digests
from grader.runner import schedule
from grader.runner.results import Limits
from grader.verbs import batch as verb

PIECE = "context"
QUICK = Limits(30, 120, 6, True)


@pytest.fixture
def rerun(tmp_path, monkeypatch):
    """run() grades the class of one repository into the same folder; returns (resumed, pieces graded)."""
    monkeypatch.setattr(verb, "PIECES", {PIECE: PIECES[PIECE]})
    klass = tmp_path / "class"
    shutil.copytree(REFERENCE, klass / "attention-lab-ada" / "exercises")
    out = tmp_path / "part" / "grades.csv"
    graded: list[str] = []
    real = schedule.Grading.run_units
    monkeypatch.setattr(schedule.Grading, "run_units",
                        lambda self, piece, judge_server: (graded.append(piece), real(self, piece, judge_server))[1])

    def run() -> tuple[int, int]:
        graded.clear()
        verb.main(submissions=[klass], out=out, reports=None, jobs=1, seed="7", progress=False, limits=QUICK)
        manifest = json.loads(out.with_name("grades-manifest.json").read_text())
        assert manifest["finished"] and len(manifest["students"]) == 1
        return manifest["resumed"], len(graded)

    return run


@pytest.mark.slow
def test_a_rerun_after_the_artifacts_are_retrained_grades_again(rerun, tmp_path, monkeypatch):
    assert rerun() == (0, 1)
    assert rerun() == (1, 0)  # the same inputs: the journal's row
    retrained = tmp_path / "artifacts"
    shutil.copytree(artifacts.DIR, retrained)
    (retrained / "warm_start.pt").write_bytes((retrained / "warm_start.pt").read_bytes() + b"\0")
    monkeypatch.setattr(artifacts, "DIR", retrained)  # `grade artifacts` wrote new warm starts
    assert rerun() == (0, 1)


@pytest.mark.slow
def test_a_rerun_on_another_torch_grades_again(rerun, monkeypatch):
    assert rerun() == (0, 1)
    monkeypatch.setattr(torch, "__version__", torch.torch_version.TorchVersion("9.9.9+other"))
    assert rerun() == (0, 1)


def test_every_input_a_score_can_follow_is_in_the_settings(tmp_path, monkeypatch):
    """The settings' digest changes with each input on its own (no grading: the digests only)."""
    def setting() -> str:
        s = digests.settings(seed="0", quick=False, limits={"case_timeout": 30}, before=None, release=None, pieces=[PIECE])
        return json.dumps(s, sort_keys=True)

    base = setting()
    data = tmp_path / "data"
    shutil.copytree(datasets.DATA_DIR, data)
    (data / "train.tsv").write_bytes((data / "train.tsv").read_bytes() + b"x\tx\n")
    with monkeypatch.context() as m:
        m.setattr(datasets, "DATA_DIR", data)
        assert setting() != base
    assert setting() == base
    retrained = tmp_path / "artifacts"
    shutil.copytree(artifacts.DIR, retrained)
    (retrained / "curves.json").write_text("{}\n")
    with monkeypatch.context() as m:
        m.setattr(artifacts, "DIR", retrained)
        assert setting() != base
    with monkeypatch.context() as m:
        m.setattr(torch, "__version__", torch.torch_version.TorchVersion("9.9.9"))
        assert setting() != base
    assert digests.settings(seed="1", quick=False, limits={"case_timeout": 30}, before=None, release=None,
                         pieces=[PIECE]) != json.loads(base)
    assert digests.settings(seed="0", quick=False, limits={"case_timeout": 31}, before=None, release=None,
                         pieces=[PIECE]) != json.loads(base)

