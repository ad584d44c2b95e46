"""Fairness: public Bahdanau and Luong implementations, ported into the stubs' API, get the score they deserve.

Each file in ports/ is one piece's module: the lab's constructor (its parameter layout, which the cases copy the
reference's weights into) around the forward of a public implementation, changed only where the lab's API asks
(batch first, the lab's layer names, one decoder step per call). Its docstring names the repository and path it
comes from and what was changed. An equivalent port must earn full marks; one that is not (Luong's dot score
without 1/sqrt(d), a softmax over the batch, no mask, attending with the new state) must lose points with hints
that name its cause, or point to a case that does. Each is graded alone, quick, on its own piece.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

import pytest

from grader.core.pieces import PIECES
from grader.runner.report import title

from helpers import QUICK, grade_dict, scores

pytestmark = pytest.mark.slow  # grades in jailed workers, trains or builds venvs: the full suite (CI) runs it

PORTS = Path(__file__).parent / "ports"
POINTER = re.compile(r"See the case '([^']+)' for the cause\.")
SOURCE = re.compile(r"^Source: ([\w.-]+/[\w.-]+),\s+\S", re.M)  # "Source: owner/repository, path ..."


@dataclass(frozen=True)
class Port:
    file: str  # ports/<piece>__<name>.py
    cause: str | None = None  # None: equivalent, full marks; else what the failed cases' hints must say
    score: int | None = None  # the quick score of a port that is not equivalent

    @property
    def piece(self) -> str:
        return self.file.partition("__")[0]

    def source(self) -> str:
        return (PORTS / f"{self.file}.py").read_text()


EQUIVALENT = [
    Port("additive__bentrevett"),  # concatenated projection, masked_fill(mask == 0, -1e10)
    Port("additive__d2l"),  # masked_softmax from valid lengths, -1e6
    Port("additive__allennlp"),  # masked_softmax: multiply by the mask and renormalise
    Port("additive__opennmt"),  # GlobalAttention "mlp", expanded query and keys, -inf
    Port("additive__joeynmt"),  # torch.where(mask > 0, scores, -inf)
    Port("luong__d2l"),  # scaled DotProductAttention, -1e6
    Port("luong__allennlp_scaled"),  # ScaledDotProductAttention, renormalised
    Port("encoder__bentrevett_packed"),  # pack_padded_sequence, lengths on the CPU
    Port("decoder__pytorch_tutorial"),  # log_softmax of the stacked logits
    Port("decoder__pytorch_tutorial_per_step"),  # log_softmax at every step
    Port("decoder__bentrevett"),  # a zeros buffer on the source's device, filled step by step
]
NOT_EQUIVALENT = [
    Port("additive__pytorch_tutorial", r"not exactly 0 at pad positions: set their scores to -inf", score=5),
    Port("additive__time_major_softmax", r"take the softmax over the source positions \(the last dimension\)", score=0),
    Port("luong__allennlp_unscaled", r"unscaled: divide the dot products by sqrt\(d\)", score=1),
    Port("luong__ibm", r"unscaled: divide the dot products by sqrt\(d\)", score=1),
    Port("luong__spro", r"unscaled: divide the dot products by sqrt\(d\)|not exactly 0 at pad positions", score=1),
    # at T_src = 1 alpha is 1 whatever the query: there the LSTMCell's input (fed h_prev, not the context) is named
    Port("decoder__joeynmt", r"computed from the new hidden state h_t, after the LSTMCell|Feed the LSTMCell the "
                             r"concatenation \[embedding of y_prev; context\]", score=0),
]
ALL = EQUIVALENT + NOT_EQUIVALENT


def graded(port: Port, lab) -> dict:
    return grade_dict(lab(files={PIECES[port.piece].module: port.source()}), [port.piece], QUICK)


def failed(report: dict) -> dict[str, str]:
    return {title(c["name"]): c["message"] for p in report["pieces"] for c in p["cases"]
            if not c["passed"] and not c["skipped"]}


def test_every_port_is_here_and_cites_the_repository_and_path_it_comes_from():
    assert sorted(p.file for p in ALL) == sorted(f.stem for f in PORTS.glob("*.py"))
    assert len({SOURCE.search(p.source())[1] for p in ALL if SOURCE.search(p.source())}) >= 8
    for port in ALL:
        doc = port.source().split('"""')[1]
        assert SOURCE.search(doc), f"{port.file}: its docstring does not name its source as 'Source: owner/repo, path'"
        assert "Changes to fit the lab's API" in doc and ("Equivalent" in doc or "Not equivalent" in doc), port.file


@pytest.mark.parametrize("port", EQUIVALENT, ids=lambda p: p.file)
def test_an_equivalent_port_earns_full_marks(port, lab):
    report = graded(port, lab)
    got, most = scores(report)[port.piece]
    assert got == most, f"{port.file}: {got}/{most}: {failed(report)}"


@pytest.mark.parametrize("port", NOT_EQUIVALENT, ids=lambda p: p.file)
def test_a_port_that_is_not_equivalent_loses_points_with_hints_that_name_its_cause(port, lab):
    report = graded(port, lab)
    got, most = scores(report)[port.piece]
    assert got == port.score < most, f"{port.file}: {got}/{most}: {failed(report)}"
    messages = failed(report)
    naming = {name for name, message in messages.items() if re.search(port.cause, message)}
    assert naming, f"{port.file}: no failed case names the cause: {messages}"
    for name, message in messages.items():
        if name in naming:
            continue
        pointer = POINTER.search(message)
        assert pointer and pointer[1] in naming, f"{port.file}: {name!r} neither names the cause nor points to a " \
                                                 f"case that does: {message}"


@pytest.mark.slow  # two training runs of the decoder (about a minute each on 2 cores)
@pytest.mark.parametrize("port", ["decoder__pytorch_tutorial", "decoder__pytorch_tutorial_per_step"])
def test_a_decoder_that_returns_log_probabilities_earns_all_18_points_the_training_case_included(port, lab):
    from grader.runner.results import Limits

    full = Limits()  # not quick: the training case runs, with its own time limit
    report = grade_dict(lab(files={"decoder": (PORTS / f"{port}.py").read_text()}), ["decoder"], full)
    assert scores(report)["decoder"] == (18, 18), failed(report)
